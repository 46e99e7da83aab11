// 05_dedup_save_once: many servers, many duplicate requests, every item saved exactly once.
//
// What it shows
//   - client::async_try_acquire as the fast path of a "whoever gets there first does it" guard:
//     one round, no waiting. The winner of an item's lock checks the store (a std::map standing in
//     for a database), saves, and releases.
//   - What error::contended does and does not promise. It says that other owners hold the key on
//     enough nodes to stop this round, not that a live request is saving the item: a request whose
//     round failed after the nodes wrote its key (too few answered in time on a busy host) leaves
//     that key until its own release reaches the nodes, and two such leftovers plus one slow node
//     refuse a round as well as a holder does. A loser that skipped could then leave the item
//     unsaved. So a loser waits for the lock (async_acquire with lock_options::wait), and skips
//     only when it finds the item saved under it.
//   - Several redlock::client instances stand in for several app servers (each would be its own
//     process; here four clients on one io_context), all using the same Redis nodes.
//   - 4000 "save item X" requests for 300 items arrive shuffled, at about eight per millisecond,
//     spread over the four servers, and overlap each other.
//   - When too few nodes answer (down, or slow on a busy host), nobody is known to hold the item:
//     the try is repeated with growing pauses. A release too few nodes confirmed is counted, not
//     fatal: the save stands and the keys left behind expire with their TTL.
//
// Why the lock matters: a save is "check, then (slowly) write". The write takes a few
// milliseconds, and without the lock any other request for the item arriving meanwhile passes
// the check too and saves the item a second time. The example counts such duplicates; with the
// lock there are none.
//
// How to run it
//   REDLOCK_NODES=redis://127.0.0.1:6379 ./05_dedup_save_once
//   REDLOCK_NODES is a comma-separated list of redis:// URLs, one per independent Redis master;
//   unset, one local node is used. Or, from a build directory configured with tests, against five
//   throwaway nodes:
//     test/support/redis_nodes -- examples/05_dedup_save_once
//
// Prints "requests 4000, saves 300, skipped 3700, duplicates 0" and exits 0 when every item was
// saved exactly once; exits 1 (with a message) when an item was saved twice or never, or when a
// request could not be served because too few nodes answered, even after trying for 10 s.
// A release that too few nodes confirmed is reported but is not a failure: the save stands.

#include "common/nodes.hpp"
#include "common/run.hpp"
#include <redlock/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <deque>
#include <exception>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using std::chrono::steady_clock;

