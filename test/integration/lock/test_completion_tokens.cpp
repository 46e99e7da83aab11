// Completion tokens and threads against real redis-server processes: callbacks, deferred,
// awaitables and futures on one thread, a future waited for on another, and a client used from
// a strand of four threads.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using redlock::test::eventually_blocking;

using redlock::test::acquire_outcome;
using redlock::test::gone_everywhere;
using redlock::test::record;
using redlock::test::void_outcome;

}  // namespace

BOOST_AUTO_TEST_SUITE(completion_tokens)

BOOST_FIXTURE_TEST_CASE(completion_tokens_on_one_thread, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client rival(io.get_executor(), fleet.configs(), fast_client_options());
    const auto options = lock_for(10000ms);

    // use_awaitable: the value directly, errors as exceptions.
    redlock::lease awaited =
        co_await locks.async_acquire("tok:awaitable", options, asio::use_awaitable);
    BOOST_TEST(awaited.held());
    error_code thrown;
    try {
      co_await rival.async_try_acquire("tok:awaitable", options, asio::use_awaitable);
    } catch (const boost::system::system_error& e) {
      thrown = e.code();
    }
    BOOST_TEST(thrown == error::contended, thrown.message());
    co_await awaited.async_release(asio::use_awaitable);
    BOOST_TEST(!awaited.held());
    BOOST_TEST(co_await gone_everywhere(nodes, "tok:awaitable"));

    // as_tuple
    auto [ec, tupled] = co_await locks.async_acquire("tok:tuple", options, tuple_awaitable);
    BOOST_TEST(!ec);
    BOOST_TEST(tupled.held());
    auto [release_ec] = co_await tupled.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    BOOST_TEST(co_await gone_everywhere(nodes, "tok:tuple"));

    // deferred: nothing is sent until the operation is invoked.
    auto deferred_acquire = locks.async_acquire("tok:deferred", options, asio::deferred);
    co_await sleep_for(50ms);
    BOOST_TEST(nodes.present("tok:deferred") == 0u);
    acquire_outcome from_deferred;
    std::move(deferred_acquire)(record(from_deferred));
    bool done = co_await eventually([&] { return from_deferred.completions > 0; }, 5000ms);
    BOOST_TEST_REQUIRE(done);
    BOOST_TEST(!from_deferred.ec);
    BOOST_TEST(nodes.holding("tok:deferred", from_deferred.lease.token()) >= 3u);
    auto deferred_release = from_deferred.lease.async_release(asio::deferred);
    co_await sleep_for(50ms);
    BOOST_TEST(nodes.present("tok:deferred") >= 3u);
    void_outcome deferred_released;
    std::move(deferred_release)(record(deferred_released));
    done = co_await eventually([&] { return deferred_released.completions > 0; }, 5000ms);
    BOOST_TEST(done);
    BOOST_TEST(!deferred_released.ec);
    BOOST_TEST(co_await gone_everywhere(nodes, "tok:deferred"));

    // plain callbacks
    acquire_outcome from_callback;
    locks.async_acquire("tok:callback", options, record(from_callback));
    done = co_await eventually([&] { return from_callback.completions > 0; }, 5000ms);
    BOOST_TEST_REQUIRE(done);
    BOOST_TEST(!from_callback.ec);
    BOOST_TEST(from_callback.lease.held());
    void_outcome callback_released;
    from_callback.lease.async_release(record(callback_released));
    done = co_await eventually([&] { return callback_released.completions > 0; }, 5000ms);
    BOOST_TEST(done);
    BOOST_TEST(!callback_released.ec);
    BOOST_TEST(co_await gone_everywhere(nodes, "tok:callback"));
    co_await sleep_for(50ms);
    BOOST_TEST(from_callback.completions == 1);
    BOOST_TEST(callback_released.completions == 1);
  });
}

