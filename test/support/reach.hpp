#ifndef REDLOCK_TEST_SUPPORT_REACH_HPP
#define REDLOCK_TEST_SUPPORT_REACH_HPP

#include "redlock/client.hpp"
#include "redlock/inspection.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>

namespace redlock::test {

// PINGs until a quorum answers, or `limit` passes; returns the last ping's outcome. A ping gives
// each node node_timeout, its connect and handshake included, and a fresh client's first connects
// can take longer on a loaded machine (sanitizers, other suites); they go on while pings fail.
inline boost::asio::awaitable<error_code> ping_until_answered(
    client& locks, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  namespace asio = boost::asio;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (;;) {
    auto [ec] = co_await locks.async_ping(asio::as_tuple(asio::use_awaitable));
    if (!ec || std::chrono::steady_clock::now() >= deadline) co_return ec;
    pause.expires_after(std::chrono::milliseconds(10));
    co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

// Inspects a probe key until every node answered, or `limit` passes; true once every node did.
// ping_until_answered needs a quorum only: a test that reads what a request did on each node
// needs every link up and past its handshake first.
inline boost::asio::awaitable<bool> every_node_answers(
    client& locks, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  namespace asio = boost::asio;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (;;) {
    auto [ec, seen] =
        co_await locks.async_inspect("every-node-answers", asio::as_tuple(asio::use_awaitable));
    if (seen.answered() == locks.size()) co_return true;
    if (std::chrono::steady_clock::now() >= deadline) co_return false;
    pause.expires_after(std::chrono::milliseconds(10));
    co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace redlock::test

#endif
