// A user's completion handler (or logger) that throws must not end a node's connection: the
// library never runs user code inside its read or write loops, so the exception comes out of
// io_context::run() as Asio users expect, and the client goes on working when run() is called
// again. On a plain io_context and on a strand run by several threads.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using redlock::test::redis_server;

struct user_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The id of the library's connection to `server` (CLIENT LIST, by its client name); 0 if none.
long long library_connection_id(const redis_server& server) {
  sync_client admin(server.port(), {}, {}, 2s);
  const auto list = admin.command({"CLIENT", "LIST"}).text;
  const auto name = list.find("name=redlock-asio");
  if (name == std::string::npos) return 0;
  const auto line = list.rfind('\n', name);
  const auto id = list.find("id=", line == std::string::npos ? 0 : line);
  return std::stoll(list.substr(id + 3));
}

// Runs `io` until `done` is ready, for at most `limit` (the client keeps the io_context busy, so
// run() alone would not return).
template <class T>
bool run_until_ready(asio::io_context& io, std::future<T>& done, std::chrono::seconds limit = 5s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (done.wait_for(0s) != std::future_status::ready) {
    if (std::chrono::steady_clock::now() > until) return false;
    io.run_one_for(50ms);
  }
  return true;
}

// One acquire and release; throws system_error on failure.
asio::awaitable<void> lock_once(redlock::client& locks, std::string resource) {
  auto lease = co_await locks.async_acquire(resource, {.ttl = 5s, .wait = 2s}, asio::use_awaitable);
  co_await lease.async_release(asio::use_awaitable);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(handler_exceptions)

// The README's pattern: a coroutine that throws after its lock, and a co_spawn handler that
// rethrows. Also a plain callback that throws. Each time run() throws the user's exception, and
// the next run() uses the same connection as before.
BOOST_AUTO_TEST_CASE(a_throwing_handler_reaches_run_and_the_connection_survives) {
  redis_server server;
  asio::io_context io;
  redlock::client locks(io.get_executor(), {server.config()}, fast_client_options());

  auto run_expecting_failure = [&](const char* what) {
    BOOST_TEST_CONTEXT(what) {
      bool thrown = false;
      try {
        io.run();
      } catch (const user_failure& e) {
        thrown = std::string(e.what()) == what;
      }
      BOOST_TEST(thrown, "run() did not throw the handler's exception");
      io.restart();
    }
  };

  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await lock_once(locks, "first");
        auto lease = co_await locks.async_acquire("coroutine", {.ttl = 5s}, asio::use_awaitable);
        throw user_failure("from the coroutine");
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  run_expecting_failure("from the coroutine");
  const auto connection = library_connection_id(server);
  BOOST_TEST_REQUIRE(connection != 0);

  locks.async_acquire("callback", {.ttl = 5s}, [](error_code ec, redlock::lease) {
    if (!ec) throw user_failure("from a callback");
  });
  run_expecting_failure("from a callback");

  // Work goes on through the same connection; the leases above were released when destroyed.
  std::future<void> done = asio::co_spawn(io, lock_once(locks, "after"), asio::use_future);
  BOOST_TEST_REQUIRE(run_until_ready(io, done));
  BOOST_CHECK_NO_THROW(done.get());
  BOOST_TEST(library_connection_id(server) == connection);
  sync_client admin(server.port());
  BOOST_TEST(admin.command({"DBSIZE"}).integer == 0);
}

// The documented multi-threaded setup: the client on a strand of an io_context run by two
// threads. A handler on the strand throws: one thread's run() throws it, the other goes on, and
// once that thread runs again the client works as before, on the same connection.
BOOST_AUTO_TEST_CASE(on_a_strand_of_two_threads, *boost::unit_test::label("threaded")) {
  redis_server server;
  asio::io_context io;
  auto strand = asio::make_strand(io);
  // Destroyed on the strand at the end, which lets the threads' run() return.
  auto client = std::make_unique<redlock::client>(strand, std::vector{server.config()},
                                                  fast_client_options());
  redlock::client& locks = *client;
  auto guard = asio::make_work_guard(io);

  std::mutex mutex;
  std::vector<std::string> caught;
  auto runner = [&] {
    for (int runs = 0; runs < 3; ++runs) {
      try {
        io.run();
        return;
      } catch (const user_failure& e) {
        const std::lock_guard lock(mutex);
        caught.emplace_back(e.what());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back(runner);

  std::future<void> thrown = asio::co_spawn(
      strand,
      [&]() -> asio::awaitable<void> {
        co_await lock_once(locks, "first");
        auto lease = co_await locks.async_acquire("strand", {.ttl = 5s}, asio::use_awaitable);
        throw user_failure("on the strand");
      },
      asio::use_future);
  BOOST_CHECK_THROW(thrown.get(), user_failure);  // through the future: the coroutine's own

  asio::co_spawn(
      strand,
      [&]() -> asio::awaitable<void> {
        auto lease = co_await locks.async_acquire("handler", {.ttl = 5s}, asio::use_awaitable);
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
        throw user_failure("from the completion handler");
      });
  const bool seen = redlock::test::eventually_blocking(
      [&] {
        const std::lock_guard lock(mutex);
        return !caught.empty();
      },
      5000ms);
  BOOST_TEST(seen, "no thread's run() threw");
  const auto connection = library_connection_id(server);

  std::future<void> after = asio::co_spawn(strand, lock_once(locks, "after"), asio::use_future);
  BOOST_TEST_REQUIRE((after.wait_for(5s) == std::future_status::ready));
  BOOST_CHECK_NO_THROW(after.get());
  BOOST_TEST(library_connection_id(server) == connection);

  guard.reset();
  asio::post(strand, [&] { client.reset(); });
  for (auto& thread : threads)
    thread.join();
  const std::lock_guard lock(mutex);
  BOOST_TEST(caught.size() == 1u);
  BOOST_TEST(caught.front() == "from the completion handler");
}

// A logger is user code too: one that throws on the connect message does not keep the node from
// connecting; its exception comes out of run().
BOOST_AUTO_TEST_CASE(a_throwing_logger_reaches_run_and_the_connection_survives) {
  redis_server server;
  asio::io_context io;
  auto options = fast_client_options();
  std::atomic<int> throws{0};
  options.logger = [&](redlock::log_level, std::string_view message) {
    if (message.find("connected") != std::string_view::npos && throws++ == 0) {
      throw user_failure("from the logger");
    }
  };
  redlock::client locks(io.get_executor(), {server.config()}, options);
  std::future<void> done = asio::co_spawn(io, lock_once(locks, "logged"), asio::use_future);
  bool thrown = false;
  try {
    io.run();
  } catch (const user_failure&) {
    thrown = true;
  }
  BOOST_TEST(thrown);
  io.restart();
  BOOST_TEST_REQUIRE(run_until_ready(io, done));
  BOOST_CHECK_NO_THROW(done.get());
  BOOST_TEST(throws.load() == 1);
}

BOOST_AUTO_TEST_SUITE_END()
