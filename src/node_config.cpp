#include "redlock/node_config.hpp"

#include "options_check.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redlock {
namespace {

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

bool all_digits(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_digit(c)) return false;
  }
  return true;
}

// RFC 3986 reg-name characters that make sense in a host name; anything else (spaces, '%', ',',
// a stray ']') is almost certainly a typo and would only fail later in the resolver.
bool is_host_char(char c) noexcept {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '.' ||
         c == '_';
}

int hex_value(char c) noexcept {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
bool is_scheme(std::string_view s) noexcept {
  if (s.empty() || is_digit(s.front())) return false;
  for (char c : s) {
    if (c == '_' || (!is_host_char(c) && c != '+')) return false;
  }
  return true;
}

constexpr std::string_view whitespace = " \t\r\n\v\f";

// Where whitespace inside `text` is followed by something of the form "scheme://": the sign of a
// list written with blanks instead of commas ("redis://a:1 redis://b:2"), which the parser would
// otherwise misread (a port "1 redis:" with a ':', or the first URL swallowed as user info when
// the second has a password). The offset of that whitespace, or npos. Leading whitespace does not
// count: it is followed by the one URL itself.
std::size_t second_url_at(std::string_view text) noexcept {
  auto blank = text.find_first_of(whitespace, text.find_first_not_of(whitespace));
  while (blank != std::string_view::npos) {
    const auto next = text.find_first_not_of(whitespace, blank);
    if (next == std::string_view::npos) return std::string_view::npos;
    const auto separator = text.find("://", next);
    if (separator != std::string_view::npos && is_scheme(text.substr(next, separator - next))) {
      return blank;
    }
    blank = text.find_first_of(whitespace, next);
  }
  return std::string_view::npos;
}

constexpr std::string_view use_commas = "separate node URLs with commas, not whitespace";

class url_parser {
 public:
  explicit url_parser(std::string_view url) : url_(url) {
    // Everything before the last '@' is user info: host, port and database never contain '@', so
    // this holds even when a password has an unescaped '@', '/' or '?'. Splitting here, before
    // anything is validated, is what lets every message hide the password.
    const auto scheme_end = url_.find("://");
    if (scheme_end != std::string_view::npos && is_scheme(url_.substr(0, scheme_end))) {
      scheme_ = url_.substr(0, scheme_end);
      prefix_ = url_.substr(0, scheme_end + 3);
    }
    std::string_view rest = url_.substr(prefix_.size());
    if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
      userinfo_ = rest.substr(0, at);
      rest = rest.substr(at + 1);
    }
    rest_ = rest;
  }

  node_config parse() const {
    node_config result;

    if (!scheme_) fail("missing scheme, expected \"redis://\", \"rediss://\" or \"unix://\"");
    if (iequals(*scheme_, "rediss+unix") || iequals(*scheme_, "unixs") ||
        iequals(*scheme_, "unix+tls")) {
      fail(tls_over_unix);
    }
    const bool tls = iequals(*scheme_, "rediss");
    const bool local = iequals(*scheme_, "unix");
    if (!tls && !local && !iequals(*scheme_, "redis")) {
      fail(fmt::format(
          "scheme \"{}\" is not supported, expected \"redis://\", \"rediss://\" or \"unix://\"",
          prefix_));
    }

    if (userinfo_) parse_userinfo(*userinfo_, result);

    if (rest_.find('#') != std::string_view::npos) fail("a fragment is not supported");
    const auto question = rest_.find('?');
    const std::string_view location = rest_.substr(0, question);
    const std::string_view query =
        question == std::string_view::npos ? std::string_view{} : rest_.substr(question + 1);

    if (local) {
      parse_unix_path(location, result);
      parse_unix_query(query, result);
      return result;
    }
    if (question != std::string_view::npos && !tls) {
      fail("query parameters are only accepted in \"rediss://\" and \"unix://\" URLs");
    }
    const auto slash = location.find('/');
    parse_host_port(location.substr(0, slash), result);
    if (slash != std::string_view::npos) parse_database(location.substr(slash + 1), result);
    if (tls) {
      result.tls.enabled = true;
      parse_tls_query(query, result.tls);
    }
    return result;
  }

 private:
  [[noreturn]] void fail(std::string_view reason) const {
    throw std::invalid_argument(fmt::format("redlock: bad node URL \"{}\": {}", masked(), reason));
  }

  // The URL as it may appear in a message: everything but the password. When the user info has
  // no ':' it is not clear whether the writer meant a user or a password, so all of it is hidden.
  std::string masked() const {
    if (!userinfo_) return std::string(url_);
    const auto colon = userinfo_->find(':');
    if (colon == std::string_view::npos) return fmt::format("{}***@{}", prefix_, rest_);
    return fmt::format("{}{}:***@{}", prefix_, userinfo_->substr(0, colon), rest_);
  }

  // Decodes %XX escapes. `what` names the part; for the password the escape itself is not quoted.
  std::string decode(std::string_view in, std::string_view what, bool secret) const {
    std::string out;
    out.reserve(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (in[i] != '%') {
        out.push_back(in[i]);
        continue;
      }
      const int hi = i + 1 < in.size() ? hex_value(in[i + 1]) : -1;
      const int lo = i + 2 < in.size() ? hex_value(in[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        if (secret) fail(fmt::format("bad percent-escape in the {}", what));
        fail(fmt::format("bad percent-escape \"{}\" in the {}", in.substr(i, 3), what));
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    }
    return out;
  }

  void parse_userinfo(std::string_view info, node_config& result) const {
    const auto colon = info.find(':');
    if (colon == std::string_view::npos) {
      // "redis://x@host": Redis has no way to log in as a user without a password, and reading x
      // as a password would silently differ from other clients, so neither guess is made.
      fail(
          "user info without ':' is ambiguous; write \"redis://:password@host\" for a password or "
          "\"redis://user:password@host\" for an ACL user");
    }
    result.username = decode(info.substr(0, colon), "user name", false);
    result.password = decode(info.substr(colon + 1), "password", true);
    if (!result.username.empty() && result.password.empty()) {
      fail(fmt::format("user \"{}\" is given without a password", info.substr(0, colon)));
    }
  }

  void parse_host_port(std::string_view authority, node_config& result) const {
    std::string_view host;
    std::optional<std::string_view> port;

    if (!authority.empty() && authority.front() == '[') {
      const auto close = authority.find(']');
      if (close == std::string_view::npos) fail("IPv6 host is missing its closing ']'");
      host = authority.substr(1, close - 1);
      const std::string_view after = authority.substr(close + 1);
      if (!after.empty()) {
        if (after.front() != ':') {
          fail(fmt::format("unexpected \"{}\" after the IPv6 host", after));
        }
        port = after.substr(1);
      }
      if (host.empty()) fail("host is empty");
      const std::string text(host);
      in6_addr addr{};
      if (::inet_pton(AF_INET6, text.c_str(), &addr) != 1) {
        fail(fmt::format("host \"[{}]\" is not an IPv6 address", host));
      }
    } else {
      const auto colon = authority.find(':');
      host = authority.substr(0, colon);
      if (colon != std::string_view::npos) {
        port = authority.substr(colon + 1);
        // With whitespace in it, the second ':' more likely comes from another "host:port".
        if (port->find(':') != std::string_view::npos &&
            authority.find_first_of(whitespace) == std::string_view::npos) {
          fail("host looks like an IPv6 address; write it in brackets: \"redis://[::1]:6379\"");
        }
      }
      if (host.empty()) fail("host is empty");
      for (char c : host) {
        if (!is_host_char(c)) fail(fmt::format("host \"{}\" has an invalid character", host));
      }
    }
    result.host = std::string(host);

    if (port) {
      if (port->empty()) fail("port is empty");
      if (!all_digits(*port)) {
        if (port->find_first_of(whitespace) != std::string_view::npos) {
          fail(fmt::format("port \"{}\" is not a decimal number; {}", *port, use_commas));
        }
        fail(fmt::format("port \"{}\" is not a decimal number", *port));
      }
      // More than 5 significant digits cannot be in range; checking that first also keeps
      // from_chars away from values that overflow.
      const auto first = port->find_first_not_of('0');
      const std::string_view digits =
          first == std::string_view::npos ? std::string_view("0") : port->substr(first);
      unsigned value = 0;
      if (digits.size() <= 5) std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (digits.size() > 5 || value < 1 || value > 65535) {
        fail(fmt::format("port {} is out of range 1-65535", *port));
      }
      result.port = static_cast<std::uint16_t>(value);
    }
  }

  void parse_database(std::string_view path, node_config& result) const {
    if (path.empty()) return;  // "redis://host/" means database 0
    if (!all_digits(path)) {
      fail(fmt::format("database \"{}\" is not a non-negative decimal number", path));
    }
    int value = 0;
    const auto [end, ec] = std::from_chars(path.data(), path.data() + path.size(), value);
    if (ec != std::errc{} || end != path.data() + path.size()) {
      fail(fmt::format("database {} is out of range 0-{}", path, std::numeric_limits<int>::max()));
    }
    result.database = value;
  }

  static constexpr std::string_view tls_over_unix =
      "TLS over a Unix socket is not supported; use \"unix://\" (a local socket needs no TLS) or "
      "\"rediss://host:port\"";

  // Calls `each(name, raw_value)` for every "name=value" of a query; empty parts ("a=1&&b=2", a
  // trailing '&') are skipped. A name may appear once.
  template <class Each>
  void for_each_parameter(std::string_view query, Each each) const {
    std::set<std::string_view> seen;
    while (!query.empty()) {
      const auto amp = query.find('&');
      const std::string_view part = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
      if (part.empty()) continue;
      const auto equals = part.find('=');
      const std::string_view name = part.substr(0, equals);
      if (equals == std::string_view::npos) {
        fail(fmt::format("query parameter \"{}\" has no value (write {}=...)", name, name));
      }
      if (!seen.insert(name).second) fail(fmt::format("query parameter \"{}\" is repeated", name));
      each(name, part.substr(equals + 1));
    }
  }

  void parse_tls_query(std::string_view query, tls_options& tls) const {
    for_each_parameter(query, [&](std::string_view name, std::string_view raw) {
      std::string value = decode(raw, fmt::format("query parameter \"{}\"", name), false);
      if (value.empty()) fail(fmt::format("query parameter \"{}\" is empty", name));
      if (name == "ca") {
        tls.ca_file = std::move(value);
      } else if (name == "ca_dir") {
        tls.ca_dir = std::move(value);
      } else if (name == "cert") {
        tls.cert_file = std::move(value);
      } else if (name == "key") {
        tls.key_file = std::move(value);
      } else if (name == "sni") {
        tls.server_name = std::move(value);
      } else if (name == "verify") {
        if (value == "yes" || value == "true" || value == "1") {
          tls.verify_peer = true;
        } else if (value == "no" || value == "false" || value == "0") {
          tls.verify_peer = false;
        } else {
          fail(fmt::format("verify=\"{}\" is neither yes nor no", value));
        }
      } else if (name == "db") {
        fail(
            "the database of a \"rediss://\" URL is its path (\"rediss://host:6380/2\"), not ?db=");
      } else {
        fail(fmt::format(
            "unknown query parameter \"{}\"; a \"rediss://\" URL takes ca, ca_dir, cert, key, sni "
            "and verify",
            name));
      }
    });
    if (tls.cert_file.empty() != tls.key_file.empty()) {
      fail("a client certificate needs both cert= and key=");
    }
  }

  void parse_unix_path(std::string_view location, node_config& result) const {
    if (location.empty())
      fail("the Unix socket path is empty (write \"unix:///path/to/redis.sock\")");
    if (location.front() != '/') {
      fail("the Unix socket path must be absolute (write \"unix:///path/to/redis.sock\")");
    }
    std::string path = decode(location, "socket path", false);
    if (path.size() > detail::longest_unix_path) {
      fail(fmt::format("the Unix socket path is {} bytes long; at most {} fit in a socket address",
                       path.size(), detail::longest_unix_path));
    }
    if (path.find('\0') != std::string::npos) fail("the Unix socket path contains a zero byte");
    result.unix_path = std::move(path);
    result.host.clear();
    result.port = 0;
  }

  void parse_unix_query(std::string_view query, node_config& result) const {
    for_each_parameter(query, [&](std::string_view name, std::string_view raw) {
      if (name == "db") {
        if (raw.empty()) fail("query parameter \"db\" is empty");
        parse_database(raw, result);
      } else if (name == "ca" || name == "ca_dir" || name == "cert" || name == "key" ||
                 name == "sni" || name == "verify") {
        fail(tls_over_unix);
      } else {
        fail(fmt::format("unknown query parameter \"{}\"; a \"unix://\" URL takes db", name));
      }
    });
  }

  std::string_view url_;
  std::optional<std::string_view> scheme_;    // without "://"
  std::string_view prefix_;                   // the scheme with "://", or empty
  std::optional<std::string_view> userinfo_;  // between the prefix and the last '@'
  std::string_view rest_;                     // after the user info, or after the prefix
};

}  // namespace

node_config node_config::from_url(std::string_view url) {
  // Not quoted: the first URL's password may have been taken for the second's user info.
  if (const auto at = second_url_at(url); at != std::string_view::npos) {
    throw std::invalid_argument(fmt::format(
        "redlock: bad node URL: whitespace at character {} is followed by another URL; {}", at + 1,
        use_commas));
  }
  return url_parser(url).parse();
}

node_config node_config::from_url(const char* url) {
  if (url == nullptr) {
    throw std::invalid_argument(
        "redlock: no node URL given (a null pointer: is the environment variable set?)");
  }
  return from_url(std::string_view(url));
}

std::vector<node_config> node_config::from_url_list(const char* urls) {
  if (urls == nullptr) {
    throw std::invalid_argument(
        "redlock: no node list given (a null pointer: is the environment variable set?)");
  }
  return from_url_list(std::string_view(urls));
}

std::vector<node_config> node_config::from_url_list(std::string_view urls) {
  auto trimmed = [](std::string_view text) {
    const auto first = text.find_first_not_of(whitespace);
    if (first == std::string_view::npos) return std::string_view{};
    return text.substr(first, text.find_last_not_of(whitespace) - first + 1);
  };
  if (trimmed(urls).empty()) throw std::invalid_argument("redlock: the node list is empty");

  std::vector<node_config> nodes;
  std::set<std::string> addresses;
  std::size_t start = 0;
  while (true) {
    const auto comma = urls.find(',', start);
    const auto end = comma == std::string_view::npos ? urls.size() : comma;
    const auto url = trimmed(urls.substr(start, end - start));
    // The entry is named by its position: quoting the list could show another entry's password.
    if (url.empty()) {
      throw std::invalid_argument(
          fmt::format("redlock: entry {} of the node list is empty", nodes.size() + 1));
    }
    if (const auto at = second_url_at(url); at != std::string_view::npos) {
      throw std::invalid_argument(fmt::format(
          "redlock: entry {} of the node list has whitespace at character {} followed by another "
          "URL; {}",
          nodes.size() + 1, at + 1, use_commas));
    }
    nodes.push_back(from_url(url));
    if (!addresses.insert(nodes.back().address()).second) {
      throw std::invalid_argument(
          fmt::format("redlock: node {} is listed twice in the node list", nodes.back().address()));
    }
    if (comma == std::string_view::npos) return nodes;
    start = comma + 1;
  }
}

std::string node_config::address() const {
  if (!unix_path.empty()) return "unix:" + unix_path;
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace redlock
