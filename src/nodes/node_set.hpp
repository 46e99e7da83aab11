#ifndef REDLOCK_NODES_NODE_SET_HPP
#define REDLOCK_NODES_NODE_SET_HPP

#include "algo/node_answer.hpp"
#include "block_cache.hpp"
#include "log.hpp"
#include "net/connection.hpp"
#include "nodes/cluster/topology.hpp"
#include "nodes/lock_node.hpp"
#include "nodes/peer_registry.hpp"
#include "nodes/release_announcements.hpp"
#include "redlock/node_config.hpp"
#include "redlock/options.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

// What one request runs on a node besides its bytes, as the operation that sends it knows it
// (request_options; the deadline is the client's node_timeout unless `wait_at_least` is longer).
struct request_rules {
  // The payload is an EVALSHA of this script: after NOSCRIPT it is resent as EVAL, unless
  // `noscript_is_final` makes the NOSCRIPT the answer (request_options).
  const script* eval_fallback = nullptr;
  bool noscript_is_final = false;
  // Failed at once, unsent, on a node that has let a request time out and not answered it since
  // (connection::unresponsive).
  bool skip_if_unresponsive = false;
  // It writes the lock's keys: node_config::wait_replicas follows it with WAIT, and the replies
  // that `counts_once_replicated` accepts count only once replicated (request_options).
  bool writes = false;
  bool (*counts_once_replicated)(const resp::value& reply) = nullptr;
  // A cleanup that must reach the node even when nobody waits for it, kept for a node that is
  // down for this long at most (request_options::deliver_for); zero: an ordinary request.
  std::chrono::milliseconds deliver_for{0};
  // Each node's answer is waited for this long when that is longer than node_timeout: a renewal
  // waits while its lease lasts (its answer counts until then). Zero: node_timeout.
  std::chrono::milliseconds wait_at_least{0};
};

// One request's bytes for each kind of node: `for_cluster` for a Redis Cluster node when not
// empty (a release announced with SPUBLISH on its shard's channel), `plain` for every other.
struct payload_by_node_kind {
  // Made for one release and dropped with it: the buffers are recycled (block_cache.hpp).
  using bytes = std::basic_string<char, std::char_traits<char>, cached_allocator<char>>;
  bytes plain;
  bytes for_cluster;
  // The key's hash slot when the cluster bytes needed it (their channel is the slot's): the
  // cluster nodes route by it, without hashing the key again.
  std::optional<std::uint16_t> slot;

  std::string_view for_node(const node_config& node) const noexcept {
    return node.kind == node_kind::cluster && !for_cluster.empty() ? for_cluster : plain;
  }
};

// Makes node number `index` of a node set: `settings` are those of every connection of the set
// (link reports included); the node's admit_peer checks are made from `peers`.
using node_factory = std::function<std::unique_ptr<lock_node>(
    const boost::asio::any_io_executor& executor, node_config config, connection_options settings,
    const std::shared_ptr<peer_registry>& peers, std::size_t index)>;

// The lock_node for `config`: a cluster_node for node_kind::cluster, a sentinel_node for
// node_kind::sentinel, else a standalone_node.
// `settings` are those of the client's lock connections; the node's admit_peer checks are made from
// `peers` for node number `index`.
std::unique_ptr<lock_node> make_lock_node(const boost::asio::any_io_executor& executor,
                                          node_config config, connection_options settings,
                                          const std::shared_ptr<peer_registry>& peers,
                                          std::size_t index);

// The Redlock nodes of one client: the one way operations and leases reach them. A node is a
// standalone server behind one connection, or a Redis Cluster whose requests go to the master of
// their key's hash slot (lock_node); requests about one key run in the order they are sent.
// Lives on the client's executor; every member is called there.
class node_set {
 public:
  // Makes each node with `make` (by default from its URL's kind: make_lock_node), its
  // connections set up with `settings` (the client's, with its handshake); they connect lazily, on
  // the first request. Throws system_error with error::invalid_argument, naming the problem, for
  // options no lock can work with.
  node_set(boost::asio::any_io_executor executor, std::vector<node_config> nodes,
           client_options options, connection_options settings,
           const node_factory& make = make_lock_node);

  const boost::asio::any_io_executor& executor() const noexcept { return executor_; }
  const client_options& options() const noexcept { return options_; }
  std::size_t size() const noexcept { return nodes_.size(); }
  std::size_t quorum() const noexcept { return nodes_.size() / 2 + 1; }
  const node_config& node(std::size_t i) const noexcept { return nodes_[i]->config(); }
  // Some node is a Redis Cluster: every key of one request must be in one hash slot.
  bool has_cluster_node() const noexcept { return has_cluster_node_; }
  // Whether a node of another kind (standalone, sentinel-managed) is in the set.
  bool has_plain_node() const noexcept { return has_plain_node_; }

