#ifndef REDLOCK_NODES_LOCK_NODE_HPP
#define REDLOCK_NODES_LOCK_NODE_HPP

#include "net/multiplexer.hpp"
#include "redlock/node_config.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

class connection;

// Which keys' requests now go to another master than before, on one node: a sentinel-managed
// master that failed over (every key), or a cluster's slots that moved to another master. A lease
// held there renews at once, so that its key's TTL on the new master does not run down while the
// renewal waits for its turn (the key came over with the TTL it had).
struct master_moved {
  bool every_key = false;
  std::vector<std::uint16_t> slots;  // sorted hash slots, when not every_key
};
using master_moved_fn = std::function<void(const master_moved&)>;

// A node's subscription to the channel where releases are announced, as far as one resource's
// releases are concerned.
enum class subscription_state : std::uint8_t {
  off,         // not asked for
  connecting,  // being made, for the first time on this server
  subscribed,  // announcements arrive
  down,        // the last attempt failed or the link broke (or no server is known yet); retried
};

// What a node tells of its release announcements (lock_node::subscribe_releases).
struct announcement_events {
  // `resource` was announced released. Called inside a connection's read loop: it must only look
  // and remember (no requests, no completions) and must not throw.
  std::function<void(std::string_view resource)> heard;
  // The subscription is now in place (true), or was lost or could not be made (false): for every
  // resource, or (`slot` set, a cluster node) for the resources of one hash slot. Posted to the
  // executor, never called inside a node's member.
  std::function<void(bool subscribed, std::optional<std::uint16_t> slot)> link_changed;
};

// One Redlock node as the node set sees it: where a request about a key goes, however many servers
// stand behind the node. A standalone server is one connection; a Redis Cluster routes each key to
// the master of its hash slot. Every member is called on the client's executor.
//
// The contract of exec is connection::exec_direct's, whatever the node: `sink.on_reply(tag, ...)`
// is called exactly once, on the executor, never inside exec; requests about keys of one hash
// slot run on the server in the order they were issued (a release sent after a SET runs after
// it), also when the node sends one again elsewhere (a redirection, a failover: request_lanes);
// the reply or failure text names the server that answered or failed.
class lock_node {
 public:
  virtual ~lock_node() = default;

  const node_config& config() const noexcept { return config_; }

  // `key`: the request's first key; every key of one request shares its hash slot. Empty for a
  // request about no key (PING), which a node of several servers sends to each and answers once:
  // success when every one of them succeeded. `replicas`: not 0 for a write that counts only once
  // that many replicas have it (node_config::wait_replicas; see replica_wait.hpp). `slot`: the
  // key's hash slot when the sender computed it, which must then be hash_slot(key); a cluster node
  // routes by it instead of hashing the key again (node_set hashes once per fan-out, not once per
  // cluster node).
  struct request {
    std::string_view key;
    const request_options& rules;
    unsigned replicas = 0;
    std::optional<std::uint16_t> slot{};
  };
  virtual void exec(const request& what, std::string_view payload, reply_sink& sink,
                    std::size_t tag, std::chrono::steady_clock::time_point now) = 0;
  virtual void exec(const request& what, const shared_payload& payload, reply_sink& sink,
                    std::size_t tag, std::chrono::steady_clock::time_point now) = 0;

  // A failure that lasts until someone changes a configuration (connection::permanent_failure),
  // when the node as a whole has one; and the node's last failure's text.
  virtual boost::system::error_code permanent_failure() const noexcept = 0;
  virtual const std::string& last_error() const noexcept = 0;

  // connection::close_when_idle, for every connection of the node.
  virtual void close_when_idle(std::chrono::milliseconds bound) = 0;

  // `on_moved` is told, on the executor and never inside exec, whenever the node learns that some
  // keys' master changed (a +switch-master, a READONLY or a lost link followed by a new master; a
  // MOVED or a topology that re-points slots). A node of one server never calls it.
  virtual void watch_masters(master_moved_fn on_moved) { (void)on_moved; }

  // Release announcements. subscribe_releases starts subscribing to `channel` where this node's
  // releases are announced (its server; a sentinel node's master, wherever it moves; a cluster's
  // shard masters, per slot, following the slots) and keeps doing so, reconnecting, until
  // unsubscribe_releases or another subscribe_releases; `on` is told from then on, never after.
  // A cluster node subscribes only to the slots of the resources wanted (want_releases, counted;
  // each unwant_releases names the resource of one want_releases); other nodes ignore them.
  virtual void subscribe_releases(const std::string& channel, announcement_events on) = 0;
  virtual void unsubscribe_releases() = 0;
  virtual void want_releases(std::string_view resource) { (void)resource; }
  virtual void unwant_releases(std::string_view resource) { (void)resource; }
  virtual subscription_state releases_subscription(std::string_view resource) const = 0;

  // The connection that takes every request to this node as it is, if there is one: a standalone
  // server whose writes wait for no replicas. The node set issues a fan-out's requests there
  // itself (connection::exec_direct), which is all that exec would do, without a virtual call
  // per request. Null for every other node. It lives as long as the node.
  connection* direct_connection() const noexcept { return direct_; }

 protected:
  explicit lock_node(node_config config) : config_(std::move(config)) {}
  void set_direct_connection(connection* direct) noexcept { direct_ = direct; }

 private:
  node_config config_;
  connection* direct_ = nullptr;
};

}  // namespace redlock::detail

#endif
