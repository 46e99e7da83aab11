#ifndef REDLOCK_EXAMPLES_COMMON_RUN_HPP
#define REDLOCK_EXAMPLES_COMMON_RUN_HPP

// Plumbing shared by the examples: running many coroutines at once, and turning an example's
// main coroutine into the program's exit code.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

namespace examples {

inline boost::asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration how_long) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, how_long);
  co_await timer.async_wait(boost::asio::use_awaitable);
}

// Runs the coroutines all at once on the caller's executor and waits until every one has
// finished; then rethrows the first failure.
inline boost::asio::awaitable<void> run_all(std::vector<boost::asio::awaitable<void>> tasks) {
  namespace asio = boost::asio;
  const auto executor = co_await asio::this_coro::executor;
  using started = decltype(asio::co_spawn(executor, asio::awaitable<void>{}, asio::deferred));
  std::vector<started> group;
  for (auto& task : tasks) {
    group.push_back(asio::co_spawn(executor, std::move(task), asio::deferred));
  }
  auto [order, failures] = co_await asio::experimental::make_parallel_group(std::move(group))
                               .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
  for (const auto& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

// The completion handler for co_spawn of an example's main coroutine (which returns the exit
// code): keeps the code it returned, or prints what it threw and keeps `exit_code` at 1.
class exit_status {
 public:
  exit_status(const char* example, int& exit_code) : example_(example), exit_code_(&exit_code) {
    *exit_code_ = 1;
  }

  void operator()(std::exception_ptr failure, int code) const {
    if (!failure) {
      *exit_code_ = code;
      return;
    }
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", example_, e.what());
    }
  }

 private:
  const char* example_;
  int* exit_code_;
};

}  // namespace examples

#endif
