#include "net/handshake.hpp"

#include "resp/encoder.hpp"
#include "resp/script.hpp"
#include "text.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>

#include <utility>

namespace redlock::detail {

using boost::system::error_code;

namespace {

constexpr std::size_t head_size = 24;

// Redis 7 words NOPERM for a key "... no permissions to access one of the keys used as
// arguments" (or "... access a key"); for a command it names the command ("... no permissions to
// run the 'evalsha' command").
bool is_key_permission_error(std::string_view text) {
  return text.find("permissions to access") != std::string_view::npos &&
         text.find("key") != std::string_view::npos;
}

// What to tell a user whose "Redis" answered bytes that are not RESP.
std::string not_resp_hint(std::string_view first_bytes) {
  if (first_bytes.starts_with("H")) {  // "HTTP/1.1 400 Bad Request"
    return " (an HTTP server?)";
  }
  if (first_bytes.starts_with("\x15") || first_bytes.starts_with("\x16")) {
    return " (a TLS port? use rediss://)";
  }
  if (first_bytes.starts_with("SSH-")) return " (an SSH server?)";
  return "";
}

}  // namespace

handshake::handshake(const node_config& node, handshake_settings settings)
    : name_(node.address()),
      username_(node.username),
      has_password_(!node.password.empty()),
      database_(node.database),
      tls_(node.tls.enabled),
      expect_(settings.expect),
      admit_peer_(std::move(settings.admit_peer)) {
  where_.host = node.host;
  where_.port = node.port;
  where_.unix_path = node.unix_path;
  where_.tls.enabled = node.tls.enabled;
  if (node.tls.enabled && !node.tls.verify_peer) {
    caution_ = fmt::format(
        "{}: TLS peer verification is off (verify=no): the server is not authenticated, and "
        "anyone in the path can read and change the traffic",
        name_);
  }
  if (has_password_) {
    if (node.username.empty()) {
      add({"AUTH", node.password}, "AUTH", error::auth_failed);
    } else {
      add({"AUTH", node.username, node.password}, "AUTH", error::auth_failed);
    }
  }
  if (database_ != 0) add({"SELECT", std::to_string(database_)}, "SELECT", error::select_failed);
  // Always one command that needs authentication, so a server that requires a password we do not
  // have is detected now (NOAUTH) rather than on the first lock request.
  if (!settings.client_name.empty()) {
    add({"CLIENT", "SETNAME", settings.client_name}, "CLIENT SETNAME", error::server_error);
  } else {
    add({"PING"}, "PING", error::server_error);
  }
  // RESP3, so that messages (pushes) cannot be mistaken for replies to requests.
  if (settings.resp3 || !settings.subscribe_channel.empty()) {
    add({"HELLO", "3"}, "HELLO 3", error::server_error);
    steps_.back().mode = expect_ != server_kind::any;
  } else if (expect_ != server_kind::any) {
    add({"HELLO", "2"}, "HELLO 2", error::server_error);
    steps_.back().mode = true;
    steps_.back().optional = true;
  }
  if (settings.require_master) {
    add({"ROLE"}, "ROLE", error::server_error);
    steps_.back().role = true;
  }
  if (!settings.subscribe_channel.empty())
    add({"SUBSCRIBE", settings.subscribe_channel}, "SUBSCRIBE", error::server_error);
  for (const script* lua : settings.preload) {
    add({"SCRIPT", "LOAD", lua->source()}, "SCRIPT LOAD", error::server_error);
    steps_.back().loaded = lua;
  }
  for (const auto& probe : settings.probes) {
    request_ += probe.encoded;
    steps_.push_back({probe.command, error::server_error, nullptr, true});
  }
}

void handshake::add(std::initializer_list<std::string_view> command, std::string name,
                    error failure) {
  resp::encode_command(request_, command);
  steps_.push_back({std::move(name), failure});
}

handshake_verdict handshake::admit(const std::string& peer) const {
  if (!admit_peer_) return {};
  auto refusal = admit_peer_(peer);
  if (refusal.empty()) return {};
  return {error::invalid_argument, std::move(refusal)};
}

handshake_verdict handshake::on_reply(const resp::value& reply) {
  return judge(steps_[next_++], reply);
}

handshake_verdict handshake::judge(const step& s, const resp::value& reply) const {
  if (reply.is_error() && s.optional) return {};
  if (reply.is_error()) {
    const auto word = reply.error_code_word();
    if (word == "NOAUTH") {
      return {error::auth_failed,
              fmt::format("cannot log in: the server requires a password and {} ({})",
                          has_password_ ? "refused the one configured" : "none is configured",
                          reply.text)};
    }
    if (word == "NOPERM") {
      // Naming the connection is a courtesy, and a key pattern is the resource's business.
      if (s.command == "CLIENT SETNAME" || (s.probe && is_key_permission_error(reply.text))) {
        return {};
      }
      return {error::permission_denied,
              fmt::format("ACL user \"{}\" may not run {}, which the lock needs ({})",
                          username_.empty() ? "default" : username_, s.command, reply.text)};
    }
    // A probe asks only about permissions. Any other refusal (OOM at maxmemory, READONLY on a
    // replica) is the state of the node now, which the lock's own requests meet and report; a
    // failed connect would also stop the releases that could free it.
    if (s.probe) return {};
    switch (s.failure) {
      case error::auth_failed:
        return {s.failure, fmt::format("cannot log in: AUTH refused ({})", reply.text)};
      case error::select_failed:
        return {s.failure, fmt::format("cannot select database {}: SELECT refused ({})", database_,
                                       reply.text)};
      default:
        return {s.failure, fmt::format("{} failed: {}", s.command, reply.text)};
    }
  }
  if (s.role) return judge_role(reply);
  if (s.mode) return judge_mode(reply);
  if (s.loaded != nullptr && !(reply.is_string() && reply.text == s.loaded->sha1())) {
    return {error::server_error, fmt::format("SCRIPT LOAD answered {}, not the script's SHA-1 {}",
                                             resp::to_debug_string(reply), s.loaded->sha1())};
  }
  return {};
}

handshake_verdict handshake::judge_role(const resp::value& reply) const {
  // ["master", offset, replicas], ["slave", host, port, state, offset], ["sentinel", masters].
  const auto& items = reply.elements;
  if (reply.kind == resp::type::array && !items.empty() && items[0].text == "master") return {};
  if (reply.kind == resp::type::array && items.size() >= 3 && items[0].text == "slave") {
    return {error::server_error,
            fmt::format("ROLE says this server is a replica of {}:{}, not a master (a failover "
                        "moved the master elsewhere, or a sentinel named a stale address)",
                        items[1].text,
                        items[2].is_string() ? items[2].text : std::to_string(items[2].integer))};
  }
  return {error::server_error,
          fmt::format("ROLE answered {}, not master", resp::to_debug_string(reply))};
}

handshake_verdict handshake::judge_mode(const resp::value& reply) const {
  // A server that does not say what it is may serve: its requests will tell.
  const auto found = server_mode_of(reply);
  if (!found) return {};
  if (auto refusal = wrong_kind_refusal(expect_, *found, where_)) {
    return {error::wrong_node_kind, std::move(*refusal)};
  }
  return {};
}

void handshake::heard(std::string_view bytes) {
  if (head_.size() < head_size) head_.append(bytes.substr(0, head_size - head_.size()));
}

handshake_verdict handshake::on_link_error(error_code ec, std::string_view parser_error) const {
  namespace asio = boost::asio;
  if (!tls_ && head_.empty() && (ec == asio::error::eof || ec == asio::error::connection_reset)) {
    // What a Redis TLS port does with plain RESP: it drops the connection without a byte. Also
    // what a proxy without a backend may do, so it stays a passing failure.
    return {ec, fmt::format("the server closed the connection without answering the handshake "
                            "({}; a TLS port? use rediss://)",
                            ec.message())};
  }
  if (ec == error::protocol_error) {
    // Not a reply that went wrong: the first bytes were not RESP at all.
    return {ec, fmt::format("the server at {} does not speak RESP{}; it sent \"{}\" ({})", name_,
                            not_resp_hint(head_), printable(head_), parser_error)};
  }
  return {ec, {}};
}

bool is_permanent_connect_failure(error_code ec) {
  return ec == error::auth_failed || ec == error::select_failed || ec == error::permission_denied ||
         ec == error::protocol_error || ec == error::invalid_argument ||
         ec == error::tls_handshake_failed || ec == error::certificate_rejected ||
         ec == error::wrong_node_kind;
}

}  // namespace redlock::detail
