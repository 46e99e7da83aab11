#ifndef REDLOCK_TEST_SUPPORT_PROXIED_FLEET_HPP
#define REDLOCK_TEST_SUPPORT_PROXIED_FLEET_HPP

#include "redlock/client.hpp"
#include "redlock/node_config.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/reach.hpp"
#include "support/redis_fleet.hpp"
#include "support/test_pki.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace redlock::test {

// How the client's bytes travel through the proxies: plain RESP, or TLS that the proxies pass on
// without looking (the servers' certificates come from shared_test_pki() and name 127.0.0.1, where
// the proxies listen).
enum class link { plain, tls };
inline constexpr std::array<link, 2> every_link = {link::plain, link::tls};
inline const char* name_of(link kind) {
  return kind == link::tls ? "over TLS" : "over plain TCP";
}

// Redis servers, each behind its own chaos proxy; a client given configs() meets every fault the
// proxies make.
struct proxied_fleet {
  link kind;
  redis_fleet fleet;
  std::vector<std::unique_ptr<chaos_proxy>> proxies;

  explicit proxied_fleet(std::size_t count = 5, link how = link::plain)
      : kind(how), fleet(count, server_options(how)) {
    for (std::size_t i = 0; i < count; ++i) {
      proxies.push_back(
          std::make_unique<chaos_proxy>(kind == link::tls ? fleet[i].tls_port() : fleet[i].port()));
    }
  }

  // Node i as a client should see it: through its proxy.
  node_config config(std::size_t i) const {
    node_config node = proxies.at(i)->config();
    if (kind == link::tls) {
      node.tls.enabled = true;
      node.tls.ca_file = shared_test_pki().ca().string();
    }
    return node;
  }

  std::vector<node_config> configs() const {
    std::vector<node_config> out;
    for (std::size_t i = 0; i < proxies.size(); ++i)
      out.push_back(config(i));
    return out;
  }

  // The servers' own ports, behind the proxies: for checks that must not meet the faults.
  std::vector<std::uint16_t> ports() {
    std::vector<std::uint16_t> out;
    for (std::size_t i = 0; i < fleet.size(); ++i)
      out.push_back(fleet[i].port());
    return out;
  }

  // Node i answers about i x `step` after a request is written: half of it on the way there,
  // half on the way back, so requests reach the slow nodes late (node 4: 2 x step) and their
  // replies are late too.
  void stagger_replies(std::chrono::milliseconds step) {
    for (std::size_t i = 0; i < proxies.size(); ++i)
      proxies[i]->set_latency(step * static_cast<int>(i) / 2);
  }

  static redis_server_options server_options(link how) {
    redis_server_options options;
    if (how == link::tls) {
      const auto& pki = shared_test_pki();
      options.tls = redis_server_options::tls_listener{
          pki.server().cert.string(), pki.server().key.string(), pki.ca().string(), false};
    }
    return options;
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
    if (co_await ping_until_answered(locks)) co_return false;
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
