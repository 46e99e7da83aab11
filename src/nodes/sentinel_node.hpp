#ifndef REDLOCK_NODES_SENTINEL_NODE_HPP
#define REDLOCK_NODES_SENTINEL_NODE_HPP

#include "net/connection_options.hpp"
#include "nodes/lock_node.hpp"
#include "nodes/peer_registry.hpp"
#include "nodes/sentinel/replies.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace redlock::detail {

class sentinel_router;

// The master that a group of Redis Sentinels names, as one Redlock node (node_kind::sentinel).
// Requests go to that master over one pipelined connection, as to a standalone node; what this
// class adds is finding the master and following it.
//
// Resolution: SENTINEL GET-MASTER-ADDR-BY-NAME on the first sentinel that answers (the node's
// address, then its seeds, starting after the last one that failed), before the first request
// goes out; requests issued meanwhile wait for it within their own deadlines. Every connect to the
// master checks with ROLE that it is one: a stale sentinel's answer or a demoted master fails the
// connect (error::server_error, "ROLE says this server is a replica of ..."), and the next
// resolution asks the next sentinel.
//
// Following a failover: the sentinel that answered is also subscribed to +switch-master (over the
// same RESP3 connection), and its announcement for our master moves the node at once. The master
// is also resolved again after a READONLY reply (a master demoted to replica), a lost master
// link, a failed connect, or a lost sentinel link (then on the next sentinel); one resolution at a
// time, at most every sentinel_router::min_resolve_interval. A request that could not be sent
// because the master was unreachable waits for the next resolution and is sent to the master it
// names, within its deadline; one whose link broke after it was written is answered as it is (it
// may have run). A request to a server that turned replica is answered READONLY, a failed vote.
// Every switch to another master is told to watch_masters, so that leases held here renew on it at
// once.
//
// Order: requests run in the order they were issued (request_lanes, one lane). While one waits for
// a master, every later one waits behind it, though the link may be back meanwhile; after a
// switch, new requests wait until those in flight on the former master are answered.
//
// Kinds: the sentinels' handshake checks that each is one (HELLO's mode), and the master's that
// it is no sentinel; a server of the wrong kind, or sentinels that know no master of the name,
// fail the node with error::wrong_node_kind, a lasting failure naming the URL to use.
//
// The link to a former master closes once its requests are answered (releases kept for it are
// delivered if it comes back within their lifetime, where they find their key gone or ours).
class sentinel_node final : public lock_node {
 public:
  // `settings`: those of the client's lock connections; the node's admit_peer checks are made
  // from `peers` for node number `index`.
  sentinel_node(const boost::asio::any_io_executor& executor, node_config config,
                connection_options settings, std::shared_ptr<peer_registry> peers,
                std::size_t index);
  ~sentinel_node() override;
  sentinel_node(const sentinel_node&) = delete;
  sentinel_node& operator=(const sentinel_node&) = delete;

  void exec(const request& what, std::string_view payload, reply_sink& sink, std::size_t tag,
            std::chrono::steady_clock::time_point now) override;
  void exec(const request& what, const shared_payload& payload, reply_sink& sink, std::size_t tag,
            std::chrono::steady_clock::time_point now) override;

  // The master's link's lasting failure (a refused login), or else a sentinel's (a refused login
  // to the sentinels, a master name they do not know).
  boost::system::error_code permanent_failure() const noexcept override;
  const std::string& last_error() const noexcept override;
  void close_when_idle(std::chrono::milliseconds bound) override;
  void watch_masters(master_moved_fn on_moved) override;

  // On the master the sentinels name, following it (sentinel_router::subscribe_releases).
  void subscribe_releases(const std::string& channel, announcement_events on) override;
  void unsubscribe_releases() override;
  subscription_state releases_subscription(std::string_view resource) const override;

  // "127.0.0.1:6380": the master the sentinels named last; empty before the first answer.
  std::string master_address() const;
  // When it last changed, as far as the sentinels told.
  master_record last_master_change() const;
  // Whether last_master_change() holds the sentinels' own account for the master named now (it
  // is asked for beside the requests, and may come after their replies).
  bool master_change_settled() const;

 private:
  std::shared_ptr<sentinel_router> router_;
};

}  // namespace redlock::detail

#endif
