#ifndef REDLOCK_EXAMPLES_COMMON_NODES_HPP
#define REDLOCK_EXAMPLES_COMMON_NODES_HPP

// Where the examples find their Redis nodes: the REDLOCK_NODES environment variable, a
// comma-separated list of redis:// URLs, or a single local node when it is not set. A bad URL ends
// the program with exit code 2 and a message naming it, before any lock is taken. And whether
// they answer.

#include <redlock/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

namespace examples {

inline std::vector<redlock::node_config> nodes_from_environment() {
  const char* from_env = std::getenv("REDLOCK_NODES");
  try {
    return redlock::node_config::from_url_list(from_env ? from_env : "redis://127.0.0.1:6379");
  } catch (const std::exception& e) {
    // The message names the problem: an empty entry, a bad URL (password masked), a repeated node.
    std::fprintf(stderr, "REDLOCK_NODES: %s\n", e.what());
    std::exit(2);
  }
}

// Whether a quorum of the nodes answers: PINGs until one does, for up to a second. A PING gives
// each node client_options::node_timeout (100 ms by default), its connect and handshake
// included; a first connect that takes longer (a distant or TLS node) goes on meanwhile, and a
// later PING finds it open. The examples call this first to fail fast, naming the problem: an
// acquire would only say, after its wait, that it gave up.
inline boost::asio::awaitable<redlock::error_code> reach_quorum(redlock::client& locks) {
  namespace asio = boost::asio;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (;;) {
    auto [ec] = co_await locks.async_ping(asio::as_tuple(asio::use_awaitable));
    if (!ec || std::chrono::steady_clock::now() >= deadline) co_return ec;
    pause.expires_after(std::chrono::milliseconds(20));
    co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace examples

#endif
