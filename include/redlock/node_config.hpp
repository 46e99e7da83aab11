#ifndef REDLOCK_NODE_CONFIG_HPP
#define REDLOCK_NODE_CONFIG_HPP

#include "redlock/config.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlock {

// How to speak TLS to a node (a "rediss://" URL). A fresh TLS session is made for every connect,
// including reconnects; nothing of an earlier session is reused.
struct tls_options {
  bool enabled = false;

  // Trusted certificate authorities, PEM: a file and/or an OpenSSL hashed directory (c_rehash).
  // Both empty: the system's default CA paths.
  std::string ca_file{};
  std::string ca_dir{};

  // The client's certificate chain and private key, PEM, for servers that require one
  // (tls-auth-clients). Both or neither.
  std::string cert_file{};
  std::string key_file{};

  // The name the server's certificate must match, and the SNI sent. Empty: the node's host. SNI is
  // not sent for an IP literal (RFC 6066); the certificate is then checked against the address.
  std::string server_name{};

  // Peer verification (chain and name). Turning it off accepts any server, including an attacker
  // in the middle; the client then logs a warning on every connect.
  bool verify_peer = true;

  friend bool operator==(const tls_options&, const tls_options&) = default;
};

// Where one Redis master lives and how to log in to it.
struct REDLOCK_API node_config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string username{};  // ACL user; empty means the default user
  std::string password{};  // empty means no AUTH is sent
  int database = 0;        // SELECTed after AUTH when not 0

  using tls_options = redlock::tls_options;
  tls_options tls{};  // TLS over TCP when tls.enabled; not with unix_path

  // When not empty, the node is reached through this Unix-domain socket and host/port are unused.
  std::string unix_path{};

  // Parses one of
  //   redis://[[user]:password@]host[:port][/db]
  //   rediss://[[user]:password@]host[:port][/db][?ca=FILE&ca_dir=DIR&cert=FILE&key=FILE&sni=NAME
  //            &verify=no]
  //   unix://[[user]:password@]/path/to/redis.sock[?db=N]
  // Percent-escapes (%XX) are decoded in user, password and query values; an IPv6 host is written
  // in brackets ("redis://[::1]:6380"). Throws std::invalid_argument whose message names the bad
  // part (scheme, host, port, database, escape, query parameter) and never shows the password.
  // Whitespace followed by another URL ("redis://a:1 redis://b:2", a list written without commas)
  // is refused with a message that gives its position and does not quote the URL.
  static node_config from_url(std::string_view url);

  // As above, for a C string such as the result of std::getenv. A null pointer (an environment
  // variable that is not set) throws std::invalid_argument saying so, instead of being read.
  // String literals resolve to this overload; std::string and std::string_view to the one above.
  static node_config from_url(const char* url);

  // Parses a comma-separated list of such URLs, the form a setting such as REDLOCK_NODES takes:
  // "redis://10.0.0.1,redis://10.0.0.2:6380,redis://10.0.0.3". Blanks around a URL are ignored.
  // Throws std::invalid_argument naming the problem: an empty list, an empty entry (by its
  // position), an entry holding two URLs separated by whitespace instead of a comma (by its
  // position), a bad URL (as from_url), or a node whose address() is listed twice. Messages never
  // contain a password.
  static std::vector<node_config> from_url_list(std::string_view urls);

  // As above, for a C string such as the result of std::getenv("REDLOCK_NODES"). A null pointer
  // (the variable is not set) throws std::invalid_argument saying so, instead of being read.
  // String literals resolve to this overload; std::string and std::string_view to the one above.
  static std::vector<node_config> from_url_list(const char* urls);

  // "host:port" (IPv6 in brackets), or "unix:PATH" for a Unix socket; names the node in messages.
  // Never contains credentials.
  std::string address() const;

  friend bool operator==(const node_config&, const node_config&) = default;
};

}  // namespace redlock

#endif
