#ifndef REDLOCK_NET_CONNECTION_OPTIONS_HPP
#define REDLOCK_NET_CONNECTION_OPTIONS_HPP

#include "net/handshake.hpp"
#include "redlock/options.hpp"
#include "resp/parser.hpp"
#include "resp/value.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace redlock::detail {

class script;
class writer_turns;

// The most a connection reads from its socket at a time.
inline constexpr std::size_t connection_read_chunk = 16 * 1024;

struct connection_options {
  std::chrono::milliseconds connect_timeout{1000};
  retry_policy reconnect{std::chrono::milliseconds(50), std::chrono::milliseconds(2000), 2.0};
  std::chrono::milliseconds health_check_timeout{5000};
  std::string client_name = "redlock-asio";
  redlock::logger logger;
  resp::parser_limits limits;
  // Loaded with SCRIPT LOAD during every handshake, so that an EVALSHA of one of them meets
  // NOSCRIPT only after a SCRIPT FLUSH. Each must outlive the connection.
  std::vector<const script*> preload;
  // Cleanups (request_options::deliver_for) kept for a node that is down; the oldest are dropped
  // beyond this many.
  std::size_t max_pending_cleanups = 8192;
  // Encoded commands sent after the preloads in every handshake to learn whether the ACL user may
  // run what the lock needs. Each must be harmless (touch no existing key). An error reply fails
  // the connect: NOPERM for the command as error::permission_denied, naming the probe's command
  // (its first word); NOPERM for a key is accepted, since key patterns depend on the resource and
  // each lock request meets them itself.
  using probe = handshake_probe;
  std::vector<probe> permission_probes;
  // Asked after every TCP connect, with the peer's address ("127.0.0.1:6379"; every loopback
  // address reads "loopback"): a non-empty answer refuses the connect with
  // error::invalid_argument and that text. How a client refuses two nodes that are one server.
  std::function<std::string(const std::string& peer)> admit_peer;

  // A subscriber connection: when not empty, every handshake ends with HELLO 3 and SUBSCRIBE of
  // this channel. The server then sends the channel's messages as RESP3 pushes, which go to
  // on_push, while requests (PING) still get ordinary replies. The connection opens on start() or
  // its first request like any other; a NOPERM for the channel fails the connect with
  // error::permission_denied.
  std::string subscribe_channel;
  // A subscriber whose subscriptions come and go (SSUBSCRIBE requests with
  // request_options::reply_is_push): the handshake switches to RESP3 and subscribes to nothing.
  // Every reconnect starts without subscriptions; on_link(true) says when to make them again.
  bool resp3 = false;
  // Every handshake checks with ROLE that the server is a master (a sentinel node's master: a
  // stale sentinel or a demoted master is not one). A replica fails the connect with
  // error::server_error, which retrying may cure (the connection reconnects as usual).
  bool require_master = false;
  // The kind of server every handshake must find (handshake_settings::expect): another kind fails
  // the connect with error::wrong_node_kind, a failure that lasts (permanent_failure).
  server_kind expect = server_kind::any;
  // A node given as redis://: a MOVED or ASK reply (only a cluster node sends them) answers its
  // request with error::wrong_node_kind and a text naming redis+cluster:// instead of the reply.
  bool refuse_cluster_redirects = false;
  // Every push the server sends (the subscribe confirmation is read by the handshake), on the
  // connection's executor, inside its read loop: it must not throw, and must not close() it.
  std::function<void(const resp::value& push)> on_push;
  // Told `true` after every successful handshake (for a subscriber: the subscription is in place)
  // and `false`, with why, when a connect attempt fails or an established link breaks
  // (connection_lost); not on close(). On the connection's executor, inside its run loop, with
  // the same rules as on_push.
  std::function<void(bool up, boost::system::error_code why)> on_link;
  // Shared by connections on one executor: their writers take one posted turn together instead of
  // one each (writer_turns). None: the connection posts its own turns.
  std::shared_ptr<writer_turns> shared_turns;

  static connection_options from(const client_options& options);
  // Only what from() sets, taken from `settings`: those of a subscriber to the servers that
  // `settings` reach, with nothing of their handshake (preloads, probes, checks) or reports.
  static connection_options for_subscriber(const connection_options& settings);
};

// The parser's limits that enforce a client's reply_limits.
resp::parser_limits limits_for(const reply_limits& replies);

}  // namespace redlock::detail

#endif
