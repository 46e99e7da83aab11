#ifndef REDLOCK_NODE_CONFIG_HPP
#define REDLOCK_NODE_CONFIG_HPP

#include "redlock/config.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlock {

// Where one Redis master lives and how to log in to it.
struct REDLOCK_API node_config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string username{};  // ACL user; empty means the default user
  std::string password{};  // empty means no AUTH is sent
  int database = 0;        // SELECTed after AUTH when not 0

  // Parses "redis://[[user]:password@]host[:port][/db]". Percent-escapes (%XX) are decoded in user
  // and password; an IPv6 host is written in brackets ("redis://[::1]:6380"). Throws
  // std::invalid_argument whose message names the bad part (scheme, host, port, database, escape).
  static node_config from_url(std::string_view url);

  // Parses a comma-separated list of such URLs, the form a setting such as REDLOCK_NODES takes:
  // "redis://10.0.0.1,redis://10.0.0.2:6380,redis://10.0.0.3". Blanks around a URL are ignored.
  // Throws std::invalid_argument naming the problem: an empty list, an empty entry (by its
  // position), a bad URL (as from_url), or a node whose host:port is listed twice. Messages never
  // contain a password.
  static std::vector<node_config> from_url_list(std::string_view urls);

  // "host:port" (IPv6 in brackets), used to name the node in messages. Never contains credentials.
  std::string address() const;

  friend bool operator==(const node_config&, const node_config&) = default;
};

}  // namespace redlock

#endif