BOOST_AUTO_TEST_CASE(completion_token_use_future_from_another_thread,
                     *boost::unit_test::label("threaded")) {
  redis_fleet fleet(5);
  inspector nodes(fleet);
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  // Joins the runner whatever the assertions below do.
  struct joiner {
    asio::executor_work_guard<asio::io_context::executor_type>& work;
    std::thread& thread;
    asio::io_context& io;
    ~joiner() {
      work.reset();
      io.stop();
      thread.join();
    }
  } join_at_exit{work, runner, io};

  // The client and its leases belong to the io thread: every member call is made there, and only
  // the futures are waited for here.
  auto on_io = [&](auto f) { return asio::post(io, asio::use_future(std::move(f))).get(); };
  std::unique_ptr<redlock::client> locks;
  std::unique_ptr<redlock::client> rival;
  on_io([&] {
    locks = std::make_unique<redlock::client>(io.get_executor(), fleet.configs(),
                                              fast_client_options());
    rival = std::make_unique<redlock::client>(io.get_executor(), fleet.configs(),
                                              fast_client_options());
  });
  const auto options = lock_for(10000ms);

  redlock::lease held =
      on_io([&] { return locks->async_acquire("tok:future", options, asio::use_future); }).get();
  BOOST_TEST(on_io([&] { return held.held(); }));
  BOOST_TEST(nodes.holding("tok:future", on_io([&] { return held.token(); })) >= 3u);

  // An error surfaces from get() as system_error.
  auto contended =
      on_io([&] { return rival->async_try_acquire("tok:future", options, asio::use_future); });
  error_code thrown;
  try {
    contended.get();
  } catch (const boost::system::system_error& e) {
    thrown = e.code();
  }
  BOOST_TEST(thrown == error::contended, thrown.message());

  auto released = on_io([&] { return held.async_release(asio::use_future); });
  BOOST_CHECK_NO_THROW(released.get());
  BOOST_TEST(!on_io([&] { return held.held(); }));
  BOOST_TEST(eventually_blocking([&] { return nodes.present("tok:future") == 0; }, 2000ms));

  on_io([&] {
    held = redlock::lease();
    rival.reset();
    locks.reset();
  });
}

BOOST_FIXTURE_TEST_CASE(strand_on_four_threads, redlock::test::five_nodes,
                        *boost::unit_test::label("threaded")) {
  asio::io_context io(4);
  auto strand = asio::make_strand(io);
  auto locks =
      std::make_unique<redlock::client>(strand, fleet.configs(), fast_client_options(500ms));

  constexpr int coroutines = 200;
  constexpr int resources = 20;
  // Touched only on the strand.
  std::array<int, resources> counters{};
  std::array<bool, resources> inside{};
  int overlaps = 0;
  int errors = 0;
  int done = 0;
  const auto options = lock_for(10000ms);
  for (int c = 0; c < coroutines; ++c) {
    asio::co_spawn(
        strand,
        [&, c]() -> asio::awaitable<void> {
          const int r = c % resources;
          try {
            auto [ec, lease] = co_await locks->async_acquire(fmt::format("strand:{}", r), options,
                                                             tuple_awaitable);
            if (ec) {
              ++errors;
            } else {
              overlaps += inside[r] ? 1 : 0;
              inside[r] = true;
              const int seen = counters[r];
              co_await sleep_for(1ms);
              counters[r] = seen + 1;
              inside[r] = false;
              auto [release_ec] = co_await lease.async_release(tuple_awaitable);
              errors += release_ec ? 1 : 0;
            }
          } catch (...) {
            ++errors;
          }
          ++done;
        },
        asio::detached);
  }
  bool finished = false;
  bool released_everywhere = false;
  asio::co_spawn(
      strand,
      [&]() -> asio::awaitable<void> {
        finished = co_await eventually([&] { return done == coroutines; }, 60000ms);
        // The last releases completed on a quorum's answers; the other nodes' DELs are written
        // only while the io_context runs, which stops below. A leaked key would stay for its 10 s.
        released_everywhere = co_await eventually([&] { return nodes.total_keys() == 0; }, 2000ms);
        locks.reset();  // on the strand, as every other use of the client
      },
      [&](std::exception_ptr) { io.stop(); });

  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] { io.run(); });
  }
  for (auto& t : threads) {
    t.join();
  }
  BOOST_TEST_REQUIRE(finished, done << " of " << coroutines << " finished");
  BOOST_TEST(errors == 0);
  BOOST_TEST(overlaps == 0);
  for (int r = 0; r < resources; ++r) {
    BOOST_TEST(counters[r] == coroutines / resources, "resource " << r);
  }
  BOOST_TEST(released_everywhere, nodes.total_keys() << " keys left");
}

BOOST_AUTO_TEST_SUITE_END()
