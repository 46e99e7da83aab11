#ifndef REDLOCK_TEST_SUPPORT_ASYNC_TEST_HPP
#define REDLOCK_TEST_SUPPORT_ASYNC_TEST_HPP

#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace redlock::test {

// Runs the coroutine `body(io)` on a fresh io_context until it finishes, rethrowing what it threw.
// A body that does not finish within `limit` fails the test with a clear message instead of
// hanging; the context is stopped either way, so background work (reconnect loops) cannot keep it
// alive.
template <class Body>
void run_async(Body body, std::chrono::seconds limit = std::chrono::seconds(60)) {
  boost::asio::io_context io;
  bool finished = false;
  std::exception_ptr failure;
  boost::asio::co_spawn(io, body(io), [&](std::exception_ptr e) {
    finished = true;
    failure = e;
    io.stop();
  });
  io.run_for(limit);
  if (!finished) {
    throw std::runtime_error("test coroutine did not finish within " +
                             std::to_string(limit.count()) + " s");
  }
  if (failure) std::rethrow_exception(failure);
}

inline boost::asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration d) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, d);
  co_await timer.async_wait(boost::asio::use_awaitable);
}

// Polls `done()` until it holds (true) or `limit` passes (false), sleeping `poll` in between.
template <class Predicate>
boost::asio::awaitable<bool> eventually(
    Predicate done, std::chrono::milliseconds limit = std::chrono::seconds(10),
    std::chrono::milliseconds poll = std::chrono::milliseconds(2)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) co_return false;
    co_await sleep_for(poll);
  }
  co_return true;
}

inline long long ms_between(std::chrono::steady_clock::time_point from,
                            std::chrono::steady_clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

inline long long ms_since(std::chrono::steady_clock::time_point start) {
  return ms_between(start, std::chrono::steady_clock::now());
}

}  // namespace redlock::test

#endif
