// 04_completion_tokens: the same acquire and release, in four calling styles.
//
// What it shows
//   Like every Asio operation, each async_ function of redlock takes a completion token as its last
//   argument, which decides how you get the result:
//   1. a plain callback, called with (error_code, lease) on the client's executor;
//   2. asio::use_future, for code outside the event loop: a thread that blocks on a std::future
//      while the io_context runs on another thread;
//   3. asio::deferred, which only describes the operation: it can be composed with what follows
//      and launched later (here: acquire, then release, launched as one operation);
//   4. asio::as_tuple(asio::use_awaitable), in a coroutine: errors come back as values instead of
//      exceptions.
//   Whatever the style, the operation is the same; each line of output says what it got.
//
// How to run it
//   REDLOCK_NODES=redis://127.0.0.1:6379 ./04_completion_tokens
//   REDLOCK_NODES is a comma-separated list of redis:// URLs, one per independent Redis master;
//   unset, one local node is used. Or, from a build directory configured with tests, against five
//   throwaway nodes:
//     test/support/redis_nodes -- examples/04_completion_tokens
//
// Exits 0 when all four styles acquired and released the lock, 1 (with a message) otherwise.

#include "common/nodes.hpp"
#include <redlock/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <string>
#include <thread>
#include <utility>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

const std::string resource = "example:04";
int failures = 0;

// "token 1f0e2d3c..., valid for 9987 ms"
std::string describe(const redlock::lease& lease) {
  const auto left = lease.valid_until() - std::chrono::steady_clock::now();
  return "token " + lease.token().substr(0, 8) + "..., valid for " +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(left).count()) +
         " ms";
}

void report_failure(const char* style, const char* what, redlock::error_code ec,
                    const redlock::lease& lease) {
  ++failures;
  std::fprintf(stderr, "%-11s %s failed: %s\n", style, what, ec.message().c_str());
  if (!lease.diagnostics().empty()) std::fprintf(stderr, "  %s\n", lease.diagnostics().c_str());
}

// Runs handlers on this thread until `done` is set by one of them.
void run_until(asio::io_context& io, const bool& done) {
  while (!done && io.run_one() > 0) {
  }
}

// Style 4 is a coroutine. It is a named function, not a lambda with captures: a coroutine keeps
// its parameters in its frame, while a lambda's captures die with the lambda object.
asio::awaitable<void> as_tuple_style(redlock::client& locks, redlock::lock_options options) {
  auto [failed, lease] =
      co_await locks.async_acquire(resource, options, asio::as_tuple(asio::use_awaitable));
  if (failed) co_return report_failure("as_tuple", "acquire", failed, lease);
  const std::string acquired = describe(lease);
  auto [release_failed] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
  if (release_failed) co_return report_failure("as_tuple", "release", release_failed, lease);
  std::printf("%-11s %s, released\n", "as_tuple", acquired.c_str());
}

}  // namespace

int main() {
  auto nodes = examples::nodes_from_environment();

  asio::io_context io;
  {
    redlock::client locks(io.get_executor(), std::move(nodes));
    redlock::lock_options options;
    options.wait = 5s;  // a bound, so that unreachable nodes end the example instead of hanging it

    // 1. A plain callback. The io_context runs on this thread (run_until) and calls it there.
    {
      bool done = false;
      // Kept outside the callback: a lease destroyed while held releases the lock on the spot.
      redlock::lease held;
      locks.async_acquire(resource, options, [&](redlock::error_code ec, redlock::lease lease) {
        if (ec) {
          report_failure("callback", "acquire", ec, lease);
          done = true;
          return;
        }
        held = std::move(lease);
        const std::string acquired = describe(held);
        held.async_release([&, acquired](redlock::error_code release_ec) {
          if (release_ec) {
            report_failure("callback", "release", release_ec, held);
          } else {
            std::printf("%-11s %s, released\n", "callback", acquired.c_str());
          }
          done = true;
        });
      });
      run_until(io, done);
    }

    // 2. std::future. The io_context now runs on a thread of its own and this thread only waits.
    //    The client and its leases belong to the io_context's thread, so every call on them is
    //    made there: post hops over, then the deferred function given to it runs on that thread
    //    and starts the lock operation, whose result the future delivers here.
    {
      auto keep_running = asio::make_work_guard(io);  // run() must not return while we wait
      std::thread runner([&io] { io.run(); });
      redlock::lease held;
      std::string description;
      auto start_acquire = [&] { return locks.async_acquire(resource, options, asio::deferred); };
      auto start_release = [&] {
        description = describe(held);
        return held.async_release(asio::deferred);
      };
      try {
        std::future<redlock::lease> acquired =
            asio::post(io, asio::deferred(start_acquire))(asio::use_future);
        held = acquired.get();  // blocks; throws boost::system::system_error on failure
        std::future<void> released =
            asio::post(io, asio::deferred(start_release))(asio::use_future);
        released.get();
        std::printf("%-11s %s, released\n", "use_future", description.c_str());
      } catch (const std::exception& e) {
        ++failures;
        std::fprintf(stderr, "%-11s failed: %s\n", "use_future", e.what());
      }
      // run() would not return by itself: the client's open connections are pending work.
      io.stop();
      runner.join();
      io.restart();
    }

    // 3. asio::deferred. Building the operation sends nothing: `acquire_then_release` is a value
    //    describing both steps, launched below with a callback (any other token would do).
    {
      redlock::lease held;
      auto release_if_acquired = [&](redlock::error_code ec, redlock::lease lease) {
        held = std::move(lease);
        return asio::deferred.when(!ec)
            .then(held.async_release(asio::deferred))
            .otherwise(asio::deferred.values(ec));
      };
      auto acquire_then_release = locks.async_acquire(resource, options, asio::deferred) |
                                  asio::deferred(release_if_acquired);

      bool done = false;
      std::move(acquire_then_release)([&](redlock::error_code ec) {
        if (ec) {
          report_failure("deferred", "acquire or release", ec, held);
        } else {
          std::printf("%-11s token %s..., composed first, launched later, released\n", "deferred",
                      held.token().substr(0, 8).c_str());
        }
        done = true;
      });
      run_until(io, done);
    }

    // 4. asio::as_tuple(asio::use_awaitable), in a coroutine.
    {
      bool done = false;
      asio::co_spawn(io, as_tuple_style(locks, options), [&](std::exception_ptr failure) {
        if (failure) {
          ++failures;
          std::fprintf(stderr, "%-11s failed with an exception\n", "as_tuple");
        }
        done = true;
      });
      run_until(io, done);
    }
  }  // the client is destroyed: it closes its connections, which io.run() below completes
  io.run();

  return failures == 0 ? 0 : 1;
}
