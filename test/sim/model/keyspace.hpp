#ifndef REDLOCK_TEST_SIM_MODEL_KEYSPACE_HPP
#define REDLOCK_TEST_SIM_MODEL_KEYSPACE_HPP

// The data of one model Redis node: strings and sorted sets with millisecond expiries, read on the
// node's own clock. Expiry is lazy, as Redis's is as far as a client can tell: a key whose expiry
// time has passed is gone for every command (Redis keeps it alive while now == expiry, and so does
// this model).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace redlock::sim {

// A sorted set: each member's score, and the members in Redis's order (score, then member bytes).
struct sorted_set {
  std::map<std::string, double, std::less<>> scores;
  std::set<std::pair<double, std::string>> ordered;

  // Adds or moves `member`; returns whether it was new.
  bool put(const std::string& member, double score);
  bool remove(std::string_view member);
  std::size_t size() const noexcept { return scores.size(); }
};

struct stored_value {
  std::variant<std::string, sorted_set> data;
  // Absolute, on the node's millisecond clock; none: no expiry.
  std::optional<std::int64_t> expires_at_ms;

  bool is_string() const noexcept { return data.index() == 0; }
  std::string& text() { return std::get<std::string>(data); }
  sorted_set& zset() { return std::get<sorted_set>(data); }
};

class keyspace {
 public:
  // The key's value while it lives at `now_ms`; an expired key is removed and nullptr returned.
  stored_value* find(std::string_view key, std::int64_t now_ms);
  // Sets `key` to a new value, replacing whatever it held.
  stored_value& assign(const std::string& key, stored_value value);
  bool erase(std::string_view key);
  void clear() noexcept { entries_.clear(); }

  // The keys alive at `now_ms`, in byte order (for leak checks and dumps).
  std::vector<std::string> live_keys(std::int64_t now_ms) const;
  // The latest expiry of any key that has one (for a checker's "once every TTL has passed").
  std::optional<std::int64_t> latest_expiry() const;

 private:
  std::map<std::string, stored_value, std::less<>> entries_;
};

}  // namespace redlock::sim

#endif
