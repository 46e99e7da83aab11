#ifndef REDLOCK_NODES_PACED_TASK_HPP
#define REDLOCK_NODES_PACED_TASK_HPP

#include "clock.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <memory>
#include <utility>

namespace redlock::detail {

using std::chrono::steady_clock;

// A router's task that runs one at a time and, once paced, at most once per `min_interval`: a
// cluster's topology refresh, a sentinel group's master resolution. Asked while it runs, it runs
// once more after; asked too soon after the last run ended, it waits for the interval. The owner
// runs the task itself (a coroutine) when ask() says so, and reports its end. Lives in its owner,
// on the owner's executor; a wait holds the owner only weakly.
class paced_task {
 public:
  paced_task(const boost::asio::any_io_executor& executor, std::chrono::milliseconds min_interval)
      : timer_(executor), min_interval_(min_interval) {}

  bool running() const noexcept { return running_; }

  // Asks for a run. True: the owner starts it now, and calls ended() when it is over. False: it
  // is due later, once more after the run under way, or through `retry(owner)` once the interval
  // since the last run's end has passed (`paced`: the interval applies now).
  template <class Owner, class Retry>
  bool ask(bool paced, const std::weak_ptr<Owner>& owner, const Retry& retry) {
    if (running_) {
      again_ = true;
      return false;
    }
    if (armed_) return false;
    const auto earliest = last_end_ + min_interval_;
    if (paced && lock_clock::now() < earliest) {
      retry_at(earliest, owner, retry);
      return false;
    }
    running_ = true;
    return true;
  }

  // The run is over: returns whether it was asked for again meanwhile.
  bool ended() noexcept {
    running_ = false;
    last_end_ = lock_clock::now();
    return std::exchange(again_, false);
  }

  // Calls `retry(owner)` at `at`, unless the owner is gone or the task is cancelled.
  template <class Owner, class Retry>
  void retry_at(steady_clock::time_point at, const std::weak_ptr<Owner>& owner,
                const Retry& retry) {
    armed_ = true;
    timer_.expires_at(at);
    timer_.async_wait(
        [this, owner, retry, generation = ++generation_](boost::system::error_code ec) {
          const auto self = owner.lock();  // while the owner lives, so does this task
          if (!self || generation != generation_) return;
          armed_ = false;
          if (!ec) retry(*self);
        });
  }

  // No retry from now on (the owner closes).
  void cancel() { timer_.cancel(); }

 private:
  lock_timer timer_;
  std::chrono::milliseconds min_interval_;
  steady_clock::time_point last_end_{};
  unsigned generation_ = 0;
  bool running_ = false;
  bool again_ = false;  // asked while running
  bool armed_ = false;  // a retry is due
};

}  // namespace redlock::detail

#endif
