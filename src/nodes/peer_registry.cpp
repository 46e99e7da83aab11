#include "nodes/peer_registry.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace redlock::detail {

peer_registry::peer_registry(std::vector<std::string> addresses)
    : addresses_(std::move(addresses)), peers_(addresses_.size()) {}

std::string peer_registry::admit(std::size_t node, std::size_t link, const std::string& peer) {
  if (peer.empty()) return {};
  for (std::size_t other = 0; other < peers_.size(); ++other) {
    if (other == node) continue;
    const auto& theirs = peers_[other];
    if (std::find(theirs.begin(), theirs.end(), peer) == theirs.end()) continue;
    std::string why = fmt::format(
        "{} and {} reach one server ({}); Redlock needs independent nodes, so this client "
        "refuses to lock until one of them is removed",
        addresses_[other], addresses_[node], peer);
    if (refusal_.empty()) refusal_ = why;
    return why;
  }
  auto& mine = peers_[node];
  if (mine.size() <= link) mine.resize(link + 1);
  mine[link] = peer;
  return {};
}

void peer_registry::forget(std::size_t node, std::size_t link) {
  auto& mine = peers_[node];
  if (link < mine.size()) mine[link].clear();
}

std::function<std::string(const std::string&)> peer_registry::check_for(
    const std::shared_ptr<peer_registry>& registry, std::size_t node, std::size_t link) {
  // Names were compared as written; what they resolve to can only be compared once connected.
  return
      [registry, node, link](const std::string& peer) { return registry->admit(node, link, peer); };
}

}  // namespace redlock::detail
