#ifndef REDLOCK_NET_HANDSHAKE_HPP
#define REDLOCK_NET_HANDSHAKE_HPP

#include "net/server_kind.hpp"
#include "redlock/error.hpp"
#include "redlock/node_config.hpp"
#include "resp/value.hpp"

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

class script;

// A command sent in every handshake to learn whether the ACL user may run what the lock needs
// (connection_options::permission_probes).
struct handshake_probe {
  std::string command;  // for messages: "EVALSHA"
  std::string encoded;
};

// What the handshake makes of one step. Success: go on. Otherwise the connect fails with `code`,
// and `message` is its cause without the node's name (the connection adds it); an empty message
// leaves the transport's own description of the failure standing.
struct handshake_verdict {
  boost::system::error_code code;
  std::string message;

  bool failed() const noexcept { return static_cast<bool>(code); }
};

// What a handshake is built from, besides the node (connection_options holds the same fields and
// documents them). The handshake copies what it keeps; the preloaded scripts must outlive it.
struct handshake_settings {
  std::string_view client_name;
  std::string_view subscribe_channel;
  bool resp3 = false;
  // The server must be a master: ROLE right after the login, and a replica (or a sentinel) fails
  // the connect with error::server_error naming what it is.
  bool require_master = false;
  // The kind of server the link must reach (server_kind.hpp), judged on HELLO's "mode": a server of
  // another kind fails the connect with error::wrong_node_kind, naming the URL to use. A RESP2 link
  // sends HELLO 2 for it, whose refusal (no HELLO before Redis 6, an ACL user without it) passes.
  server_kind expect = server_kind::any;
  std::span<const script* const> preload;
  std::span<const handshake_probe> probes;
  std::function<std::string(const std::string& peer)> admit_peer;
};

// The setup of a link after its transport is up, without the I/O: the commands to send and the
// verdict on each reply. The connection runs it on every connect: restart(), admit(peer), one
// write of request(), heard() with the bytes of every read, one on_reply() per reply until done()
// or a failed verdict; when the link fails where a reply was due, on_link_error() says what that
// means.
//
// The commands, in this order: AUTH (with a password), SELECT (database other than 0), CLIENT
// SETNAME with the client's name or else PING, HELLO 3 (a subscriber, or `resp3`; else HELLO 2 when
// the server's kind is checked), ROLE (require_master), SUBSCRIBE (a subscriber of one channel),
// SCRIPT LOAD of each preloaded script, then the permission probes. The verdict on HELLO comes
// before any later reply's, so a server of the wrong kind is named as such, not by the first
// command it does not know.
class handshake {
 public:
  handshake(const node_config& node, handshake_settings settings);

  // A warning to log once the transport is up, naming the node; empty when there is none.
  const std::string& caution() const noexcept { return caution_; }

  // Whether the peer (transport::peer()) may be this node: error::invalid_argument with the
  // admit_peer's refusal as the message, or success.
  handshake_verdict admit(const std::string& peer) const;

  // Every command of the handshake, encoded, for one write; their replies come back in order.
  const std::string& request() const noexcept { return request_; }

  // A new connect: the next reply is the first command's, and nothing has been heard.
  void restart() noexcept {
    next_ = 0;
    head_.clear();
  }

  // Bytes the server sent on this link, as they arrive; the first few are kept for the verdict on
  // a link that fails before it answers.
  void heard(std::string_view bytes);

  // Every reply has been judged and none failed the connect.
  bool done() const noexcept { return next_ == steps_.size(); }

  // Judges the reply to the next command, which must not be done().
  handshake_verdict on_reply(const resp::value& reply);

  // The link failed with `ec` where a reply was due; `parser_error` is the parser's description of
  // what it refused. TLS alerts are the transport's business and are not judged here.
  handshake_verdict on_link_error(boost::system::error_code ec,
                                  std::string_view parser_error) const;

 private:
  struct step {
    std::string command;             // for messages: "CLIENT SETNAME"
    error failure;                   // the code of an error reply other than NOAUTH and NOPERM
    const script* loaded = nullptr;  // SCRIPT LOAD: the reply must be this script's SHA-1
    bool probe = false;
    bool role = false;      // ROLE: the reply must say master
    bool mode = false;      // HELLO: the server must be of the kind expected
    bool optional = false;  // an error reply passes (HELLO 2, asked only for its mode)
  };

  void add(std::initializer_list<std::string_view> command, std::string name, error failure);
  handshake_verdict judge(const step& s, const resp::value& reply) const;
  handshake_verdict judge_role(const resp::value& reply) const;
  handshake_verdict judge_mode(const resp::value& reply) const;

  std::string name_;  // node_config::address()
  std::string username_;
  bool has_password_;
  int database_;
  bool tls_;
  server_kind expect_;
  node_config where_;  // the server's address and TLS, for the URL a wrong kind is told to use
  std::function<std::string(const std::string& peer)> admit_peer_;
  std::string caution_;
  std::string request_;
  std::vector<step> steps_;
  std::size_t next_ = 0;
  std::string head_;  // the first bytes heard on this link, for messages
};

// A connect failure that the same attempt would meet again until someone changes a configuration:
// a handshake refused for good, a server that does not speak RESP, a refused peer, or a TLS
// handshake or certificate that failed.
bool is_permanent_connect_failure(boost::system::error_code ec);

}  // namespace redlock::detail

#endif
