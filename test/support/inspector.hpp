#ifndef REDLOCK_TEST_SUPPORT_INSPECTOR_HPP
#define REDLOCK_TEST_SUPPORT_INSPECTOR_HPP

#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::test {

// A counter of the server at `port` from INFO `section`: the number right after `field`
// ("cmdstat_evalsha:calls=", "total_connections_received:"); 0 when the field is not there (a
// command never called has no cmdstat line).
inline long long info_counter(std::uint16_t port, std::string_view section,
                              std::string_view field) {
  sync_client client(port, {}, {}, std::chrono::seconds(2));
  const std::string info = client.command({"INFO", section}).text;
  const auto at = info.find(field);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + field.size()));
}

// Looks at the servers directly. Each call opens its own short-lived connection, so a node that
// was killed and restarted, or is being killed, never leaves a broken client behind. Paused nodes
// must not be asked (they would only time out): the *_on functions take the nodes to look at.
class inspector {
 public:
  explicit inspector(redis_fleet& fleet) : fleet_(fleet) {}

  std::optional<std::string> get(std::size_t node, std::string_view key) {
    sync_client client(fleet_[node].port(), {}, {}, std::chrono::seconds(2));
    const auto reply = client.command({"GET", key});
    if (reply.is_null()) return std::nullopt;
    return reply.text;
  }

  // Milliseconds to live; -2 when the key does not exist, -1 when it has no TTL.
  long long pttl(std::size_t node, std::string_view key) {
    sync_client client(fleet_[node].port(), {}, {}, std::chrono::seconds(2));
    return client.command({"PTTL", key}).integer;
  }

  void set(std::size_t node, std::string_view key, std::string_view value,
           std::chrono::milliseconds ttl) {
    sync_client client(fleet_[node].port(), {}, {}, std::chrono::seconds(2));
    const std::string px = std::to_string(ttl.count());
    client.command({"SET", key, value, "PX", px});
  }

  // How many of the given nodes hold `key` with exactly `value`.
  std::size_t holding_on(const std::vector<std::size_t>& nodes, std::string_view key,
                         std::string_view value) {
    std::size_t count = 0;
    for (const auto node : nodes) {
      const auto v = get(node, key);
      count += v && *v == value ? 1 : 0;
    }
    return count;
  }

  // How many of the given nodes have `key` at all.
  std::size_t present_on(const std::vector<std::size_t>& nodes, std::string_view key) {
    std::size_t count = 0;
    for (const auto node : nodes) {
      count += get(node, key) ? 1 : 0;
    }
    return count;
  }

  // The same over every running node.
  std::size_t holding(std::string_view key, std::string_view value) {
    return holding_on(running(), key, value);
  }
  std::size_t present(std::string_view key) { return present_on(running(), key); }

  // Every key on the running nodes, summed (DBSIZE): "nothing left behind" in one number.
  long long total_keys() {
    long long total = 0;
    for (const auto node : running()) {
      sync_client client(fleet_[node].port(), {}, {}, std::chrono::seconds(2));
      total += client.command({"DBSIZE"}).integer;
    }
    return total;
  }

  std::vector<std::size_t> running() const {
    std::vector<std::size_t> nodes;
    for (std::size_t i = 0; i < fleet_.size(); ++i) {
      if (fleet_[i].running()) nodes.push_back(i);
    }
    return nodes;
  }

 private:
  redis_fleet& fleet_;
};

inline std::vector<std::size_t> node_range(std::size_t first, std::size_t last) {
  std::vector<std::size_t> nodes;
  for (std::size_t i = first; i < last; ++i) {
    nodes.push_back(i);
  }
  return nodes;
}

}  // namespace redlock::test

#endif
