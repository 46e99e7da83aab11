#ifndef REDLOCK_TEST_SUPPORT_ASYNC_TEST_HPP
#define REDLOCK_TEST_SUPPORT_ASYNC_TEST_HPP

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

namespace redlock::test {

// Completes an awaited operation with a tuple of its results instead of throwing:
// `auto [ec, lease] = co_await locks.async_acquire(..., tuple_awaitable);`
inline constexpr auto tuple_awaitable = boost::asio::as_tuple(boost::asio::use_awaitable);

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

// Runs make(0) .. make(count - 1) concurrently on the current executor and waits for all of them;
// rethrows the first failure once all have finished.
template <class MakeWorker>
boost::asio::awaitable<void> run_all(std::size_t count, MakeWorker make) {
  struct group {
    group(boost::asio::any_io_executor ex, std::size_t n)
        : running(n), all_done(ex, std::chrono::steady_clock::time_point::max()) {}
    std::size_t running;
    std::exception_ptr failure;
    boost::asio::steady_timer all_done;
  };
  const auto ex = co_await boost::asio::this_coro::executor;
  const auto g = std::make_shared<group>(ex, count);
  for (std::size_t i = 0; i < count; ++i) {
    boost::asio::co_spawn(ex, make(i), [g](std::exception_ptr e) {
      if (e && !g->failure) g->failure = e;
      if (--g->running == 0) g->all_done.cancel();
    });
  }
  if (g->running > 0) {
    co_await g->all_done.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
  }
  if (g->failure) std::rethrow_exception(g->failure);
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

// The same for a thread that is free to block (no io_context runs on it): polls every 10 ms.
template <class Predicate>
bool eventually_blocking(Predicate done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
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
