#ifndef REDLOCK_ALGO_WAIT_PLAN_HPP
#define REDLOCK_ALGO_WAIT_PLAN_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <random>
#include <utility>
#include <vector>

namespace redlock::detail {

using std::chrono::steady_clock;

// How long one acquire round took lately, shared by every acquire of a client: the unit of the
// delays below. A moving average; the first round replaces the initial guess of 1 ms, each later
// one moves it by an eighth. What the delays use is kept between 50 us and 20 ms.
class round_trip_average {
 public:
  void note(steady_clock::duration took) noexcept {
    average_ = known_ ? (average_ * 7 + took) / 8 : took;
    known_ = true;
  }
  steady_clock::duration bounded() const noexcept {
    return std::clamp<steady_clock::duration>(average_, std::chrono::microseconds(50),
                                              std::chrono::milliseconds(20));
  }

 private:
  steady_clock::duration average_ = std::chrono::milliseconds(1);
  bool known_ = false;
};

// The rounds an acquire has lost to waiters elsewhere: those after the first two (the refusal
// that made it wait, and the round that followed its subscription).
inline unsigned competitions_lost(unsigned rounds) noexcept {
  return rounds > 2 ? rounds - 2 : 0;
}

// How long a waiter woken by an announcement waits before its round: a random delay of up to a
// round trip, halved for every competition it has lost (at most six times), so that the waiters
// of all processes woken by one release do not all send at the same instant, none has a head
// start, and one that keeps losing comes first.
steady_clock::duration wake_jitter(steady_clock::duration round_trip, unsigned competitions_lost,
                                   std::minstd_rand& random);

// The collision backoff of a waiter woken by news heard during the round it just lost: a random
// delay within a window of one round trip, doubled for every earlier such wake-up in a row (at most
// five times: 32 round trips), and never beyond `ceiling` (the retry policy's current ceiling;
// zero: none). Under contention such news is mostly the cleanup of a split round that every
// contender has just lost and all of them hear at once; woken with wake_jitter (which shrinks with
// every loss) they would collide again and again while the lock stays free. A round lost without
// such news starts the window over (the caller resets `wakes_in_a_row`).
steady_clock::duration collision_delay(steady_clock::duration round_trip, unsigned wakes_in_a_row,
                                       steady_clock::duration ceiling, std::minstd_rand& random);

// What a sleeping acquire knows when it plans its next round.
struct sleep_facts {
  // When a quorum is free at the latest unless holders extend (release_watch::free_by); empty
  // when no expiry is known.
  std::optional<steady_clock::time_point> free_by;
  bool may_be_free = false;                  // as far as the last round and announcements tell
  bool announcements_cover = false;          // every node is subscribed: a release would be heard
  steady_clock::time_point backoff_until{};  // now + the retry policy's next delay
};

// When a sleeping acquire tries again, unless news wakes it earlier: when the lock can have
// expired if it is known to be held and every release would be heard; the earlier of that and the
// backoff if a release might go unheard; the backoff alone when nothing bounds the wait (no expiry
// known, or the lock may be free already). Never before `now`, never after `deadline`, where the
// acquire ends instead.
steady_clock::time_point wake_at(const sleep_facts& facts, steady_clock::time_point now,
                                 std::optional<steady_clock::time_point> deadline);

// `at`, but not after the deadline.
inline steady_clock::time_point until_deadline(steady_clock::time_point at,
                                               std::optional<steady_clock::time_point> deadline) {
  return deadline ? std::min(at, *deadline) : at;
}

// News of the lock that came while the acquire's own round was in flight: releases announced
// (slot 0 for a lock) and subscriptions that came back. Kept until the round is decided without
// the lock, then applied: applied at once, the round's own answers would overwrite it, and a
// release that ran on a node right after our refused SET would be lost (its announcement can
// arrive before the refusal), leaving the waiter asleep until the holder's TTL.
class round_news {
 public:
  void released(std::size_t slot, std::size_t node) {
    // Copies of one release are kept once: bounded by slots x nodes.
    const std::pair<std::size_t, std::size_t> entry{slot, node};
    if (std::find(releases_.begin(), releases_.end(), entry) == releases_.end())
      releases_.push_back(entry);
  }
  void resubscribed() noexcept { resubscribed_ = true; }
  void clear() noexcept {
    releases_.clear();
    resubscribed_ = false;
  }

  // Hands each release to forget(slot, node) and forgets the news. Returns whether the next round
  // is due at once: a subscription came back (whatever was announced while it was down is lost),
  // or a release was heard and may_be_free() says a quorum may be free now.
  template <typename Forget, typename MayBeFree>
  bool apply(Forget&& forget, MayBeFree&& may_be_free) {
    for (const auto& [slot, node] : releases_)
      forget(slot, node);
    const bool due = resubscribed_ || (!releases_.empty() && may_be_free());
    clear();
    return due;
  }

 private:
  std::vector<std::pair<std::size_t, std::size_t>> releases_;
  bool resubscribed_ = false;
};

}  // namespace redlock::detail

#endif
