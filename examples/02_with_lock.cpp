// 02_with_lock: run work under a lock, and watch what happens when the lock cannot be kept.
//
// What it shows
//   - redlock::with_lock(client, resource, options, body): acquires, runs the body coroutine,
//     always releases. While the body runs, the lease renews itself at half of its TTL.
//   - Lock loss: soon after the lock is taken, a majority of the nodes stops answering. Renewal
//     cannot reach a quorum, the lock's validity runs out, and the lease is lost. with_lock then
//     cancels the body at the co_await where it waits, and throws boost::system::system_error
//     with redlock::error::lock_lost once the body has unwound. Work that must not run without
//     the lock is thereby stopped, instead of carrying on unaware.
//   - Recovery: once the nodes answer again, the lock can be taken again.
//
// The outage is simulated: the example itself sends `CLIENT PAUSE <ms> ALL` to a majority of the
// nodes, which keeps their connections open but leaves every command unanswered until the pause
// ends, as a stalled server or a network partition would. The TTL is short (1 s) so that the loss
// comes quickly; the program waits for the pause to end before it exits, so the nodes are healthy
// for whatever runs next. Takes about 3 s.
//
// How to run it
//   nodes=redis://127.0.0.1:6379,redis://127.0.0.1:6380,redis://127.0.0.1:6381
//   REDLOCK_NODES=$nodes ./02_with_lock
//   REDLOCK_NODES is a comma-separated list of redis:// URLs, one per independent Redis master;
//   unset, one local node is used. Or, from a build directory configured with tests, against five
//   throwaway nodes:
//     test/support/redis_nodes -- examples/02_with_lock
//   Only on nodes of your own: the example pauses most of them for a few seconds.
//
// Exits 0 when the body was cancelled and with_lock threw lock_lost, 1 (with a message) otherwise.

#include "common/nodes.hpp"
#include "common/run.hpp"
#include <redlock/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/system_error.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;
using std::chrono::steady_clock;

namespace {

constexpr auto ttl = 1000ms;
constexpr auto outage = 2500ms;  // well past the TTL: renewal has no chance

const steady_clock::time_point program_start = steady_clock::now();

long long now_ms() {
  const auto elapsed = steady_clock::now() - program_start;
  return std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
}

asio::awaitable<void> sleep_until(steady_clock::time_point when) {
  asio::steady_timer timer(co_await asio::this_coro::executor, when);
  co_await timer.async_wait(asio::use_awaitable);
}

// One Redis command in RESP, the protocol's array-of-bulk-strings form.
std::string resp_command(const std::vector<std::string>& words) {
  std::string out;
  out.append("*").append(std::to_string(words.size())).append("\r\n");
  for (const auto& word : words) {
    out.append("$").append(std::to_string(word.size())).append("\r\n").append(word).append("\r\n");
  }
  return out;
}

// Sends CLIENT PAUSE on a connection of its own (logging in first if the node wants a password).
// The pause holds every client of that server, the lock library's connections included.
asio::awaitable<void> send_pause(const redlock::node_config& node) {
  const auto executor = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(executor);
  asio::ip::tcp::socket socket(executor);
  const auto addresses =
      co_await resolver.async_resolve(node.host, std::to_string(node.port), asio::use_awaitable);
  co_await asio::async_connect(socket, addresses, asio::use_awaitable);

  std::string request;
  int replies_expected = 1;
  if (!node.password.empty()) {
    request += node.username.empty() ? resp_command({"AUTH", node.password})
                                     : resp_command({"AUTH", node.username, node.password});
    ++replies_expected;
  }
  request += resp_command({"CLIENT", "PAUSE", std::to_string(outage.count()), "ALL"});
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);

  std::string replies;
  for (int i = 0; i < replies_expected; ++i) {
    const std::size_t length = co_await asio::async_read_until(
        socket, asio::dynamic_buffer(replies), "\r\n", asio::use_awaitable);
    const std::string line = replies.substr(0, length - 2);
    replies.erase(0, length);
    if (line.empty() || line[0] != '+') {
      throw std::runtime_error(node.address() + " refused CLIENT PAUSE: " + line);
    }
  }
}

