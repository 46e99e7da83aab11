#ifndef REDLOCK_TEST_SUPPORT_LOCK_CHECKS_HPP
#define REDLOCK_TEST_SUPPORT_LOCK_CHECKS_HPP

// Checks shared by the integration suites: what the servers hold once the library's stragglers
// have arrived (an acquire, extension or release completes on a quorum's answers; the other
// nodes' may land a moment later), and a record of how an operation completed.

#include "redlock/client.hpp"
#include "redlock/lease.hpp"
#include "support/async_test.hpp"
#include "support/inspector.hpp"
#include "support/reach.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace redlock::test {

inline bool is_hex_token(const std::string& token) {
  return token.size() == 40 &&
         token.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

// Opens the connection to every node before a test pauses some of them: a PING round answered by
// a quorum, then a moment for the slower connects to finish.
inline boost::asio::awaitable<void> warm_up(redlock::client& locks) {
  using namespace std::chrono_literals;
  for (int i = 0; i < 3; ++i) {
    const auto ec = co_await ping_until_answered(locks);
    BOOST_TEST_REQUIRE(!ec, "ping: " << ec.message());
    co_await sleep_for(50ms);
  }
}

// An acquire is decided as soon as a quorum granted it; the other SETs are still on their way (a
// fresh client may still be connecting to some nodes). Waits until every running node holds it.
inline boost::asio::awaitable<bool> settled_everywhere(inspector& nodes, std::string key,
                                                       std::string token) {
  co_return co_await eventually([&] { return nodes.holding(key, token) == nodes.running().size(); },
                                std::chrono::milliseconds(3000));
}

// A release completes once a quorum answered; the remaining DELs may still be on their way.
inline boost::asio::awaitable<bool> gone_everywhere(inspector& nodes, std::string key) {
  co_return co_await eventually([&] { return nodes.present(key) == 0; },
                                std::chrono::milliseconds(2000));
}

inline boost::asio::awaitable<bool> no_keys_anywhere(inspector& nodes) {
  co_return co_await eventually([&] { return nodes.total_keys() == 0; },
                                std::chrono::milliseconds(2000));
}

// After a workload under faults, while its clients live and their io_context runs: waits until
// none of `keys` is left on any server at `ports`, and returns a complaint for each key that went
// only when its TTL ran out, has no TTL, or is still there after `limit` (empty: all released).
// The last releases complete on a quorum's answers; the other nodes' DELs may still be on their
// way, and a release kept for a node whose link broke goes out after the reconnect. Each must come
// before the key would have expired: a key the library forgot to release goes only at its TTL.
// Choose `limit` longer than the TTL, so that expiry, not the clock, decides (a key gone within
// the last few milliseconds of its TTL counts as expired).
inline boost::asio::awaitable<std::vector<std::string>> keys_not_released(
    std::vector<std::uint16_t> ports, std::vector<std::string> keys,
    std::chrono::milliseconds limit) {
  using clock = std::chrono::steady_clock;
  struct sighting {
    std::size_t node;
    std::string key;
    clock::time_point asked_at;  // the key expires no sooner than asked_at + pttl
    long long pttl;
  };
  std::vector<std::string> complaints;
  std::vector<sighting> present;
  // One connection per server for the whole wait (the polls below ask every 2 ms).
  std::vector<std::unique_ptr<sync_client>> servers;
  for (const auto port : ports)
    servers.push_back(std::make_unique<sync_client>(port));
  for (std::size_t node = 0; node < ports.size(); ++node) {
    sync_client& c = *servers[node];
    for (const auto& key : keys) {
      const auto asked_at = clock::now();
      const long long pttl = c.command({"PTTL", key}).integer;
      if (pttl == -1)
        complaints.push_back(fmt::format("{} left on node {} without a TTL", key, node));
      if (pttl >= 0) present.push_back({node, key, asked_at, pttl});
    }
  }
  const auto give_up = clock::now() + limit;
  while (!present.empty()) {
    co_await sleep_for(std::chrono::milliseconds(2));
    const bool last_look = clock::now() >= give_up;
    std::erase_if(present, [&](sighting& seen) {
      const auto asked_at = clock::now();
      const long long pttl = servers[seen.node]->command({"PTTL", seen.key}).integer;
      if (pttl >= 0) {
        seen.asked_at = asked_at;
        seen.pttl = pttl;
        if (last_look) {
          complaints.push_back(
              fmt::format("{} left on node {}, pttl {} ms", seen.key, seen.node, pttl));
        }
        return last_look;
      }
      if (clock::now() >= seen.asked_at + std::chrono::milliseconds(seen.pttl)) {
        complaints.push_back(
            fmt::format("{} on node {} went only when its TTL ran out", seen.key, seen.node));
      }
      return true;
    });
  }
  co_return complaints;
}

// Remembers how an acquire completed, and how often (it must be exactly once).
struct acquire_outcome {
  int completions = 0;
  boost::system::error_code ec;
  redlock::lease lease;
  std::chrono::steady_clock::time_point at;
};

inline auto record(acquire_outcome& out) {
  return [&out](boost::system::error_code ec, redlock::lease lease) {
    ++out.completions;
    out.ec = ec;
    out.lease = std::move(lease);
    out.at = std::chrono::steady_clock::now();
  };
}

// The same for an operation that completes with an error code only.
struct void_outcome {
  int completions = 0;
  boost::system::error_code ec;
  std::chrono::steady_clock::time_point at;
};

inline auto record(void_outcome& out) {
  return [&out](boost::system::error_code ec) {
    ++out.completions;
    out.ec = ec;
    out.at = std::chrono::steady_clock::now();
  };
}

}  // namespace redlock::test

#endif
