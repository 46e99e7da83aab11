// 06_multithreaded: one lock client used from an io_context that four threads run.
//
// What it shows
//   - The client is given a strand, asio::make_strand(io), instead of the io_context's executor.
//   - Many coroutines spawned on that strand take the lock in turn and update a shared counter
//     with a read, a pause, and a write; the total comes out exact.
//   - Their steps run on several threads, but never two at once and always on the strand.
//
// Why everything goes through the strand
//   A client, its leases and their operations are not guarded by mutexes: all their state belongs
//   to the executor the client was given, and every call must come from there. With one thread
//   running the io_context, that thread is the guarantee. With four, two handlers could run at the
//   same moment and race inside the client. A strand runs its handlers one at a time (on whichever
//   thread is free), so the client's executor becomes a serial one again.
//   A coroutine spawned on the strand resumes on the strand after every co_await, so every call it
//   makes on the client comes from the strand, and the client completes its operations there. Code
//   running anywhere else (another thread, a handler of the plain io_context) must first hop onto
//   the strand, with asio::post or asio::dispatch, before touching the client or a lease.
//   The distributed lock and the strand guard different things: the lock keeps other processes
//   out of the resource, the strand keeps this process's threads from racing on its memory.
//
// How to run it
//   REDLOCK_NODES=redis://127.0.0.1:6379 ./06_multithreaded
//   REDLOCK_NODES is a comma-separated list of redis:// URLs, one per independent Redis master;
//   unset, one local node is used. Or, from a build directory configured with tests, against five
//   throwaway nodes:
//     test/support/redis_nodes -- examples/06_multithreaded
//
// Exits 0 when the counter is exact and every step ran on the strand, 1 (with a message)
// otherwise.

#include "common/nodes.hpp"
#include "common/run.hpp"
#include <redlock/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

using strand = asio::strand<asio::io_context::executor_type>;

constexpr int threads = 4;
constexpr int workers = 50;
constexpr int rounds = 10;  // lock acquisitions per worker

// Touched only from the strand, so plain members need no atomics or mutex.
struct shared_state {
  long counter = 0;  // the resource the distributed lock protects
  std::set<std::thread::id> threads_seen;
  int steps_off_strand = 0;
};

void note_step(const strand& on, shared_state& state) {
  if (!on.running_in_this_thread()) ++state.steps_off_strand;
  state.threads_seen.insert(std::this_thread::get_id());
}

asio::awaitable<void> worker(redlock::client& locks, strand on, shared_state& state) {
  redlock::lock_options options;
  options.wait = 10s;  // a bound, so that unreachable nodes end the example instead of hanging it
  for (int i = 0; i < rounds; ++i) {
    auto lease = co_await locks.async_acquire("example:06", options, asio::use_awaitable);
    note_step(on, state);

    // Read, let every other ready coroutine run, write: an update that only the lock keeps whole.
    const long value = state.counter;
    co_await asio::post(on, asio::use_awaitable);
    note_step(on, state);
    state.counter = value + 1;

    co_await lease.async_release(asio::use_awaitable);
    note_step(on, state);
  }
}

asio::awaitable<int> demo(std::vector<redlock::node_config> nodes, strand on) {
  // Constructed, used and destroyed on the strand: this coroutine was spawned there.
  redlock::client locks(on, std::move(nodes));
  shared_state state;
  // Fail fast, naming the problem, when the nodes cannot be reached (see reach_quorum).
  const auto unreachable = co_await examples::reach_quorum(locks);
  if (unreachable) {
    std::fprintf(stderr, "cannot reach a quorum of the %zu nodes: %s\n", locks.size(),
                 unreachable.message().c_str());
    co_return 1;
  }

  const auto start = std::chrono::steady_clock::now();
  std::vector<asio::awaitable<void>> all;
  for (int i = 0; i < workers; ++i) {
    all.push_back(worker(locks, on, state));
  }
  co_await examples::run_all(std::move(all));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);

  const long expected = static_cast<long>(workers) * rounds;
  std::printf("%d coroutines x %d lock rounds in %lld ms on %d threads\n", workers, rounds,
              static_cast<long long>(took.count()), threads);
  std::printf("counter %ld (expected %ld); steps ran on %zu thread(s), %d off the strand\n",
              state.counter, expected, state.threads_seen.size(), state.steps_off_strand);
  if (state.counter != expected || state.steps_off_strand != 0) {
    std::fprintf(stderr, "%s\n",
                 state.counter != expected ? "updates were lost" : "a step ran off the strand");
    co_return 1;
  }
  co_return 0;
}

}  // namespace

int main() {
  auto nodes = examples::nodes_from_environment();

  asio::io_context io(threads);
  const strand on = asio::make_strand(io);
  int exit_code = 1;
  // Runs on the strand; main reads exit_code only after every thread has been joined.
  asio::co_spawn(on, demo(std::move(nodes), on),
                 examples::exit_status("06_multithreaded", exit_code));

  // Each run() returns once demo() has finished and the client has closed its connections.
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&io] { io.run(); });
  }
  for (auto& thread : pool) {
    thread.join();
  }
  return exit_code;
}
