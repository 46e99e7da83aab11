#ifndef REDLOCK_NODES_CLUSTER_SHARD_SUBSCRIPTIONS_HPP
#define REDLOCK_NODES_CLUSTER_SHARD_SUBSCRIPTIONS_HPP

#include "clock.hpp"
#include "net/connection.hpp"
#include "nodes/cluster/topology.hpp"
#include "nodes/lock_node.hpp"
#include "redlock/node_config.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace redlock::detail {

// The release announcements of one Redis Cluster node. A release on a cluster is announced with
// SPUBLISH on the release channel moved into the key's slot (in_slot), which only the shard that
// owns the slot carries; so a subscription is per slot, made with SSUBSCRIBE on the master that
// serves the slot, over a RESP3 connection per shard master (opened when a slot first needs it,
// with the handshake of any subscriber).
//
// Following the slot: the master is the one the client's lock routes name (slot_master), else the
// node's address; a MOVED answer is followed at once (at most max_redirects times in a row). After
// a failed attempt the next one asks another of the node's seeds (its address first), whose MOVED
// leads to the slot's master, unless the routes name a different master by then. When
// the slot moves away the server ends the subscription itself (an unprompted "sunsubscribe"
// push), and the slot is subscribed again where it lives now. A broken link ends the
// subscriptions it carried; they are made again when it is back, or elsewhere when the routes
// say so. Failed attempts are retried with the connection's backoff until they succeed.
//
// Subscriptions are not undone while the client still wants any: a slot that nobody waits on any
// more stays subscribed (its announcements are dropped as they are read), so a client subscribes
// to at most the slots it has waited on. close() ends them all, with the connections.
//
// Thread safety: belongs to the client's executor.
class shard_subscriptions : public std::enable_shared_from_this<shard_subscriptions> {
 public:
  static constexpr unsigned max_redirects = 5;

  // A slot's subscription: off while nobody wanted it; connecting while it is made, for the
  // first time or after it moved; down after a failed attempt, which is retried.
  using state = subscription_state;

  struct events {
    // `resource` was announced released. Called inside a connection's read loop: it must only
    // look and remember (no requests, no completions) and must not throw.
    std::function<void(std::string_view resource)> heard;
    // `slot`'s subscription is now in place (true), or was lost or refused (false). Posted.
    std::function<void(std::uint16_t slot, bool subscribed)> slot_changed;
  };
  // The master that serves a slot as the client's lock routes know it; empty when unknown.
  using slot_master_fn = std::function<std::optional<cluster_endpoint>(std::uint16_t slot)>;

  // `cluster`: the node's config; `settings`: those of a subscriber, without a channel.
  static std::shared_ptr<shard_subscriptions> create(boost::asio::any_io_executor executor,
                                                     node_config cluster,
                                                     connection_options settings,
                                                     std::string channel,
                                                     slot_master_fn slot_master, events on);

  // One more (one fewer) wait on a resource of `slot`.
  void want(std::uint16_t slot);
  void unwant(std::uint16_t slot);
  state of(std::uint16_t slot) const noexcept;

  // Ends every subscription and closes the connections; nothing is reported afterwards.
  void close();

 private:
  shard_subscriptions(boost::asio::any_io_executor executor, node_config cluster,
                      connection_options settings, std::string channel, slot_master_fn slot_master,
                      events on);

  struct slot_subscription {
    unsigned wanted = 0;
    state current = state::connecting;
    std::optional<cluster_endpoint> at;         // where it was made, or is being made
    std::optional<cluster_endpoint> failed_at;  // where the last attempt failed
    std::size_t next_seed = 0;                  // the seed asked after the next failure
    unsigned redirects = 0;
    std::uint64_t attempt = 0;  // answers to earlier attempts are void
  };
  struct shard_link {
    cluster_endpoint at;
    std::shared_ptr<connection> conn;
  };

  void subscribe(std::uint16_t slot);
  void on_answer(std::uint16_t slot, std::uint64_t attempt, const boost::system::error_code& ec,
                 const resp::value& reply);
  void lost(std::uint16_t slot, slot_subscription& sub, state now);
  void on_push(const cluster_endpoint& from, const resp::value& push);
  void on_link(const cluster_endpoint& at, bool up);
  void retry_later();
  void retry_down();
  shard_link& link_to(const cluster_endpoint& at);
  // Closes the links that carry no subscription and none being made.
  void prune_links();
  void report(std::uint16_t slot, bool subscribed);

  boost::asio::any_io_executor executor_;
  node_config cluster_;
  connection_options settings_;
  std::string channel_;
  slot_master_fn slot_master_;
  events on_;
  // Where to ask when the routes know no better: the node's address, then its other seeds.
  std::vector<cluster_endpoint> seeds_;
  // Where slot `sub` is asked next.
  std::optional<cluster_endpoint> where_to_ask(std::uint16_t slot, slot_subscription& sub);
  std::unordered_map<std::uint16_t, slot_subscription> slots_;
  std::vector<shard_link> links_;
  lock_timer retry_timer_;
  bool retry_armed_ = false;
  std::chrono::milliseconds retry_delay_{0};
  std::uint64_t attempts_ = 0;
  bool closed_ = false;
};

}  // namespace redlock::detail

#endif
