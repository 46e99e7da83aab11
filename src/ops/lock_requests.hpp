#ifndef REDLOCK_OPS_LOCK_REQUESTS_HPP
#define REDLOCK_OPS_LOCK_REQUESTS_HPP

#include "lock/hold_keys.hpp"
#include "lock/lease_state.hpp"
#include "lock/lock_request.hpp"
#include "nodes/node_set.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace redlock::detail {

// The known_slot of node_set::send for a request about `lease`'s resource: hashed once per lease
// (lease_state::resource_slot), and only when some node is a cluster node. Inline: every acquire
// round asks, and without a cluster node the answer is one test.
inline std::optional<std::uint16_t> resource_slot_for(const node_set& nodes,
                                                      const lease_state& lease) noexcept {
  if (!nodes.has_cluster_node()) return std::nullopt;
  return lease.resource_slot();
}

// What a request of `kind` runs on the nodes besides its bytes.
request_rules rules_of(lock_request kind) noexcept;

// A release of a hold of `kind` (release_script_for), for a key that may have been given a TTL of
// up to `key_lifetime`.
request_rules release_rules(hold_kind kind, std::chrono::milliseconds key_lifetime) noexcept;

// The token-checked release of `held` with `token`, announced on `channel` unless empty: a
// cluster node announces on the channel moved into the key's slot with SPUBLISH (in_slot), which
// only the shard that owns the slot carries, and where the client's subscribers of that node
// listen (release_announcements).
payload_by_node_kind encode_release(const node_set& nodes, const hold_keys& held,
                                    std::string_view token, std::string_view channel);
// The same, written into `out`, which must be empty: a release's own payload, not moved there.
void encode_release_into(payload_by_node_kind& out, const node_set& nodes, const hold_keys& held,
                         std::string_view token, std::string_view channel);

// Called with a node whose answer to a best-effort release shows the key gone there (deleted, or
// found no longer ours).
using key_gone = std::function<void(std::size_t node)>;

// Token-checked release of `held` (encode_release with `token`, announced on `channel` unless
// empty) on every node or those in `only`; nobody waits for it. Requests on each node's
// connection run in order, so a release sent after a SET on that node executes after it.
// `key_lifetime`: the longest TTL the key may have been given.
void release_best_effort(node_set& nodes, const hold_keys& held, std::string_view token,
                         std::string_view channel, std::chrono::milliseconds key_lifetime,
                         const std::vector<bool>* only = nullptr, key_gone on_gone = {});

}  // namespace redlock::detail

#endif
