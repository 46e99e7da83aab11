// 01_lock_unlock: take a lock, look at it, watch a rival being refused, release it.
//
// What it shows
//   - co_await client::async_acquire and lease::async_release on one resource;
//   - what a lease tells you: the random token stored on the nodes and how long the lock is
//     guaranteed to be ours;
//   - a second owner trying the same resource while it is held gets error::contended, and gets the
//     lock once it has been released. The rival is a second client: to the Redis nodes it looks
//     exactly like another process.
//
// How to run it
//   REDLOCK_NODES=redis://127.0.0.1:6379 ./01_lock_unlock
//   REDLOCK_NODES is a comma-separated list of redis:// URLs, one per independent Redis master;
//   unset, one local node is used. Or, from a build directory configured with tests, against five
//   throwaway nodes:
//     test/support/redis_nodes -- examples/01_lock_unlock
//
// Exits 0 when all of the above held, 1 (with a message) when something did not.

#include "common/nodes.hpp"
#include "common/run.hpp"
#include <redlock/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

long long ms_until(std::chrono::steady_clock::time_point when) {
  const auto left = when - std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::milliseconds>(left).count();
}

asio::awaitable<int> demo(std::vector<redlock::node_config> nodes) {
  const auto executor = co_await asio::this_coro::executor;
  redlock::client locks(executor, nodes);
  redlock::client rival(executor, nodes);

  redlock::lock_options options;  // ttl 10 s, renewed at half-life while held
  // Without a wait, acquire retries until it succeeds: with unreachable nodes that is forever.
  options.wait = 5s;

  // as_tuple turns a failure into a value instead of an exception, so that the lease can say why:
  // diagnostics() names every node and what it answered (refused, down, timed out, ...).
  auto [failed, lease] =
      co_await locks.async_acquire("example:01", options, asio::as_tuple(asio::use_awaitable));
  if (failed) {
    std::fprintf(stderr, "acquire failed: %s\n  %s\n", failed.message().c_str(),
                 lease.diagnostics().c_str());
    co_return 1;
  }
  std::printf("acquired \"%s\": at least %zu of the %zu nodes agreed\n", lease.resource().c_str(),
              locks.quorum(), locks.size());
  std::printf("  token %.8s... (random, unique to this acquire), valid for %lld ms\n",
              lease.token().c_str(), ms_until(lease.valid_until()));

  // The rival is meant to be refused: as_tuple again, since here failing is the point.
  auto [refused, nothing] =
      co_await rival.async_try_acquire("example:01", options, asio::as_tuple(asio::use_awaitable));
  if (refused != redlock::error::contended) {
    std::fprintf(stderr, "expected the rival to be refused with \"contended\", got \"%s\"\n",
                 refused.message().c_str());
    co_return 1;
  }
  std::printf("rival try_acquire while held: refused (%s)\n", refused.message().c_str());

  co_await lease.async_release(asio::use_awaitable);
  std::printf("released: deleted on every node where it still held our token\n");

  redlock::lease second =
      co_await rival.async_try_acquire("example:01", options, asio::use_awaitable);
  std::printf("rival try_acquire after release: acquired, token %.8s...\n", second.token().c_str());
  co_await second.async_release(asio::use_awaitable);
  co_return 0;
}

}  // namespace

int main() {
  auto nodes = examples::nodes_from_environment();

  asio::io_context io;
  int exit_code = 1;
  asio::co_spawn(io, demo(std::move(nodes)), examples::exit_status("01_lock_unlock", exit_code));
  // Returns once demo() has finished and its clients have closed their connections.
  io.run();
  return exit_code;
}
