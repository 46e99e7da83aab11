#include "lock_steps.hpp"

#include "connect_wait.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace redlock::cli {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using std::chrono::steady_clock;

asio::awaitable<void> open_connections(client& locks, std::string key,
                                       std::chrono::milliseconds limit,
                                       asio::cancellation_slot cancel, std::function<bool()> stop) {
  const auto deadline = steady_clock::now() + limit;
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (;;) {
    auto [ec, seen] = co_await locks.async_inspect(
        key, asio::bind_cancellation_slot(cancel, asio::as_tuple(asio::use_awaitable)));
    if (quorum_connected_or_settled(ec, seen) || stop() || steady_clock::now() >= deadline) {
      co_return;
    }
    pause.expires_after(10ms);
    co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<void> open_every_connection(client& locks, std::string resource,
                                            std::chrono::milliseconds limit) {
  const auto deadline = steady_clock::now() + limit;
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (;;) {
    auto [ec, seen] = co_await locks.async_inspect(resource, asio::as_tuple(asio::use_awaitable));
    if (!still_connecting(ec, seen) || steady_clock::now() >= deadline) co_return;
    pause.expires_after(10ms);
    co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

bool all_nodes_answered(const client& locks, const lease& held) {
  return held.granted_nodes() >= locks.size() || !held.diagnostics().empty();
}

asio::awaitable<void> await_late_answers(const client& locks, const lease& held,
                                         std::chrono::milliseconds limit,
                                         std::function<bool()> stop) {
  const auto deadline = steady_clock::now() + limit;
  asio::steady_timer poll(co_await asio::this_coro::executor);
  while (!all_nodes_answered(locks, held) && !stop() && steady_clock::now() < deadline) {
    poll.expires_at(std::min<steady_clock::time_point>(steady_clock::now() + 2ms, deadline));
    co_await poll.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace redlock::cli
