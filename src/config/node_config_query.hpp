#ifndef REDLOCK_CONFIG_NODE_CONFIG_QUERY_HPP
#define REDLOCK_CONFIG_NODE_CONFIG_QUERY_HPP

#include "config/characters.hpp"
#include "redlock/node_config.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace redlock::detail {

// What node_config.cpp (a node URL taken apart) and node_config_query.cpp (its query parameters)
// share: the URL parser and the few character helpers both use.

inline int hex_value(char c) noexcept {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "host:port", an IPv6 host in brackets.
inline std::string join_host_port(std::string_view host, std::uint16_t port) {
  if (host.find(':') != std::string_view::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

// One scheme: what it makes of the node.
struct url_form {
  std::string_view scheme;  // lower case, without "://"
  node_kind kind;
  bool tls;
  bool local;  // a Unix socket path instead of host:port
  std::uint16_t default_port;
};

// A parameter whose value a message must not show: sentinel_password, and anything else whose
// name, escapes decoded, says "pass" in any case (a misspelt or unknown password parameter).
bool is_secret_parameter(std::string_view name);

// Where the value of a secret parameter, starting at `from` in `text`, ends: at the first '&'
// that starts a parameter, else at the end. A password with an unescaped '&' thus stays whole,
// and no piece of it is taken for a parameter whose name a message would quote.
std::size_t secret_value_end(std::string_view text, std::size_t from);

// Where the query of `text` (the URL after its scheme) begins, when a '?' is directly followed by
// a parameter this parser knows ("?master=", "?&ca="); else npos. Such a query may hold an '@' (an
// RFC 3986 query may, and a sentinel password often does), so the user info ends at the last '@'
// before it, not at the last '@' of the URL. A password holding "?master=" or the like must then
// be escaped; one with a plain '?' still works unescaped.
std::size_t known_query_start(std::string_view text);

class url_parser {
 public:
  explicit url_parser(std::string_view url);

  node_config parse() const;

 private:
  [[noreturn]] void fail(std::string_view reason) const;

  // The URL as it may appear in a message: every password replaced by "***". When user info has
  // no ':' it is not clear whether the writer meant a user or a password, so all of it is hidden.
  // The user info is hidden both where the parser took it to end and at the last '@' (in case a
  // '?' in the password was taken for the query's); the value of every secret parameter is
  // hidden wherever "?name=" or "&name=" occurs.
  std::string masked() const;

  // Decodes %XX escapes. `what` names the part; for a secret the escape itself is not quoted.
  std::string decode(std::string_view in, std::string_view what, bool secret) const;

  void parse_userinfo(std::string_view info, node_config& result) const;
  void parse_host_port(std::string_view authority, const url_form& form, node_config& result) const;
  void parse_database(std::string_view path, node_config& result) const;

  static constexpr std::string_view tls_over_unix =
      "TLS over a Unix socket is not supported; use \"unix://\" (a local socket needs no TLS) or "
      "\"rediss://host:port\"";

  // Calls `each(name, raw_value)` for every "name=value" of a query; empty parts ("a=1&&b=2", a
  // trailing '&') are skipped. A name may appear once, but for seed.
  template <class Each>
  void for_each_parameter(std::string_view query, Each each) const;

  // The parameters `form` takes, for a message: "ca, ca_dir, ... and wait_replicas".
  static std::string parameters_of(const url_form& form);

  // Fails unless a URL of `form` takes the parameter `name`.
  void check_parameter_belongs(std::string_view name, const url_form& form) const;

  void parse_query(std::string_view query, const url_form& form, node_config& result) const;
  void set_tls_parameter(std::string_view name, std::string value, tls_options& tls) const;

  // "host:port" as node_config::seeds holds it, the form's port filled in when none is given.
  std::string parse_seed(std::string_view raw, std::string_view value, const url_form& form) const;

  unsigned parse_wait_replicas(std::string_view value) const;
  void parse_unix_path(std::string_view location, node_config& result) const;

  std::string_view url_;
  std::optional<std::string_view> scheme_;    // without "://"
  std::string_view prefix_;                   // the scheme with "://", or empty
  std::optional<std::string_view> userinfo_;  // between the prefix and the '@' that ends it
  std::string_view rest_;                     // after the user info, or after the prefix
};

}  // namespace redlock::detail

#endif
