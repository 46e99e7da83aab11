#ifndef REDLOCK_NODES_NODE_SET_HPP
#define REDLOCK_NODES_NODE_SET_HPP

#include "algo/node_answer.hpp"
#include "hold.hpp"
#include "log.hpp"
#include "net/connection.hpp"
#include "nodes/cluster/topology.hpp"
#include "nodes/lock_node.hpp"
#include "nodes/peer_registry.hpp"
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

// The kinds of request a lock operation sends, each with its own rules on the connections:
//  - set, extend, ping, read: skipped (failed at once, unsent) on a node that has let a request
//  time
//    out and not answered it since (connection::unresponsive): a stopped, stalled or much delayed
//    node. A round that cannot win without such a node is then decided in one round trip and
//    frees the keys it took on the others, instead of holding them for node_timeout while rival
//    rounds split the remaining votes.
//  - extend: a NOSCRIPT answer is final (the node did not extend), never resent behind requests
//    written after it: that could run a shorter extension after a longer, later one.
//  - release: always sent, in order behind every SET it may have to undo; written also after its
//    deadline, and kept for a node that is down until its next handshake (for at most the key's
//    longest lifetime, given as `key_lifetime`), so that a broken link does not leave the key.
enum class lock_request : std::uint8_t {
  set,
  set_asking_ttl,
  fenced_set,
  slot_set,
  read_set,   // a read-write lock's reader (rw_read_acquire_script)
  write_set,  // a read-write lock's writer (rw_write_acquire_script)
  multi_set,  // a set of locks (multi_acquire_script)
  fence_write_back,
  extend,
  read_extend,   // a read-write lock reader's extension (rw_read_extend_script); as extend
  multi_extend,  // a set's extension (multi_extend_script); as extend
  release,
  ping,
  read  // inspection: the keys' values and PTTLs (client::async_inspect)
};

// The lock_node for `config`: a cluster_node for node_kind::cluster, a sentinel_node for
// node_kind::sentinel, else a standalone_node.
// `settings` are those of the client's lock connections; the node's admit_peer checks are made from
// `peers` for node number `index`.
std::unique_ptr<lock_node> make_lock_node(const boost::asio::any_io_executor& executor,
                                          node_config config, connection_options settings,
                                          const std::shared_ptr<peer_registry>& peers,
                                          std::size_t index);

// A release of one hold (release_script_for its kind), encoded as each kind of node needs it: a
// standalone node announces it with PUBLISH on the release channel; a cluster node with SPUBLISH
// on the channel moved into the key's slot (in_slot), which only the shard that owns the slot
// carries, and where the client's subscribers of that node listen (release_listener).
struct release_request {
  std::string plain;
  std::string sharded;  // empty when no node is a cluster or nothing is announced
  hold_kind kind = hold_kind::lock;

  const std::string& for_node(const node_config& node) const noexcept {
    return node.kind == node_kind::cluster && !sharded.empty() ? sharded : plain;
  }
};

// The Redlock nodes of one client: the one way operations and leases reach them. A node is a
// standalone server behind one connection, or a Redis Cluster whose requests go to the master of
// their key's hash slot (lock_node); requests about one key run in the order they are sent.
// Lives on the client's executor; every member is called there.
class node_set {
 public:
  // Opens a connection to each node (lazily: the first request connects). Throws system_error
  // with error::invalid_argument, naming the problem, for options no lock can work with.
  node_set(boost::asio::any_io_executor executor, std::vector<node_config> nodes,
           client_options options);

