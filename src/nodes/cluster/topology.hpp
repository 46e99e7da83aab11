#ifndef REDLOCK_NODES_CLUSTER_TOPOLOGY_HPP
#define REDLOCK_NODES_CLUSTER_TOPOLOGY_HPP

#include "redlock/node_config.hpp"
#include "resp/value.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace redlock::detail {

// Where a cluster's slots are served, as one of its nodes described it. Pure: read from a
// CLUSTER SHARDS or CLUSTER SLOTS reply, asked for the master of a slot.

struct cluster_endpoint {
  std::string host;
  std::uint16_t port = 0;

  friend bool operator==(const cluster_endpoint&, const cluster_endpoint&) = default;
};

// "host:port", or "[v6]:port".
std::string endpoint_text(const cluster_endpoint& at);

// Read from "host:port" or "[v6]:port"; empty when malformed (node_config's checks refuse those
// first).
std::optional<cluster_endpoint> parse_endpoint(std::string_view text);

// The servers a cluster or sentinel node is first told of: its address, then its seeds, each
// once, in that order (malformed ones left out).
std::vector<cluster_endpoint> address_and_seeds(const node_config& node);

// How to reach one server of `cluster` at `at`: a standalone node with the cluster node's login
// and TLS settings.
node_config server_of(const node_config& cluster, const cluster_endpoint& at);

class cluster_topology {
 public:
  struct slot_range {
    std::uint16_t first = 0;
    std::uint16_t last = 0;  // inclusive
    std::size_t master = 0;  // index into masters()
  };

  // Records that the master at `endpoint` serves slots [first, last]. Ranges may come in any order.
  void add(std::uint16_t first, std::uint16_t last, const cluster_endpoint& endpoint);

  // The master serving `slot`, or null when no shard announced it (a cluster that is still being
  // set up, or a shard without a master during its failover).
  const cluster_endpoint* master_of(std::uint16_t slot) const noexcept;

  // Every slot's master as an index into masters(), or `unserved` where master_of(slot) is null:
  // the same answers as master_of, for all 16 384 slots in one pass.
  static constexpr std::uint32_t unserved = 0xffffffff;
  std::vector<std::uint32_t> masters_by_slot() const;

  // Every master, each once, in the order they were first added.
  const std::vector<cluster_endpoint>& masters() const noexcept { return masters_; }

  // The slots no master serves, as a count: 0 when the cluster covers all 16 384.
  std::size_t uncovered_slots() const noexcept;

 private:
  std::vector<cluster_endpoint> masters_;
  std::vector<slot_range> ranges_;  // sorted by first, not overlapping
};

// What a reply that cannot be read as a topology says instead, in words for the node's diagnostics.
using topology_or_problem = std::variant<cluster_topology, std::string>;

// Reads CLUSTER SHARDS (Redis 7), in RESP2 (flat arrays of name, value pairs) or RESP3 (maps).
// Only each shard's master counts; a shard whose master is failed is left out, so its slots are
// uncovered until the next refresh. A master's address is its "endpoint" (what Redis tells
// clients to use), else its "ip"; an endpoint given as "?" or empty means the node that answered,
// `answered_by_host`. With `tls`, the master's "tls-port" is used, which a TLS cluster reports.
topology_or_problem read_cluster_shards(const resp::value& reply, std::string_view answered_by_host,
                                        bool tls);

// Reads CLUSTER SLOTS (older servers, or one that refuses CLUSTER SHARDS): each element is the
// range's first and last slot, then its master's [host, port, ...], then its replicas.
topology_or_problem read_cluster_slots(const resp::value& reply, std::string_view answered_by_host);

// A redirection reply: "MOVED <slot> <host>:<port>" (the slot lives there now: refresh the
// topology) or "ASK <slot> <host>:<port>" (only this request goes there, after ASKING). An empty
// host means the node that answered. Empty when `reply` is no redirection.
struct cluster_redirect {
  enum class kind : std::uint8_t { moved, ask };
  kind what = kind::moved;
  std::uint16_t slot = 0;
  cluster_endpoint target;
};
std::optional<cluster_redirect> read_redirect(const resp::value& reply,
                                              std::string_view answered_by_host);

// The cluster's passing refusals, which fail the node's vote for this request and say why:
// TRYAGAIN (a multi-key request during a slot's migration), CLUSTERDOWN (the cluster cannot serve
// the slot), LOADING (the master is loading its data), READONLY (the node answering is a replica).
// Empty for any other reply.
std::string_view cluster_refusal(const resp::value& reply) noexcept;

}  // namespace redlock::detail

#endif