namespace {

constexpr int app_servers = 4;
constexpr int items = 300;
constexpr int requests = 4000;
constexpr auto arrivals_over = 500ms;  // the requests arrive evenly over this time
constexpr auto write_takes = 5ms;      // a slow database write
// Far longer than a save; short enough that a key whose release never reached a node (a lost
// connection) stops blocking the item well within a request's retry_for.
constexpr auto lock_ttl = 2000ms;

// How long a request keeps trying while too few nodes answer, and the pauses between its tries.
constexpr auto retry_for = 30s;
constexpr auto first_retry_pause = 10ms;
constexpr auto max_retry_pause = 320ms;

struct counts {
  int saves = 0;
  int waited = 0;                // found the item's lock held, and waited for it
  int already_saved = 0;         // skipped: the item was in the store when we got the lock
  int duplicates = 0;            // saves of an item that was saved already
  int retries = 0;               // tries repeated because too few nodes answered
  int failed = 0;                // requests that never got the lock: not served
  int releases_unconfirmed = 0;  // releases too few nodes confirmed; their keys expire
};

// The "database": item -> which app server saved it.
using store = std::map<int, int>;

asio::awaitable<void> sleep_until(steady_clock::time_point when) {
  asio::steady_timer timer(co_await asio::this_coro::executor, when);
  co_await timer.async_wait(asio::use_awaitable);
}

// One "save item X" request, handled by app server number `server`.
asio::awaitable<void> save_request(redlock::client& locks, int server, int item,
                                   steady_clock::time_point arrives, store& database,
                                   counts& seen) {
  co_await sleep_until(arrives);

  // One round, no waiting: usually the item is free, or saved already and free again.
  const std::string resource = "item:" + std::to_string(item);
  const auto give_up_at = steady_clock::now() + retry_for;
  auto pause = first_retry_pause;
  redlock::lock_options options;
  options.ttl = lock_ttl;
  redlock::error_code failed;
  redlock::lease lease;
  while (true) {
    std::tie(failed, lease) =
        co_await locks.async_try_acquire(resource, options, asio::as_tuple(asio::use_awaitable));
    // Other failures mean too few nodes answered in time (down, or slow on a busy host): try
    // again, backing off, until the request's own deadline.
    if (!failed || failed == redlock::error::contended || steady_clock::now() + pause >= give_up_at)
      break;
    ++seen.retries;
    co_await sleep_until(steady_clock::now() + pause);
    pause = std::min(2 * pause, max_retry_pause);
  }
  if (failed == redlock::error::contended) {
    // Held by another request, which is probably saving the item, or by the leftover of a round
    // that failed: wait for the lock (woken by its release) and decide under it.
    ++seen.waited;
    const auto wait_left =
        std::chrono::duration_cast<std::chrono::milliseconds>(give_up_at - steady_clock::now());
    options.wait = std::max(wait_left, std::chrono::milliseconds(1));
    std::tie(failed, lease) =
        co_await locks.async_acquire(resource, options, asio::as_tuple(asio::use_awaitable));
  }
  if (failed) {
    if (++seen.failed <= 3) {  // the first few are worth a look
      std::fprintf(stderr, "item %d: %s\n  %s\n", item, failed.message().c_str(),
                   lease.diagnostics().c_str());
    }
    co_return;
  }

  if (database.contains(item)) {
    ++seen.already_saved;
  } else {
    // The slow write. Without the lock, this is where a second request would pass the check above.
    co_await sleep_until(steady_clock::now() + write_takes);
    if (database.contains(item)) ++seen.duplicates;
    database[item] = server;
    ++seen.saves;
  }
  // A release that too few nodes confirmed in time does not undo the save. The keys it could not
  // delete expire with the TTL; until then requests for the item wait for them.
  auto [release_failed] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
  if (release_failed) ++seen.releases_unconfirmed;
}

asio::awaitable<void> demo(std::vector<redlock::node_config> nodes, store& database, counts& seen) {
  const auto executor = co_await asio::this_coro::executor;
  // A deque, not a vector: clients cannot be moved, and a growing vector moves its elements.
  std::deque<redlock::client> servers;
  for (int i = 0; i < app_servers; ++i) {
    servers.emplace_back(executor, nodes);
  }
  // Fail fast, naming the problem, when the nodes cannot be reached.
  const auto unreachable = co_await examples::reach_quorum(servers.front());
  if (unreachable) {
    throw std::runtime_error("cannot reach a quorum of the " + std::to_string(nodes.size()) +
                             " nodes: " + unreachable.message());
  }

  // Every item requested 13 or 14 times, in random order.
  std::vector<int> wanted(requests);
  for (int i = 0; i < requests; ++i) {
    wanted[static_cast<std::size_t>(i)] = i % items;
  }
  std::shuffle(wanted.begin(), wanted.end(), std::mt19937(std::random_device{}()));

  const auto start = steady_clock::now();
  std::vector<asio::awaitable<void>> all;
  for (int i = 0; i < requests; ++i) {
    const int server = i % app_servers;
    const auto arrives = start + arrivals_over * i / requests;
    all.push_back(save_request(servers[static_cast<std::size_t>(server)], server,
                               wanted[static_cast<std::size_t>(i)], arrives, database, seen));
  }
  co_await examples::run_all(std::move(all));
}  // the clients are destroyed here; io.run() in main returns once their connections are closed

}  // namespace

int main() {
  auto nodes = examples::nodes_from_environment();

  store database;
  counts seen;
  asio::io_context io;
  bool finished = false;
  asio::co_spawn(io, demo(std::move(nodes), database, seen), [&](std::exception_ptr failure) {
    finished = !failure;
    if (!failure) return;
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "05_dedup_save_once: %s\n", e.what());
    }
  });
  io.run();
  if (!finished) return 1;

  // Printed only now, after every client is gone: the summary is the example's final word.
  const int skipped = seen.already_saved;
  std::printf(
      "skipped: %d found the item saved under its lock; %d requests waited for a held lock\n",
      seen.already_saved, seen.waited);
  if (seen.retries > 0 || seen.failed > 0 || seen.releases_unconfirmed > 0) {
    std::printf(
        "too few nodes answered in time: %d tries repeated, %d requests not served, %d releases "
        "unconfirmed\n",
        seen.retries, seen.failed, seen.releases_unconfirmed);
  }
  std::printf("requests %d, saves %d, skipped %d, duplicates %d\n", requests, seen.saves, skipped,
              seen.duplicates);

  const int never_saved = items - static_cast<int>(database.size());
  if (seen.duplicates != 0 || never_saved != 0 || seen.failed != 0) {
    std::fprintf(stderr, "%d item(s) saved more than once, %d never saved, %d requests failed\n",
                 seen.duplicates, never_saved, seen.failed);
    return 1;
  }
  std::printf("every item saved exactly once\n");
  return 0;
}
