#ifndef REDLOCK_LEASE_STATE_HPP
#define REDLOCK_LEASE_STATE_HPP

#include "algo/extension_validity.hpp"
#include "clock.hpp"
#include "intrusive_list.hpp"
#include "lock/local_queues.hpp"
#include "lock_space.hpp"
#include "redlock/lease.hpp"
#include "redlock/observer.hpp"
#include "redlock/options.hpp"

#include <boost/system/error_code.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace redlock::detail {

using std::chrono::steady_clock;

class user_operation;
struct resource_queue;

// Everything behind a redlock::lease. Lives on the client's executor. How extensions move its
// validity is extension_validity's (algo/extension_validity.hpp).
struct lease_state : list_hook, std::enable_shared_from_this<lease_state> {
  enum class phase : std::uint8_t { never_held, held, released, lost };

  lease_state(std::shared_ptr<lock_space> space, std::string resource, const lock_options& options);
  ~lease_state();

  std::shared_ptr<lock_space> space;
  std::string resource;
  // What the lease holds on every node (hold.hpp); `resource` is the key its acquire set.
  hold_kind kind = hold_kind::lock;
  // A read-write lock's: a writer's mark key and mark id, and the lock's queue key (rw_queue_key),
  // which its release announcements say and under which its local queue is kept.
  std::string mark_key;
  std::string mark_id;
  std::string queue_key;
  // A set's (hold_kind::set): every resource, sorted (normalize_set); `resource` is the first.
  std::vector<std::string> resources;
  // What observer events name, when not `resource`: a semaphore permit's semaphore.
  std::string observed_name;
  std::string token;
  // A key that must live at least as long as the lock key, extended with it (extend_script's
  // second key); empty for most locks. A semaphore permit's: the semaphore's permits record.
  std::string companion_key;
  // With lock_options::fencing, set by the acquire before the lease is handed out; then fixed.
  // A set's has one token per resource, in the order of `resources`; `fencing_token` is then
  // empty unless the set has one resource.
  std::optional<std::uint64_t> fencing_token;
  std::vector<std::uint64_t> fencing_tokens;
  lock_options options;
  // Changed only on the client's executor, read anywhere: ~lease may run on any thread. Once not
  // held it never is again (never_held -> held -> released | lost), so a reader that sees
  // anything but `held` may rely on it without a hop to the executor.
  std::atomic<phase> current{phase::never_held};
  steady_clock::time_point acquired_at{};
  // Until when the lock is ours, the extensions that may still run, and the longest TTL any
  // request of this lease gave the key (how long a cleanup can matter).
  extension_validity validity;
  // The lease in this client's local queues while it holds.
  queue_holder local_hold;
  std::string diagnostics;
  // Its acquire met contention: a round was refused, or it competed after a local release. Other
  // processes may then wait for the resource when it is released (local_queues::release_of).
  bool contended = false;
  // Nodes that granted the acquire: the quorum that decided it, then every later grant as its
  // reply arrives.
  std::atomic<std::size_t> granted_nodes{0};

  // One timer serves renewal and expiry: it is armed for min(next_renewal, validity), so a loss
  // is reported on time also while an extension is in flight or after max_hold stopped renewal.
  // The generation tells a stale expiry (queued before a re-arm) from the current one.
  lock_timer timer;
  unsigned timer_generation = 0;
  steady_clock::time_point next_renewal = steady_clock::time_point::max();  // max: none due
  bool renewal_in_flight = false;
  bool renewal_stopped_by_max_hold = false;
  std::vector<std::shared_ptr<user_operation>> lost_waiters;  // unfinished ones only

  bool is_held() const noexcept {
    return current == phase::held && lock_clock::now() < validity.valid_until();
  }

  // Became held through a successful round that started at `round_start` (renewal and expiry:
  // start_renewal, ops/extend.hpp).
  void on_acquired(steady_clock::time_point round_start, steady_clock::time_point until);
  // Why the lease ran out, for the loss it is reported as: max_hold reached, the TTL without
  // renewal, or extensions not confirmed in time.
  std::string why_expired() const;
  // Tells the observer, if any, of an outcome (`what`) with `ec`; `held` counts since acquired_at
  // (0 if never held). Inline, so that without an observer the hot path pays one test, not a call.
  void report(void (observer::*what)(const lease_event&), boost::system::error_code ec) const {
    if (observer* const watcher = space->watcher()) report_to(*watcher, what, ec);
  }
  void report_to(observer& watcher, void (observer::*what)(const lease_event&),
                 boost::system::error_code ec) const;
  // The keys an extension uses, quoted, for messages.
  std::string keys() const;
  // What messages call the lease's lock: its resource quoted, or a set's resources.
  std::string subject() const;
  // The resources it holds: a set's, else its one resource.
  std::span<const std::string> held_resources() const noexcept {
    if (kind == hold_kind::set) return resources;
    return {&resource, 1};
  }
  // The names of the local queues it holds in (local_queues::holder_gone): a set's resources, a
  // read-write lock's queue_key, else its resource (a semaphore permit's: its slot key).
  std::span<const std::string> queue_names() const noexcept {
    if (kind == hold_kind::set) return resources;
    if (kind == hold_kind::reader || kind == hold_kind::writer) return {&queue_key, 1};
    return {&resource, 1};
  }
  // How its release goes out and who goes next here (local_queues::release_of), decided now.
  local_queues::lease_release release_decision();
  // The keys a release of this lease deletes (the views point into this object).
  hold_keys held() const noexcept {
    return {.kind = kind,
            .key = resource,
            .mark = mark_key,
            .mark_id = mark_id,
            .message = queue_key,
            .keys = resources};
  }
  // The lock cannot be kept: clean up the nodes, tell waiters, free the resource locally.
  void lose(std::string why);
  // Not ours any more (release, destruction, client shutdown, loss): the next local waiter starts
  // as `next_waiter` says, which is what this lease's release returned (release_of); without a
  // release, it wakes and tries at once.
  void stop_holding(phase next, boost::system::error_code waiters_get,
                    next_waiter_start next_waiter = {});
  // Token-checked DEL on every node (or those in `only`), nobody waiting for it, announced unless
  // it hands the resource to a local waiter (local_queues::release_of, whose decision it returns
  // for stop_holding).
  local_queues::lease_release release_on_nodes(const std::vector<bool>* only = nullptr);
};

// The library's way into a redlock::lease: makes one from its state, and (for tests) reads it.
struct lease_access {
  static lease make(std::shared_ptr<lease_state> state) { return lease(std::move(state)); }
  static const std::shared_ptr<lease_state>& state_of(const lease& handle) noexcept {
    return handle.state_;
  }
};

}  // namespace redlock::detail

#endif
