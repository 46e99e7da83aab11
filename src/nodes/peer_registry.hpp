#ifndef REDLOCK_NODES_PEER_REGISTRY_HPP
#define REDLOCK_NODES_PEER_REGISTRY_HPP

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace redlock::detail {

// The server each connection of each Redlock node reached last: two nodes that reach one server
// would count that server's vote twice. A standalone node has one connection (link 0); a cluster
// node one per shard master it talks to. Shared with the connections' admit_peer checks, which may
// outlive the node set while they drain. Belongs to the client's executor.
class peer_registry {
 public:
  explicit peer_registry(std::vector<std::string> addresses);

  // Records that link `link` of `node` reached `peer`, unless a link of another node reached it
  // already: then the refusal, naming both nodes. An empty peer (not known) is admitted.
  std::string admit(std::size_t node, std::size_t link, const std::string& peer);

  // Link `link` of `node` is closed: what it reached no longer counts, and the number may be
  // given to a new link.
  void forget(std::size_t node, std::size_t link);

  // The admit_peer check of one connection (connection_options::admit_peer).
  static std::function<std::string(const std::string&)> check_for(
      const std::shared_ptr<peer_registry>& registry, std::size_t node, std::size_t link);

  // The first duplicate found; empty until then.
  const std::string& refusal() const noexcept { return refusal_; }

 private:
  std::vector<std::string> addresses_;           // node_config::address(), for messages
  std::vector<std::vector<std::string>> peers_;  // by node, by link; empty until connected
  std::string refusal_;
};

}  // namespace redlock::detail

#endif
