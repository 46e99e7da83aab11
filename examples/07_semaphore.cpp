// 07_semaphore: at most N jobs at once across every worker process, with redlock::semaphore.
//
// What it shows
//   - redlock::semaphore(client, name, permits, options): a counting lock. Here a service that
//     allows 3 connections at once is used by 12 jobs from three "worker processes" (three
//     clients on one io_context, each standing in for its own process).
//   - redlock::with_permit runs each job holding a permit and always gives it back; the permit is
//     a lease like a lock's, and its resource() names the slot it holds ("{exports}:slot:1").
//   - The jobs wait for a permit (lock_options::wait) and are woken when one is released, in this
//     process or another, rather than polling.
//
// How to run it
//   REDLOCK_NODES=redis://127.0.0.1:6379 ./07_semaphore
//   or, from a build directory configured with tests, against five throwaway nodes:
//     test/support/redis_nodes -- examples/07_semaphore
//
// Prints how many jobs ran at most at once and exits 0 when that was 3: never more (the
// semaphore's promise) and, with 12 jobs of 200 ms each arriving together, at some point exactly
// 3 (the permits were used). Exits 1 with a message otherwise.

#include "common/nodes.hpp"
#include "common/run.hpp"
#include <redlock/redlock.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t permits = 3;
constexpr int workers = 3;
constexpr int jobs_per_worker = 4;

struct service {
  int connected = 0;     // jobs inside right now
  int most_at_once = 0;  // the most there ever were
  std::set<std::string> slots_used;
};

asio::awaitable<void> job(redlock::semaphore& connections, service& used) {
  co_await redlock::with_permit(connections, [&](redlock::lease& permit) -> asio::awaitable<void> {
    ++used.connected;
    used.most_at_once = std::max(used.most_at_once, used.connected);
    used.slots_used.insert(permit.resource());
    co_await examples::sleep_for(200ms);  // the work
    --used.connected;
  });
}

asio::awaitable<int> demo(std::vector<redlock::node_config> nodes) {
  const auto executor = co_await asio::this_coro::executor;
  service used;
  std::vector<std::unique_ptr<redlock::client>> processes;
  std::vector<std::unique_ptr<redlock::semaphore>> semaphores;
  for (int i = 0; i < workers; ++i) {
    processes.push_back(std::make_unique<redlock::client>(executor, nodes));
    // Every worker names the same semaphore with the same number of permits.
    semaphores.push_back(std::make_unique<redlock::semaphore>(
        *processes.back(), "example:service-connections", permits,
        redlock::lock_options{.ttl = 10s, .wait = 30s}));
  }
  std::vector<asio::awaitable<void>> all;
  for (int i = 0; i < workers * jobs_per_worker; ++i)
    all.push_back(job(*semaphores[static_cast<std::size_t>(i % workers)], used));
  co_await examples::run_all(std::move(all));

  std::printf("12 jobs, at most %d at once, over %zu slots\n", used.most_at_once,
              used.slots_used.size());
  if (used.most_at_once > static_cast<int>(permits)) {
    std::fprintf(stderr, "07_semaphore: more jobs than permits ran at once\n");
    co_return 1;
  }
  if (used.most_at_once < static_cast<int>(permits)) {
    std::fprintf(stderr, "07_semaphore: the permits were never all in use at once\n");
    co_return 1;
  }
  for (auto& process : processes)
    co_await process->async_shutdown(asio::use_awaitable);
  co_return 0;
}

}  // namespace

int main() {
  auto nodes = examples::nodes_from_environment();
  asio::io_context io;
  int exit_code = 1;
  asio::co_spawn(io, demo(std::move(nodes)), examples::exit_status("07_semaphore", exit_code));
  io.run();
  return exit_code;
}
