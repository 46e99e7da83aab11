#ifndef REDLOCK_TEST_SUPPORT_PROXIED_FLEET_HPP
#define REDLOCK_TEST_SUPPORT_PROXIED_FLEET_HPP

#include "redlock/client.hpp"
#include "redlock/node_config.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/redis_fleet.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace redlock::test {

// Redis servers, each behind its own chaos proxy; a client given configs() meets every fault the
// proxies make.
struct proxied_fleet {
  redis_fleet fleet;
  std::vector<std::unique_ptr<chaos_proxy>> proxies;

  explicit proxied_fleet(std::size_t count = 5) : fleet(count) {
    for (std::size_t i = 0; i < count; ++i)
      proxies.push_back(std::make_unique<chaos_proxy>(fleet[i].port()));
  }

  std::vector<node_config> configs() const {
    std::vector<node_config> out;
    for (const auto& proxy : proxies)
      out.push_back(proxy->config());
    return out;
  }

  // Node i answers about i x `step` after a request is written: half of it on the way there,
  // half on the way back, so requests reach the slow nodes late (node 4: 2 x step) and their
  // replies are late too.
  void stagger_replies(std::chrono::milliseconds step) {
    for (std::size_t i = 0; i < proxies.size(); ++i)
      proxies[i]->set_latency(step * static_cast<int>(i) / 2);
  }

  void clear_toxics() {
    for (auto& proxy : proxies)
      proxy->clear();
  }

  // Connects `locks` to every node (a PING on all of them, then the proxies' accepts and the
  // handshakes behind them). False if that did not happen within two seconds.
  boost::asio::awaitable<bool> connect(client& locks) {
    std::vector<std::uint64_t> before;
    for (const auto& proxy : proxies)
      before.push_back(proxy->connections_accepted());
    auto [ec] = co_await locks.async_ping(boost::asio::as_tuple(boost::asio::use_awaitable));
    if (ec) co_return false;
    const bool all = co_await eventually(
        [&] {
          for (std::size_t i = 0; i < before.size(); ++i)
            if (proxies[i]->connections_accepted() == before[i]) return false;
          return true;
        },
        std::chrono::seconds(2));
    co_await sleep_for(std::chrono::milliseconds(50));  // the handshakes behind the accepts
    co_return all;
  }
};

}  // namespace redlock::test

#endif
