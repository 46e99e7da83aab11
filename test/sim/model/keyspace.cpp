#include "sim/model/keyspace.hpp"

namespace redlock::sim {

bool sorted_set::put(const std::string& member, double score) {
  auto [at, added] = scores.try_emplace(member, score);
  if (!added) {
    if (at->second == score) return false;
    ordered.erase({at->second, member});
    at->second = score;
  }
  ordered.emplace(score, member);
  return added;
}

bool sorted_set::remove(std::string_view member) {
  auto at = scores.find(member);
  if (at == scores.end()) return false;
  ordered.erase({at->second, at->first});
  scores.erase(at);
  return true;
}

stored_value* keyspace::find(std::string_view key, std::int64_t now_ms) {
  auto at = entries_.find(key);
  if (at == entries_.end()) return nullptr;
  if (at->second.expires_at_ms && now_ms > *at->second.expires_at_ms) {
    entries_.erase(at);
    return nullptr;
  }
  return &at->second;
}

stored_value& keyspace::assign(const std::string& key, stored_value value) {
  return entries_.insert_or_assign(key, std::move(value)).first->second;
}

bool keyspace::erase(std::string_view key) {
  auto at = entries_.find(key);
  if (at == entries_.end()) return false;
  entries_.erase(at);
  return true;
}

std::vector<std::string> keyspace::live_keys(std::int64_t now_ms) const {
  std::vector<std::string> keys;
  for (const auto& [key, value] : entries_) {
    if (!value.expires_at_ms || now_ms <= *value.expires_at_ms) keys.push_back(key);
  }
  return keys;
}

std::optional<std::int64_t> keyspace::latest_expiry() const {
  std::optional<std::int64_t> latest;
  for (const auto& [key, value] : entries_) {
    if (value.expires_at_ms && (!latest || *value.expires_at_ms > *latest)) {
      latest = value.expires_at_ms;
    }
  }
  return latest;
}

}  // namespace redlock::sim
