#include "redlock/node_config.hpp"

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

    if (!scheme_) fail("missing scheme, expected \"redis://\"");
    if (iequals(*scheme_, "rediss")) fail("scheme \"rediss://\" (TLS) is not supported yet");
    if (iequals(*scheme_, "unix")) fail("scheme \"unix://\" (Unix sockets) is not supported yet");
    if (!iequals(*scheme_, "redis")) {
      fail(fmt::format("scheme \"{}\" is not supported, expected \"redis://\"", prefix_));
    }

    if (userinfo_) parse_userinfo(*userinfo_, result);

    if (const auto q = rest_.find_first_of("?#"); q != std::string_view::npos) {
      fail(rest_[q] == '?' ? "query parameters are not supported" : "a fragment is not supported");
    }

    const auto slash = rest_.find('/');
    parse_host_port(rest_.substr(0, slash), result);
    if (slash != std::string_view::npos) parse_database(rest_.substr(slash + 1), result);
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
        if (port->find(':') != std::string_view::npos) {
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
      if (!all_digits(*port)) fail(fmt::format("port \"{}\" is not a decimal number", *port));
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

  std::string_view url_;
  std::optional<std::string_view> scheme_;    // without "://"
  std::string_view prefix_;                   // the scheme with "://", or empty
  std::optional<std::string_view> userinfo_;  // between the prefix and the last '@'
  std::string_view rest_;                     // after the user info, or after the prefix
};

}  // namespace

node_config node_config::from_url(std::string_view url) {
  return url_parser(url).parse();
}

std::vector<node_config> node_config::from_url_list(std::string_view urls) {
  auto trimmed = [](std::string_view text) {
    constexpr std::string_view blanks = " \t\r\n";
    const auto first = text.find_first_not_of(blanks);
    if (first == std::string_view::npos) return std::string_view{};
    return text.substr(first, text.find_last_not_of(blanks) - first + 1);
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
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace redlock
