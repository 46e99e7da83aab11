#ifndef REDLOCK_TEST_SUPPORT_FLEET_COMMANDS_HPP
#define REDLOCK_TEST_SUPPORT_FLEET_COMMANDS_HPP

#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::test {

// Sends `command` to every server of `fleet` that is running, each on a connection of its own,
// and waits for each reply (up to 2 s); a server that refuses it throws.
inline void on_every_node(redis_fleet& fleet, std::initializer_list<std::string_view> command) {
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    if (!fleet[i].running()) continue;
    sync_client client(fleet[i].port(), {}, {}, std::chrono::seconds(2));
    client.command(command);
  }
}

// How long `key` lives on each node of `fleet` (PTTL, read one node after the other right after
// `measured_at`), shortest first: -2 where it is gone, -1 where it has no expiry.
struct key_lifetimes {
  std::chrono::steady_clock::time_point measured_at;
  std::vector<long long> left_ms;

  // Whether a majority of the nodes hold the key with an expiry.
  bool on_a_majority() const { return left_ms[left_ms.size() / 2] > 0; }
  // When it is gone from a majority at the latest: a lock taken before then breaks exclusion.
  std::chrono::steady_clock::time_point majority_gone_at() const {
    return measured_at + std::chrono::milliseconds(left_ms[left_ms.size() / 2]);
  }
  long long longest_ms() const { return left_ms.back(); }
};

inline key_lifetimes read_key_lifetimes(redis_fleet& fleet, const std::string& key) {
  key_lifetimes out{std::chrono::steady_clock::now(), {}};
  for (std::size_t i = 0; i < fleet.size(); ++i)
    out.left_ms.push_back(sync_client(fleet[i].port()).command({"PTTL", key}).integer);
  std::sort(out.left_ms.begin(), out.left_ms.end());
  return out;
}

}  // namespace redlock::test

#endif
