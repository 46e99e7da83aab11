#ifndef REDLOCK_ALGO_EXTENSION_VALIDITY_HPP
#define REDLOCK_ALGO_EXTENSION_VALIDITY_HPP

#include <boost/container/small_vector.hpp>

#include <chrono>
#include <cstdint>
#include <optional>

namespace redlock::detail {

using std::chrono::steady_clock;

// An extension that was sent and may still run on some node.
struct sent_extension {
  std::uint64_t id;
  steady_clock::time_point cap;  // sent at + ttl - drift: the key lives at least this long

  bool operator==(const sent_extension&) const = default;
};

// How long a held lease is ours while extensions come and go. Pure: fed the acquire's validity,
// each extension as it is sent and each quorum confirmation, with the clock given.
//
// On every node, requests run in the order they were issued on its one connection (a NOSCRIPT
// answer to an extension is final, never resent behind later requests), so the key's expiry there
// is set by the last extension that ran, and a reply that never came may still mean the extension
// ran. Hence:
//  - sending an extension at `now` with `ttl` lowers the validity at once to at most its cap,
//    now + ttl - drift_allowance(ttl), whatever its answer will be: the extension may run on any
//    node, and a shorter one shortens the key there;
//  - only a quorum confirmation that arrives while the lease is still valid raises the validity
//    again, to the smallest cap among the confirmed extension and every one sent after it: those
//    may still run after it on any node of that quorum. Extensions sent before it ran before it
//    there: they are forgotten, and a later confirmation of one of them changes nothing;
//  - a confirmation that arrives at or after valid_until brings nothing back: the key may have
//    expired and been taken by someone else meanwhile.
// Across a reconnect the order rests on the server having read the broken link's last commands
// before the new link's first (written only after a handshake round trip). Renewal never sends
// less than an earlier extension may give the key (plan_renewal), so a late old command could only
// matter for a user's shortening extension sent right before a link broke.
class extension_validity {
 public:
  extension_validity() = default;

  // Held until `until` by a round that set the key with `ttl`.
  void on_acquired(steady_clock::time_point until, std::chrono::milliseconds ttl);

  // An extension with `ttl` is sent at `now`: the validity drops to its cap if that is sooner.
  sent_extension send(steady_clock::time_point now, std::chrono::milliseconds ttl,
                      double drift_factor);

  // A quorum confirmed extension `id` at `now`. False if that came too late to count (the lease
  // had run out); true otherwise, also for an extension already superseded by a newer confirmed
  // one (nothing changes then).
  bool confirm(std::uint64_t id, steady_clock::time_point now);

  steady_clock::time_point valid_until() const noexcept { return valid_until_; }
  bool has_unconfirmed() const noexcept { return !unconfirmed_.empty(); }
  // The longest TTL any request of the lease gave the key: how long a cleanup can matter.
  std::chrono::milliseconds longest_ttl() const noexcept { return longest_ttl_; }
  // How long the key may be ours by what was sent: the validity, or the cap of an extension still
  // in flight if that is later. A renewal must not shorten it.
  steady_clock::time_point claimed() const noexcept;

 private:
  steady_clock::time_point valid_until_{};
  // Sent since the newest confirmed one, newest last. Nearly always one at most (the renewal in
  // flight): kept in place, so that a lease's renewals allocate nothing, and a renewal at 100 000
  // leases touches no memory of it elsewhere.
  boost::container::small_vector<sent_extension, 1> unconfirmed_;
  std::uint64_t sent_ = 0;
  std::chrono::milliseconds longest_ttl_{0};
};

// The TTL that, sent at `now`, keeps a key until `until` after the drift allowance:
// ttl - (ttl * drift_factor + 2 ms) >= until - now, rounded up to whole milliseconds with one more
// to spare, and at least 1 ms.
std::chrono::milliseconds ttl_covering(steady_clock::time_point until, steady_clock::time_point now,
                                       double drift_factor);

// After a failed renewal, try again this soon (while validity lasts): a tenth of the TTL, within
// [10 ms, 500 ms].
steady_clock::duration renewal_retry_delay(std::chrono::milliseconds ttl);

// When the retry of a failed renewal is due: renewal_retry_delay after `now`, moved earlier to the
// start of its tick (renewal_tick_start) as long as that is after `now`; never when the delay
// does not end before `valid_until` (the lease is reported lost at valid_until instead).
std::optional<steady_clock::time_point> renewal_retry_at(steady_clock::time_point now,
                                                         std::chrono::milliseconds ttl,
                                                         steady_clock::time_point valid_until);

// When the next renewal is due for a validity of `valid_until`: once less than half of the lock's
// TTL is left. At acquire that is half a TTL after the round started, less the round's duration
// and the drift allowance; after a long user extension, half a TTL before that one runs out.
steady_clock::time_point renewal_due(steady_clock::time_point valid_until,
                                     std::chrono::milliseconds ttl);

// The start of the renewal tick that `due` falls in, for a lock of `ttl`. Renewals of one client
// that fall due within the same tick go out together, one request per node for all of them
// (ops/extend.cpp): a client that holds many leases pays per tick, not per lease. A renewal moves
// earlier to the tick's start, never later. The tick is a 64th of the TTL, within [1 ms, 25 ms],
// counted from the clock's epoch so that every lease of the clock shares the ticks.
std::chrono::milliseconds renewal_tick(std::chrono::milliseconds ttl);
steady_clock::time_point renewal_tick_start(steady_clock::time_point due,
                                            std::chrono::milliseconds ttl);

// What a renewal sends, decided when it is due.
//  - The TTL never shortens what is claimed, nor what an extension still in flight may give the
//    key: ttl_covering(claimed()), and at least the lock's own TTL.
//  - With max_hold, never past its end (acquired_at + max_hold, in whole milliseconds from now):
//    once the TTL reaches it, this extension is capped there and is the last one (`last`); renewal
//    stops. It is sent only if it still lengthens the validity held now (after a user extension
//    past max_hold it would not), else nothing is (`none`), and the lease runs out.
struct renewal {
  std::chrono::milliseconds ttl{0};
  bool last = false;  // capped by max_hold: renewal stops after this one
  bool none = false;  // nothing worth sending (only when `last`)

  bool operator==(const renewal&) const = default;
};

renewal plan_renewal(const extension_validity& validity, steady_clock::time_point now,
                     std::chrono::milliseconds lock_ttl,
                     std::optional<steady_clock::time_point> max_hold_end, double drift_factor);

}  // namespace redlock::detail

#endif
