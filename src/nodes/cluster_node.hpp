#ifndef REDLOCK_NODES_CLUSTER_NODE_HPP
#define REDLOCK_NODES_CLUSTER_NODE_HPP

#include "net/connection_options.hpp"
#include "nodes/cluster/topology.hpp"
#include "nodes/lock_node.hpp"
#include "nodes/peer_registry.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace redlock::detail {

class cluster_router;
class shard_subscriptions;

// One Redis Cluster as one Redlock node (node_kind::cluster). Each request goes to the master of
// its key's hash slot, over one pipelined connection per shard master, opened when first needed
// with the handshake of any node (AUTH, TLS, SCRIPT LOAD, the permission probes).
//
// Topology: read with CLUSTER SHARDS (CLUSTER SLOTS when a server does not know it) from the first
// seed or known master that answers, before the first request goes out; requests issued meanwhile
// wait for it within their own deadlines. Read again after a MOVED, a READONLY or a lost shard
// link (a failover), one refresh at a time and not more often than
// cluster_router::min_refresh_interval however
// many replies ask for it; until then a MOVED reply's slot is routed to the node it names.
//
// Replies: MOVED is followed at once (the command did not run), ASK with ASKING on the target for
// that one request, each at most cluster_router::max_redirects times and never past the request's
// deadline. TRYAGAIN, CLUSTERDOWN, LOADING and READONLY are the request's answer: an error reply
// whose text names the refusal, the server and the slot, which an operation reads as a failed vote.
//
// Ordering: requests about one slot run in the order they were issued (request_lanes): while
// anything of the slot waits (for a topology, after a redirection) or is in flight on another
// master's connection than the one a new request would take, the new request waits behind it,
// and they go in turn. So a release runs after the SET it undoes, and a shorter extension never
// after a longer, later one, across MOVED, ASK and failovers.
class cluster_node final : public lock_node {
 public:
  // `settings`: those of the client's lock connections; the node's admit_peer checks are made
  // from `peers` for node number `index`.
  cluster_node(const boost::asio::any_io_executor& executor, node_config config,
               connection_options settings, std::shared_ptr<peer_registry> peers,
               std::size_t index);
  ~cluster_node() override;
  cluster_node(const cluster_node&) = delete;
  cluster_node& operator=(const cluster_node&) = delete;

  void exec(const request& what, std::string_view payload, reply_sink& sink, std::size_t tag,
            std::chrono::steady_clock::time_point now) override;
  void exec(const request& what, const shared_payload& payload, reply_sink& sink, std::size_t tag,
            std::chrono::steady_clock::time_point now) override;

  // Set while no seed or master could give a topology for a reason that lasts (a refused login,
  // a server that is not a cluster).
  boost::system::error_code permanent_failure() const noexcept override;
  const std::string& last_error() const noexcept override;
  void close_when_idle(std::chrono::milliseconds bound) override;
  void watch_masters(master_moved_fn on_moved) override;

  // Per slot, on the slot's master as this node's routes know it (shard_subscriptions).
  void subscribe_releases(const std::string& channel, announcement_events on) override;
  void unsubscribe_releases() override;
  void want_releases(std::string_view resource) override;
  void unwant_releases(std::string_view resource) override;
  subscription_state releases_subscription(std::string_view resource) const override;

  // "127.0.0.1:7001" serving `key`'s slot now, as far as this node knows; empty when unknown.
  std::string master_for(std::string_view key) const;
  // The master serving `slot` now, as far as this node knows.
  std::optional<cluster_endpoint> master_of(std::uint16_t slot) const;

 private:
  boost::asio::any_io_executor executor_;
  connection_options subscriber_settings_;
  std::shared_ptr<cluster_router> router_;
  std::shared_ptr<shard_subscriptions> releases_;
};

}  // namespace redlock::detail

#endif
