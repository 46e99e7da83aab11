#ifndef REDLOCK_WAKE_TIMER_HPP
#define REDLOCK_WAKE_TIMER_HPP

#include "clock.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <utility>

namespace redlock::detail {

using std::chrono::steady_clock;

// One timer of an operation that re-arms it often. A wait already queued when the timer was
// armed again or disarmed is stale: it calls nothing, whether or not it was cancelled in time.
// The timer is made on first use, so an operation that never waits has none. It lives in its
// owner, whom a wait holds only weakly.
class wake_timer {
 public:
  // Calls `due(owner)` at `at`, unless armed again or disarmed before, or the owner is gone; on
  // `executor`, the same every time.
  template <class Owner, class Due>
  void arm(const boost::asio::any_io_executor& executor, steady_clock::time_point at,
           std::weak_ptr<Owner> owner, Due due) {
    const unsigned generation = ++generation_;
    if (!timer_) timer_.emplace(executor);
    timer_->expires_at(at);
    timer_->async_wait([this, owner = std::move(owner), generation,
                        due = std::move(due)](boost::system::error_code ec) {
      const auto self = owner.lock();  // while the owner lives, so does this timer
      if (ec || !self || generation != generation_) return;
      due(*self);
    });
  }

  void disarm() {
    ++generation_;
    if (timer_) timer_->cancel();
  }

 private:
  std::optional<lock_timer> timer_;
  unsigned generation_ = 0;
};

}  // namespace redlock::detail

#endif
