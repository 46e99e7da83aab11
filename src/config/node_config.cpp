#include "redlock/node_config.hpp"

#include "config/node_config_query.hpp"
#include "config/options_check.hpp"

#include <fmt/format.h>

#include <algorithm>
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

namespace redlock::detail {
namespace {

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
bool is_scheme(std::string_view s) noexcept {
  if (s.empty() || is_digit(s.front())) return false;
  for (char c : s) {
    if (c == '_' || (!is_host_char(c) && c != '+')) return false;
  }
  return true;
}

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

constexpr url_form url_forms[] = {
    {"redis", node_kind::standalone, false, false, 6379},
    {"rediss", node_kind::standalone, true, false, 6379},
    {"unix", node_kind::standalone, false, true, 0},
    {"redis+cluster", node_kind::cluster, false, false, 6379},
    {"rediss+cluster", node_kind::cluster, true, false, 6379},
    {"redis+sentinel", node_kind::sentinel, false, false, 26379},
    {"rediss+sentinel", node_kind::sentinel, true, false, 26379},
};

constexpr std::string_view expected_schemes =
    "expected \"redis://\", \"rediss://\", \"unix://\", \"redis+cluster://\", "
    "\"rediss+cluster://\", \"redis+sentinel://\" or \"rediss+sentinel://\"";

}  // namespace

url_parser::url_parser(std::string_view url) : url_(url) {
  // Everything before the last '@' is user info: host, port and database never contain '@', so
  // this holds even when a password has an unescaped '@', '/' or '?'; only a query may hold one
  // too (known_query_start). Splitting here, before anything is validated, is what lets every
  // message hide the password.
  const auto scheme_end = url_.find("://");
  if (scheme_end != std::string_view::npos && is_scheme(url_.substr(0, scheme_end))) {
    scheme_ = url_.substr(0, scheme_end);
    prefix_ = url_.substr(0, scheme_end + 3);
  }
  std::string_view rest = url_.substr(prefix_.size());
  const auto query = known_query_start(rest);
  const auto at = query == std::string_view::npos ? rest.rfind('@') : rest.rfind('@', query);
  if (at != std::string_view::npos) {
    userinfo_ = rest.substr(0, at);
    rest = rest.substr(at + 1);
  }
  rest_ = rest;
}

node_config url_parser::parse() const {
  if (!scheme_) fail(fmt::format("missing scheme, {}", expected_schemes));
  if (iequals(*scheme_, "rediss+unix") || iequals(*scheme_, "unixs") ||
      iequals(*scheme_, "unix+tls")) {
    fail(tls_over_unix);
  }
  const url_form* form = nullptr;
  for (const auto& candidate : url_forms) {
    if (iequals(*scheme_, candidate.scheme)) form = &candidate;
  }
  if (form == nullptr) {
    fail(fmt::format("scheme \"{}\" is not supported, {}", prefix_, expected_schemes));
  }

  node_config result;
  result.kind = form->kind;
  result.port = form->default_port;
  if (userinfo_) parse_userinfo(*userinfo_, result);

  if (rest_.find('#') != std::string_view::npos) fail("a fragment is not supported");
  const auto question = rest_.find('?');
  const std::string_view location = rest_.substr(0, question);
  const std::string_view query =
      question == std::string_view::npos ? std::string_view{} : rest_.substr(question + 1);

  if (form->local) {
    parse_unix_path(location, result);
  } else {
    const auto slash = location.find('/');
    parse_host_port(location.substr(0, slash), *form, result);
    if (slash != std::string_view::npos) parse_database(location.substr(slash + 1), result);
    if (form->kind == node_kind::cluster && result.database != 0) {
      fail(fmt::format("a cluster has only database 0, not {}", result.database));
    }
  }
  result.tls.enabled = form->tls;
  parse_query(query, *form, result);

  if (result.tls.cert_file.empty() != result.tls.key_file.empty()) {
    fail("a client certificate needs both cert= and key=");
  }
  if (form->kind == node_kind::sentinel) {
    if (result.sentinel_master.empty()) {
      fail(fmt::format(
          "a \"{}://\" URL needs master=NAME, the name the sentinels know the master by",
          form->scheme));
    }
    if (!result.sentinel_username.empty() && result.sentinel_password.empty()) {
      fail(fmt::format("sentinel_user \"{}\" is given without sentinel_password",
                       result.sentinel_username));
    }
  }
  return result;
}

void url_parser::fail(std::string_view reason) const {
  throw std::invalid_argument(fmt::format("redlock: bad node URL \"{}\": {}", masked(), reason));
}

std::string url_parser::masked() const {
  std::vector<std::pair<std::size_t, std::size_t>> hidden;  // [begin, end) in url_
  auto hide_userinfo = [&](std::string_view info) {
    const auto begin = static_cast<std::size_t>(info.data() - url_.data());
    const auto colon = info.find(':');
    hidden.emplace_back(colon == std::string_view::npos ? begin : begin + colon + 1,
                        begin + info.size());
  };
  if (userinfo_) hide_userinfo(*userinfo_);
  const std::string_view after_prefix = url_.substr(prefix_.size());
  if (const auto at = after_prefix.rfind('@'); at != std::string_view::npos) {
    hide_userinfo(after_prefix.substr(0, at));
  }
  for (auto mark = url_.find_first_of("?&"); mark != std::string_view::npos;
       mark = url_.find_first_of("?&", mark + 1)) {
    const auto stop = url_.find_first_of("=&", mark + 1);
    if (stop == std::string_view::npos || url_[stop] != '=') continue;
    if (!is_secret_parameter(url_.substr(mark + 1, stop - mark - 1))) continue;
    hidden.emplace_back(stop + 1, secret_value_end(url_, stop + 1));
  }
  std::sort(hidden.begin(), hidden.end());

  std::string out;
  std::size_t shown = 0;  // url_ up to here is in `out`, or hidden
  for (std::size_t i = 0; i < hidden.size();) {
    auto [begin, end] = hidden[i];
    for (++i; i < hidden.size() && hidden[i].first <= end; ++i) {
      end = std::max(end, hidden[i].second);
    }
    if (begin < shown) begin = shown;
    out.append(url_.substr(shown, begin - shown));
    out.append("***");
    shown = std::max(shown, end);
  }
  out.append(url_.substr(shown));
  return out;
}

std::string url_parser::decode(std::string_view in, std::string_view what, bool secret) const {
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

void url_parser::parse_userinfo(std::string_view info, node_config& result) const {
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

void url_parser::parse_host_port(std::string_view authority, const url_form& form,
                                 node_config& result) const {
  auto parsed = detail::parse_endpoint(
      authority, fmt::format("{}://[::1]:{}", form.scheme, form.default_port));
  if (!parsed.problem.empty()) {
    if (parsed.blank_in_port) fail(fmt::format("{}; {}", parsed.problem, use_commas));
    fail(parsed.problem);
  }
  result.host = std::move(parsed.host);
  if (parsed.port) result.port = *parsed.port;
}

void url_parser::parse_database(std::string_view path, node_config& result) const {
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

void url_parser::parse_unix_path(std::string_view location, node_config& result) const {
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

}  // namespace redlock::detail

namespace redlock {

using detail::join_host_port;
using detail::second_url_at;
using detail::url_parser;
using detail::use_commas;
using detail::whitespace;

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
  return join_host_port(host, port);
}

}  // namespace redlock