  const boost::asio::any_io_executor& executor() const noexcept { return executor_; }
  const client_options& options() const noexcept { return options_; }
  std::size_t size() const noexcept { return nodes_.size(); }
  std::size_t quorum() const noexcept { return nodes_.size() / 2 + 1; }
  const node_config& node(std::size_t i) const noexcept { return nodes_[i]->config(); }
  std::vector<node_config> configs() const;
  // For a cluster node: the master serving `slot` now, as far as its routes know; else empty.
  std::optional<cluster_endpoint> cluster_master_of(std::size_t node, std::uint16_t slot) const;
  // For a sentinel node: its master as the sentinels named it last (a standalone config); else
  // empty, also before the first answer.
  std::optional<node_config> sentinel_master_of(std::size_t node) const;
  // Some node is a Redis Cluster: every key of one request must be in one hash slot.
  bool has_cluster_node() const noexcept { return has_cluster_node_; }

  // The per-request rules of `kind` (see lock_request), each with node_timeout. A release runs
  // the script of `held` (release_script_for in scripts.hpp).
  request_options rules_for(lock_request kind, std::chrono::milliseconds key_lifetime = {},
                            hold_kind held = hold_kind::lock) const noexcept;

  // Sends one request about `key` (its first key; every key of a request shares one hash slot;
  // empty for PING) to every node (or those marked in `only`) with the rules of `kind`;
  // sink.on_reply(first_tag + node, ec, reply) is called once per node, on the executor. The
  // string_view form's bytes must be owned by the sink or outlive it; a shared_payload is kept
  // alive by the requests themselves.
  void send(std::string_view key, std::string_view payload, reply_sink& sink, std::size_t first_tag,
            lock_request kind, const std::vector<bool>* only = nullptr,
            std::chrono::milliseconds key_lifetime = {});
  void send(std::string_view key, const shared_payload& payload, reply_sink& sink,
            std::size_t first_tag, lock_request kind, const std::vector<bool>* only = nullptr,
            std::chrono::milliseconds key_lifetime = {});

  // The token-checked release of `held` with `token`, announced on `channel` unless empty.
  release_request encode_release(const hold_keys& held, std::string_view token,
                                 std::string_view channel) const;
  // The token-checked DEL of lock key `key`.
  release_request encode_release(std::string_view key, std::string_view token,
                                 std::string_view channel) const {
    return encode_release(hold_keys::lock_key(key), token, channel);
  }
  // Sends a release to every node (or those in `only`) with the rules of lock_request::release, as
  // send() does; the bytes must outlive the sink as there.
  void send_release(std::string_view key, const release_request& bytes, reply_sink& sink,
                    std::size_t first_tag, const std::vector<bool>* only,
                    std::chrono::milliseconds key_lifetime);

  // Called with a node whose answer to a best-effort release shows the key gone there (deleted,
  // or found no longer ours).
  using key_gone = std::function<void(std::size_t node)>;

  // Token-checked release of `held` (encode_release with `token`, announced on `channel` unless
  // empty) on every node or those in `only`; nobody waits for it. Requests on each node's
  // connection run in order, so a release sent after a SET on that node executes after it.
  // `key_lifetime`: the longest TTL the key may have been given (lock_request::release).
  void release_best_effort(const hold_keys& held, std::string_view token, std::string_view channel,
                           std::chrono::milliseconds key_lifetime,
                           const std::vector<bool>* only = nullptr, key_gone on_gone = {});

  // `on_moved(node, moved)` is told whenever a node learns that some keys' master changed (a
  // sentinel node's failover, a cluster's slots that moved: lock_node::watch_masters), on the
  // executor.
  using master_moved_at = std::function<void(std::size_t node, const master_moved& moved)>;
  void watch_masters(const master_moved_at& on_moved);

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
  template <typename Payload>
  void send_each(std::string_view key, const Payload& payload, reply_sink& sink,
                 std::size_t first_tag, lock_request kind, const request_options& rules,
                 const std::vector<bool>* only);

  boost::asio::any_io_executor executor_;
  client_options options_;
  std::shared_ptr<peer_registry> peers_;
  std::vector<std::unique_ptr<lock_node>> nodes_;
  bool has_cluster_node_ = false;
};

}  // namespace redlock::detail

#endif
