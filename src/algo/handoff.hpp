#ifndef REDLOCK_ALGO_HANDOFF_HPP
#define REDLOCK_ALGO_HANDOFF_HPP

#include <chrono>
#include <optional>

namespace redlock::detail {

using std::chrono::steady_clock;

// How a held lease's release goes out, decided right before it is sent: whether it hands the
// resource to the next local waiter silently, or announces itself and lets that waiter compete
// with the waiters of other processes.
//
// Rules:
//  - Hand-off: when the holder releases while a single lock of this client waits to take the
//    resource, that acquire starts at once: its SET follows the release on every node in the
//    same write, so the hand-off is certain, and announcing the release would only wake other
//    processes to lose. So it announces nothing, and the hand-off is counted.
//  - A set of locks is not handed a resource that way: its round may still lose (another of its
//    resources held elsewhere), and a process whose coroutines pass sets to each other would keep
//    every resource of them from processes that want one. The release is announced, so that
//    waiters elsewhere do not sleep on a free resource, and the set competes with them; the count
//    starts again.
//  - Fairness across processes: after lock_options::local_handoffs of those in a row, the release
//    is announced instead and the first waiter competes: it waits for the announcement like
//    waiters elsewhere, or for the release's own answer where the key was already gone. The count
//    starts again. With local_handoffs = 0 every release competes.
//  - The competing waiter must not sleep past the key's life if no answer ever comes: every
//    request of the lease was sent before `now` and gave the key longest_ttl at most by the
//    server's clock, so the key is gone by now + longest_ttl * (1 + drift_factor) + 1 ms.
//  - "In a row" counts the releases of this resource's holders while someone could take it: a
//    release with nobody to take it starts the count again (and announces itself).
//  - A release of a lease that is not its queue's holder (a semaphore's permit, a lease no longer
//    queued) announces itself and changes nothing.
struct handoff_inputs {
  bool holder = false;   // the releasing lease is its resource queue's holder
  bool waiting = false;  // an acquire of this client can take the resource once it is released
  // That acquire's taking it is certain: a single lock's SET, which follows the release on every
  // node, not a set's round (local_queues::release_of).
  bool certain = false;
  unsigned handoffs_in_a_row = 0;            // the queue's count so far
  unsigned local_handoffs = 0;               // lock_options::local_handoffs
  std::chrono::milliseconds longest_ttl{0};  // the longest TTL the lease gave its key
  double drift_factor = 0.0;
  steady_clock::time_point now{};
};

struct handoff {
  bool announce = true;  // the release announces itself on the release channel
  // Once the holder is gone, the first waiter competes instead of waking to try at once
  // (local_queues::next_waiter_start): only after an announced release while someone waits.
  bool next_waiter_competes = false;
  // With next_waiter_competes: when the released key is gone on every node at the latest.
  std::optional<steady_clock::time_point> key_gone_by;
  unsigned handoffs_in_a_row = 0;  // the queue's count from now on

  bool operator==(const handoff&) const = default;
};

handoff decide_handoff(const handoff_inputs& in);

}  // namespace redlock::detail

#endif
