#ifndef REDLOCK_TEST_SIM_RUNTIME_SIM_TIMER_HPP
#define REDLOCK_TEST_SIM_RUNTIME_SIM_TIMER_HPP

// The library's lock_timer in a simulation (src/clock.hpp's contract): a wait is an event of the
// world at the timer's expiry, so the scheduler knows every deadline and time jumps straight to
// it. Completions are posted to the handler's associated executor, as Asio's are; a cancelled or
// re-armed wait completes with operation_aborted, also when cancelled through its cancellation
// slot.

#include "sim/runtime/world.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <list>
#include <memory>
#include <utility>

namespace redlock::sim {

class sim_timer {
 public:
  using clock_type = detail::lock_clock;
  using duration = clock_type::duration;
  using time_point = clock_type::time_point;
  using executor_type = boost::asio::any_io_executor;

  explicit sim_timer(executor_type executor) : executor_(std::move(executor)) {}
  sim_timer(executor_type executor, duration after)
      : executor_(std::move(executor)), expiry_(clock_type::now() + after) {}
  ~sim_timer() { cancel(); }
  sim_timer(const sim_timer&) = delete;
  sim_timer& operator=(const sim_timer&) = delete;

  const executor_type& get_executor() const noexcept { return executor_; }
  time_point expiry() const noexcept { return expiry_; }

  // As Asio's: each cancels the pending waits and returns how many there were.
  std::size_t expires_at(time_point at) {
    const std::size_t cancelled = cancel();
    expiry_ = at;
    return cancelled;
  }
  std::size_t expires_after(duration after) { return expires_at(clock_type::now() + after); }
  std::size_t cancel();

  template <class CompletionToken>
  auto async_wait(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        [this](auto handler) {
          boost::asio::any_io_executor executor =
              boost::asio::get_associated_executor(handler, executor_);
          start(boost::asio::any_completion_handler<void(boost::system::error_code)>(
                    std::move(handler)),
                std::move(executor));
        },
        token);
  }

 private:
  struct wait;
  using wait_list = std::list<std::shared_ptr<wait>>;

  void start(boost::asio::any_completion_handler<void(boost::system::error_code)> handler,
             boost::asio::any_io_executor executor);
  // Takes the wait out of the timer and posts its completion.
  void finish(std::shared_ptr<wait> w, boost::system::error_code ec, bool from_slot);

  executor_type executor_;
  time_point expiry_{};
  wait_list waits_;
};

}  // namespace redlock::sim

#endif
