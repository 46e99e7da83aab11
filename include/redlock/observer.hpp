#ifndef REDLOCK_OBSERVER_HPP
#define REDLOCK_OBSERVER_HPP

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <string_view>

namespace redlock {

/// The outcome of one acquire: async_acquire or async_try_acquire of a lock, or of a semaphore's
/// permit. Reported once per operation, whatever ends it (success, refusal, timeout, node failures,
/// cancellation, bad arguments).
struct acquire_event {
  /// The lock's resource, or the semaphore's name. Valid only during the call.
  std::string_view resource;
  /// Empty: acquired. Otherwise the code the caller gets; compare it with redlock::condition
  /// (not_acquired, node_failure) to group outcomes.
  boost::system::error_code error;
  /// From the call to its outcome (the reply or event that decided it), queueing behind local
  /// holders and waiting included.
  std::chrono::steady_clock::duration took{};
  /// Rounds of SETs sent (0 when it ended before any, e.g. cancelled in the local queue).
  unsigned rounds = 0;
  /// Nodes that granted the round that decided the outcome (a quorum or more when acquired).
  std::size_t granted_nodes = 0;
};

/// The outcome of something done to a held lease: an extension (renewal or async_extend), its
/// loss, or its release.
struct lease_event {
  /// The lock's resource, or the semaphore's name. Valid only during the call.
  std::string_view resource;
  /// on_extend: empty when a quorum confirmed the extension in time, else the extension's error
  /// (not_held, no_quorum, invalid_argument, ...). on_lost: error::lock_lost. on_release: empty
  /// when released (or released best effort, when the lease was destroyed or the client shut down
  /// without waiting), else what async_release completed with.
  boost::system::error_code error;
  /// Since the lease was acquired (the start of its winning round), until the event; for a
  /// release, until its requests were sent (the lease stops being held there). 0 for an extension
  /// or release refused because the lease was never held.
  std::chrono::steady_clock::duration held{};
};

/// A node's link came up or went down. A standalone node is one link; a Redis Cluster node is up
/// while every master it routes to is reachable; a Sentinel node follows its current master.
/// Reported on changes only: a node that keeps failing to connect is reported down once.
struct node_event {
  std::size_t node = 0;             ///< index in the client's node list
  std::string_view address;         ///< node_config::address(); valid only during the call
  bool up = false;                  ///< true when the link came up, false when it went down
  boost::system::error_code error;  ///< why it went down; empty when up
};

/// Receives what the client does, for metrics, tracing or alerts (client_options::observer). Each
/// function is called on the client's executor, after the outcome is decided and before (for
/// acquires, releases and extensions) the caller's handler runs. It is called from inside the
/// library's own handlers (a reply being read, a vote being decided), as the logger is, so that an
/// event costs no allocation: it must not block, and must not call the client, a lease or a
/// semaphore directly; post such work to the executor instead. An exception it throws does not
/// disturb the operation: it is rethrown from a handler posted to the client's executor, so it
/// comes out of io_context::run(), as a throwing logger's does. The default implementations do
/// nothing; override what you need. The object is shared by the client and everything it started,
/// and called from its executor only: no locking is needed inside, unless the same observer serves
/// clients on several executors (then it must be thread safe).
///
/// @see The guide: @ref md_docs_metrics.
class observer {
 public:
  virtual ~observer() = default;
  /// Every acquire's outcome, try or wait, lock or semaphore permit.
  virtual void on_acquire(const acquire_event&) {}
  /// Every renewal's or async_extend's outcome.
  virtual void on_extend(const lease_event&) {}
  /// A held lease was lost: an extension found it gone, or its validity ran out.
  virtual void on_lost(const lease_event&) {}
  /// A held lease was released: async_release, or destruction or shutdown (best effort).
  virtual void on_release(const lease_event&) {}
  /// A node's link came up or went down.
  virtual void on_node(const node_event&) {}
};

}  // namespace redlock

#endif
