#ifndef REDLOCK_OPTIONS_HPP
#define REDLOCK_OPTIONS_HPP

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace redlock {

class observer;  // redlock/observer.hpp

/// Exponential backoff with full jitter: the n-th delay is drawn uniformly from [0, d_n] where
/// d_0 = initial_delay and d_{n+1} = min(d_n * multiplier, max_delay).
struct retry_policy {
  /// d_0, the bound of the first delay.
  std::chrono::milliseconds initial_delay{50};
  /// The largest bound d_n grows to. A value below initial_delay counts as initial_delay.
  std::chrono::milliseconds max_delay{1000};
  /// Growth of the bound from one delay to the next. A value below 1 counts as 1.
  double multiplier = 2.0;
};

/// Severity of a message passed to the logger.
///
/// - debug: why an acquire round did not win.
/// - info: a node connected; the sentinels named the master.
/// - warning: something failed or is degraded, such as a node's connection, an extension, a lease
///   that was lost, or a lock acquired on fewer than all nodes.
/// - error: an acquire that cannot succeed and gives up at once, or a connection that cannot go on.
enum class log_level { debug, info, warning, error };

/// Receives the library's diagnostics (connects, disconnects, handshake failures, protocol errors),
/// each naming the node. Called on the client's executor; it must not block. An exception it
/// throws is rethrown from a handler posted to that executor, so it comes out of run() without
/// disturbing the operation that was logging.
using logger = std::function<void(log_level, std::string_view message)>;

/// Bounds on what one node may send back: a guard against a broken or hostile peer, or a port that
/// is not Redis at all. A reply beyond them is a protocol error: that node's connection is closed
/// and reopened, and its vote in the operations in flight is lost. The lock's own replies are a few
/// dozen bytes; the defaults leave ample room for long error texts.
struct reply_limits {
  /// Memory one reply may take once parsed: every value in it counts its in-memory size (about a
  /// hundred bytes) plus its text, and an aggregate's elements count as soon as it declares them.
  /// At least 1024. The wire size and the read buffer are bounded accordingly.
  std::size_t max_reply_memory = 64 * 1024;
  /// Nesting of aggregates (arrays, maps, sets, pushes) in one reply; a top-level array is 1.
  std::size_t max_depth = 8;
};

/// A client's settings, passed to its constructor.
///
/// @see The guide: @ref md_docs_configuration, @ref md_docs_waiting.
struct client_options {
  /// Deadline of each request on each node. A node that has not answered by then counts as a
  /// no-vote for that round; its late reply is read and dropped. Keep it well below the lock TTLs
  /// in use. Once a request to a node has timed out and the node has not answered it since
  /// (stopped, stalled, far behind, or stuck in a connect), acquire rounds, extensions and pings
  /// skip that node: they count it as failed at once with error::node_unresponsive instead of
  /// waiting out the deadline again, so a round that cannot win without it frees its keys on the
  /// other nodes at once. Releases are still sent. The node is asked again as soon as the late
  /// replies arrive.
  ///
  /// Auto-renewal is the exception: a renewal waits for each node's answer for as long as its
  /// lease is still valid (at least node_timeout), since a late confirmation is as safe as a
  /// prompt one until then. A loaded server or machine then slows renewals down instead of making
  /// them fail until leases are lost. A user's lease::async_extend keeps node_timeout.
  std::chrono::milliseconds node_timeout{100};

  /// Bound on TCP connect plus the AUTH/SELECT/CLIENT SETNAME handshake.
  std::chrono::milliseconds connect_timeout{1000};

  /// Clock drift allowance per unit of TTL (Redlock's drift factor): validity loses
  /// ttl * drift_factor + 2 ms.
  double drift_factor = 0.01;

  /// Delay between reconnect attempts of a node that is down (jittered; reset after a success).
  /// While a node is down, requests to it fail at once instead of waiting.
  retry_policy reconnect{std::chrono::milliseconds(50), std::chrono::milliseconds(2000), 2.0};

  /// A connection whose oldest written request has had no reply byte for this long is considered
  /// dead (a hung or stopped server): it is closed and reopened, failing what is in flight. It is
  /// checked every quarter of this time, and reads are seen at those checks: a hung server is found
  /// between 1 and 1.5 times this long after its last reply. Zero or less: no health check.
  std::chrono::milliseconds health_check_timeout{5000};

  /// Sent as CLIENT SETNAME after connecting, so operators can spot the lock clients in
  /// CLIENT LIST. Empty: no name is set.
  std::string client_name = "redlock-asio";

  /// Optional: receives diagnostics. Empty: nothing is logged.
  redlock::logger logger{};

  /// See reply_limits.
  reply_limits replies{};

  /// Where releases are announced, so that waiters in other processes wake at once instead of at
  /// their next retry. Every release (and every cleanup of a failed round) that deletes a key also
  /// PUBLISHes the resource name on this channel of that node; a client whose acquires wait for a
  /// lock held elsewhere subscribes to it on every node (one extra connection per node, only while
  /// something waits). Every client of one lock must use the same channel. A refused round also
  /// learns the holder's remaining TTL (PTTL), so a waiter never sleeps past the moment the key can
  /// have expired on a quorum: a missed announcement (expiry, an operator's DEL, a holder with
  /// announcements off) costs latency, never the lock. Empty: nothing is announced or subscribed,
  /// and waiters retry after their backoff (still bounded by the TTL they learned).
  std::string release_channel = "redlock:released";

  /// Optional: told every acquire's, extension's, loss's and release's outcome and every node link
  /// change (redlock/observer.hpp), e.g.\ redlock::prometheus_observer for metrics. Called on the
  /// client's executor; it must not block. Null: nothing is observed, and nothing is measured for
  /// it (no clock read, no event built).
  std::shared_ptr<redlock::observer> observer{};
};

/// How one lock is taken and held.
///
/// @see The guide: @ref md_docs_configuration, @ref md_docs_fencing.
struct lock_options {
  /// Lifetime of the key on each node. The lock is valid for ttl minus the time the acquire took
  /// minus the drift allowance (ttl * drift_factor + 2 ms); renewal extends it by ttl again.
  std::chrono::milliseconds ttl{10000};

  /// How long async_acquire keeps trying. Unset: until acquired or cancelled.
  std::optional<std::chrono::milliseconds> wait{};

  /// Delay between rounds when the lock is held elsewhere or too few nodes answered (full jitter).
  retry_policy retry{std::chrono::milliseconds(10), std::chrono::milliseconds(250), 2.0};

  /// Extend the lock while it is held, once less than half of the TTL is left of its validity (at
  /// half of the TTL after the acquire), by the TTL or by whatever more keeps the validity already
  /// claimed (after a longer async_extend). A failed renewal is tried again every tenth of the TTL
  /// (10 to 500 ms) while validity lasts. A renewal is moved earlier, to the start of its tick (a
  /// 64th of the TTL, 1 to 25 ms), and a client's renewals of plain locks that fall due together
  /// go out as one token-checked script per node (a client may hold 100 000 renewed leases).
  bool auto_renew = true;

  /// Renewal never keeps the lock past this long after it was acquired: its last extension ends
  /// there, then the lock expires and the lease is lost. Unset: renewed until released.
  std::optional<std::chrono::milliseconds> max_hold{};

  /// Fairness between processes. When a lease of this client releases a resource that other
  /// acquires of the same client are waiting for, the next one may take it over directly: its SET
  /// goes out in the same write as the release, before waiters in other processes can even learn
  /// that the lock was free. That is fast, but a busy process would keep the lock for itself. After
  /// this many such hand-offs in a row, the release is announced instead (client_options::
  /// release_channel) and the local waiter competes with the others on equal terms: it waits for
  /// the same announcement, with the same small random delay. 0: always compete. Set by the
  /// releasing lease's options.
  unsigned local_handoffs = 4;

  /// Fencing tokens (lease::fencing_token()): a number that strictly increases from one lease of
  /// the resource to the next, for a storage to reject writes of a holder that lost the lock
  /// without knowing (paused past its TTL). Each node keeps a counter beside the lock key (same
  /// hash slot, no TTL, never lowered) that the acquire increments where its SET is granted; the
  /// token is the highest of the granting nodes' counters, and before the acquire completes a
  /// second request raises the counter to the token on those nodes, which a quorum must confirm
  /// while the lock is valid (else the acquire releases and tries again like a failed round).
  /// Costs one more round trip per acquire. Needs counters that survive a restart (appendonly yes,
  /// appendfsync always) and are never evicted. Off: no counter key, no extra round trip.
  bool fencing = false;
};

}  // namespace redlock

#endif