  // Sends one request about `key` (its first key; every key of a request shares one hash slot;
  // empty for PING) to every node (or those marked in `only`) with `rules`;
  // sink.on_reply(first_tag + node, ec, reply) is called once per node, on the executor. The
  // string_view forms' bytes must be owned by the sink or outlive it; a shared_payload is kept
  // alive by the requests themselves. Returns the time the requests were stamped with (their
  // deadlines count from it). `known_slot`, when set, is hash_slot(key), which the caller
  // computed already.
  std::chrono::steady_clock::time_point send(
      std::string_view key, std::string_view payload, reply_sink& sink, std::size_t first_tag,
      const request_rules& rules, const std::vector<bool>* only = nullptr,
      std::optional<std::uint16_t> known_slot = std::nullopt);
  std::chrono::steady_clock::time_point send(
      std::string_view key, const shared_payload& payload, reply_sink& sink, std::size_t first_tag,
      const request_rules& rules, const std::vector<bool>* only = nullptr,
      std::optional<std::uint16_t> known_slot = std::nullopt);
  // The same with bytes of their own for cluster nodes.
  std::chrono::steady_clock::time_point send(std::string_view key,
                                             const payload_by_node_kind& payload, reply_sink& sink,
                                             std::size_t first_tag, const request_rules& rules,
                                             const std::vector<bool>* only);
  // `known_slot`, when set, is hash_slot(key), which the caller computed already.
  std::chrono::steady_clock::time_point send(std::string_view key,
                                             std::optional<std::uint16_t> known_slot,
                                             const shared_payload& plain,
                                             const shared_payload& for_cluster, reply_sink& sink,
                                             std::size_t first_tag, const request_rules& rules,
                                             const std::vector<bool>* only);

  // `on_moved(node, moved)` is told whenever a node learns that some keys' master changed (a
  // sentinel node's failover, a cluster's slots that moved: lock_node::watch_masters), on the
  // executor.
  using master_moved_at = std::function<void(std::size_t node, const master_moved& moved)>;
  void watch_masters(const master_moved_at& on_moved);

  // The release announcements on `channel` of these nodes, whose subscriptions each node makes
  // and follows itself (release_announcements); the result must not outlive the node set.
  std::shared_ptr<release_announcements> listen_for_releases(std::string channel,
                                                             release_announcements::events on);

  // Whether node i fails for good (a refused login, a wrong database...), and with
  // what; its last failure's text.
  boost::system::error_code permanent_failure(std::size_t i) const noexcept;
  const std::string& last_error(std::size_t i) const noexcept;

  // Why no acquire can be trusted with these nodes, once two of them turned out to reach one
  // server ("localhost:7700 and 127.0.0.1:7700 are one server ..."); empty until then.
  const std::string& duplicate_nodes() const noexcept;

  // "127.0.0.1:7001 granted; 127.0.0.1:7002 held by another owner; ..." for diagnostics. A node
  // still pending reads "not awaited", or "failing (text)" with a non-empty text in
  // `pending_texts`. `keys` (quoted_keys) are the request's keys, named with the node's ACL user
  // where a node refused them (NOPERM).
  std::string describe(const node_answers& answers, std::string_view yes, std::string_view no,
                       const std::vector<std::string>* pending_texts = nullptr,
                       std::string_view keys = {}) const;

  void log(log_level level, std::string_view message) const {
    call_logger(options_.logger, executor_, level, message);
  }

  // No request is sent after this; those queued still go out (releases kept for a node whose link
  // broke included, which takes a reconnect), then each connection closes, within `bound`.
  void close_when_idle(std::chrono::milliseconds bound);

 private:
  request_options options_of(const request_rules& rules) const noexcept;
  // Sends payload_for(node) to each node (or those in `only`); `known_slot`, when set, is
  // hash_slot(key), which the caller computed already.
  template <typename PayloadFor>
  std::chrono::steady_clock::time_point send_each(std::string_view key,
                                                  std::optional<std::uint16_t> known_slot,
                                                  const PayloadFor& payload_for, reply_sink& sink,
                                                  std::size_t first_tag, const request_rules& rules,
                                                  const std::vector<bool>* only);

  boost::asio::any_io_executor executor_;
  client_options options_;
  std::shared_ptr<peer_registry> peers_;
  std::vector<std::unique_ptr<lock_node>> nodes_;
  bool has_cluster_node_ = false;
  bool has_plain_node_ = false;
};

}  // namespace redlock::detail

#endif