// Pauses the first nodes.size() / 2 + 1 nodes; `pause_ends` learns when the last pause ends.
asio::awaitable<void> pause_majority(const std::vector<redlock::node_config>& nodes,
                                     std::optional<steady_clock::time_point>& pause_ends) {
  const std::size_t majority = nodes.size() / 2 + 1;
  for (std::size_t i = 0; i < majority; ++i) {
    // Set before sending: a pause whose reply is lost still runs its course.
    pause_ends = steady_clock::now() + outage;
    // A bound on each node's answer, so that a node that is already stuck cannot hang the example.
    const auto sent = co_await (send_pause(nodes[i]) || examples::sleep_for(2s));
    if (sent.index() == 1) {
      throw std::runtime_error(nodes[i].address() + " did not answer CLIENT PAUSE");
    }
  }
  std::printf("%5lld ms  paused %zu of %zu nodes for %lld ms (simulated outage)\n", now_ms(),
              majority, nodes.size(), static_cast<long long>(outage.count()));
}

asio::awaitable<int> demo(std::vector<redlock::node_config> nodes) {
  const auto executor = co_await asio::this_coro::executor;
  redlock::client locks(executor, nodes);
  // Fail fast, naming the problem, when the nodes cannot be reached (see reach_quorum).
  const auto unreachable = co_await examples::reach_quorum(locks);
  if (unreachable) {
    std::fprintf(stderr, "cannot reach a quorum of the %zu nodes: %s\n", locks.size(),
                 unreachable.message().c_str());
    co_return 1;
  }

  redlock::lock_options options;
  options.ttl = ttl;
  options.wait = 5s;  // a bound on the acquire, so that unreachable nodes do not hang the example

  std::optional<long long> lost_at;
  std::optional<long long> cancelled_at;
  std::optional<steady_clock::time_point> pause_ends;
  bool body_finished = false;
  std::exception_ptr failure;

  try {
    co_await redlock::with_lock(
        locks, "example:02", options, [&](redlock::lease& lease) -> asio::awaitable<void> {
          std::printf("%5lld ms  acquired \"%s\" (ttl %lld ms, renewed every %lld ms)\n", now_ms(),
                      lease.resource().c_str(), static_cast<long long>(ttl.count()),
                      static_cast<long long>(ttl.count() / 2));
          // Only to print when the loss is noticed; with_lock watches for it the same way.
          lease.async_wait_lost([&](redlock::error_code ec) {
            if (ec == redlock::error::lock_lost) {
              lost_at = now_ms();
              std::printf("%5lld ms  lease lost: renewal could not reach a quorum\n", *lost_at);
            }
          });

          co_await pause_majority(nodes, pause_ends);

          // The "long work": ten seconds in small steps. with_lock cancels it at a co_await.
          try {
            for (int step = 0; step < 100; ++step) {
              co_await examples::sleep_for(100ms);
            }
          } catch (const boost::system::system_error&) {
            cancelled_at = now_ms();
            std::printf("%5lld ms  body cancelled\n", *cancelled_at);
            throw;
          }
          body_finished = true;
        });
  } catch (const boost::system::system_error& e) {
    if (e.code() == redlock::error::lock_lost) {
      std::printf("%5lld ms  with_lock threw: %s\n", now_ms(), e.what());
    } else {
      failure = std::current_exception();
    }
  } catch (const std::exception&) {
    failure = std::current_exception();
  }

  // Leave the nodes as we found them, also after a failure: let the pause run out.
  if (pause_ends) co_await sleep_until(*pause_ends);
  if (failure) std::rethrow_exception(failure);

  if (body_finished) {
    std::fprintf(stderr, "the body ran to its end: the lock was never lost\n");
    co_return 1;
  }
  if (!lost_at || !cancelled_at) {
    std::fprintf(stderr, "the lease was not reported lost, or the body was not cancelled\n");
    co_return 1;
  }

  auto again = co_await locks.async_acquire("example:02", options, asio::use_awaitable);
  co_await again.async_release(asio::use_awaitable);
  std::printf("%5lld ms  nodes answer again: lock taken and released\n", now_ms());
  co_return 0;
}

}  // namespace

int main() {
  auto nodes = examples::nodes_from_environment();

  asio::io_context io;
  int exit_code = 1;
  asio::co_spawn(io, demo(std::move(nodes)), examples::exit_status("02_with_lock", exit_code));
  io.run();
  return exit_code;
}
