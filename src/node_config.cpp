#include "redlock/node_config.hpp"

#include "options_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <iterator>
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

// "host:port", an IPv6 host in brackets.
std::string join_host_port(std::string_view host, std::uint16_t port) {
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

constexpr std::string_view tls_parameters[] = {"ca", "ca_dir", "cert", "key", "sni", "verify"};
constexpr std::string_view sentinel_parameters[] = {"master", "sentinel_user", "sentinel_password"};

bool is_tls_parameter(std::string_view name) noexcept {
  for (auto known : tls_parameters) {
    if (name == known) return true;
  }
  return false;
}

bool is_sentinel_parameter(std::string_view name) noexcept {
  for (auto known : sentinel_parameters) {
    if (name == known) return true;
  }
  return false;
}

bool is_known_parameter(std::string_view name) noexcept {
  return is_tls_parameter(name) || is_sentinel_parameter(name) || name == "db" || name == "seed" ||
         name == "wait_replicas";
}

// A parameter whose value a message must not show: sentinel_password, and anything else whose
// name, escapes decoded, says "pass" in any case (a misspelt or unknown password parameter).
bool is_secret_parameter(std::string_view name) {
  std::string plain;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '%' && i + 2 < name.size() && hex_value(name[i + 1]) >= 0 &&
        hex_value(name[i + 2]) >= 0) {
      c = static_cast<char>(hex_value(name[i + 1]) * 16 + hex_value(name[i + 2]));
      i += 2;
    }
    plain.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return plain.find("pass") != std::string::npos;
}

// Whether a part of a query (between two '&') starts a new parameter after a secret value: it is
// empty (the '&' only separates), or it is "name=..." for a name that this parser knows.
bool starts_parameter(std::string_view part) {
  if (part.empty()) return true;
  const auto equals = part.find('=');
  if (equals == std::string_view::npos) return false;
  const auto name = part.substr(0, equals);
  return is_known_parameter(name) || is_secret_parameter(name);
}

// Where the value of a secret parameter, starting at `from` in `text`, ends: at the first '&'
// that starts a parameter, else at the end. A password with an unescaped '&' thus stays whole,
// and no piece of it is taken for a parameter whose name a message would quote.
std::size_t secret_value_end(std::string_view text, std::size_t from) {
  auto amp = text.find('&', from);
  while (amp != std::string_view::npos) {
    const auto next = text.find('&', amp + 1);
    const auto end = next == std::string_view::npos ? text.size() : next;
    if (starts_parameter(text.substr(amp + 1, end - amp - 1))) return amp;
    amp = next;
  }
  return text.size();
}

struct query_part {
  std::string_view name;
  std::optional<std::string_view> value;  // raw; empty without a '='
};

// The non-empty "name=value" parts of a query, split at '&' (a secret value as above).
std::vector<query_part> split_query(std::string_view query) {
  std::vector<query_part> parts;
  std::size_t begin = 0;
  while (begin < query.size()) {
    const auto amp = query.find('&', begin);
    auto end = amp == std::string_view::npos ? query.size() : amp;
    std::string_view part = query.substr(begin, end - begin);
    const auto equals = part.find('=');
    if (equals != std::string_view::npos && is_secret_parameter(part.substr(0, equals))) {
      end = secret_value_end(query, begin + equals + 1);
      part = query.substr(begin, end - begin);
    }
    if (!part.empty()) {
      parts.push_back({part.substr(0, equals), equals == std::string_view::npos
                                                   ? std::nullopt
                                                   : std::optional(part.substr(equals + 1))});
    }
    begin = end + 1;
  }
  return parts;
}

// Where the query of `text` (the URL after its scheme) begins, when a '?' is directly followed by
// a parameter this parser knows ("?master=", "?&ca="); else npos. Such a query may hold an '@' (an
// RFC 3986 query may, and a sentinel password often does), so the user info ends at the last '@'
// before it, not at the last '@' of the URL. A password holding "?master=" or the like must then
// be escaped; one with a plain '?' still works unescaped.
std::size_t known_query_start(std::string_view text) {
  for (auto question = text.find('?'); question != std::string_view::npos;
       question = text.find('?', question + 1)) {
    const auto first = text.find_first_not_of('&', question + 1);
    if (first == std::string_view::npos) continue;
    const auto amp = text.find('&', first);
    const auto end = amp == std::string_view::npos ? text.size() : amp;
    const auto part = text.substr(first, end - first);
    if (part.find('=') != std::string_view::npos && starts_parameter(part)) return question;
  }
  return std::string_view::npos;
}

class url_parser {
 public:
  explicit url_parser(std::string_view url) : url_(url) {
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

  node_config parse() const {
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

 private:
  [[noreturn]] void fail(std::string_view reason) const {
    throw std::invalid_argument(fmt::format("redlock: bad node URL \"{}\": {}", masked(), reason));
  }

  // The URL as it may appear in a message: every password replaced by "***". When user info has
  // no ':' it is not clear whether the writer meant a user or a password, so all of it is hidden.
  // The user info is hidden both where the parser took it to end and at the last '@' (in case a
  // '?' in the password was taken for the query's); the value of every secret parameter is
  // hidden wherever "?name=" or "&name=" occurs.
  std::string masked() const {
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

  // Decodes %XX escapes. `what` names the part; for a secret the escape itself is not quoted.
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

  void parse_host_port(std::string_view authority, const url_form& form,
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
  // trailing '&') are skipped. A name may appear once, but for seed.
  template <class Each>
  void for_each_parameter(std::string_view query, Each each) const {
    std::set<std::string_view> seen;
    for (const auto& part : split_query(query)) {
      if (!part.value) {
        fail(fmt::format("query parameter \"{}\" has no value (write {}=...)", part.name,
                         part.name));
      }
      if (part.name != "seed" && !seen.insert(part.name).second) {
        fail(fmt::format("query parameter \"{}\" is repeated", part.name));
      }
      each(part.name, *part.value);
    }
  }

  // The parameters `form` takes, for a message: "ca, ca_dir, ... and wait_replicas".
  static std::string parameters_of(const url_form& form) {
    std::array<std::string_view, 12> names{};
    std::size_t count = 0;
    auto add = [&](std::string_view name) { names.at(count++) = name; };
    if (form.local) add("db");
    if (form.tls) std::for_each(std::begin(tls_parameters), std::end(tls_parameters), add);
    if (form.kind == node_kind::sentinel) {
      std::for_each(std::begin(sentinel_parameters), std::end(sentinel_parameters), add);
    }
    if (form.kind != node_kind::standalone) add("seed");
    add("wait_replicas");
    std::string text;
    for (std::size_t i = 0; i < count; ++i) {
      if (i > 0) text += i + 1 == count ? " and " : ", ";
      text += names[i];
    }
    return text;
  }

  // Fails unless a URL of `form` takes the parameter `name`.
  void check_parameter_belongs(std::string_view name, const url_form& form) const {
    if (is_tls_parameter(name)) {
      if (form.local) fail(tls_over_unix);
      if (!form.tls) {
        fail(fmt::format("query parameter \"{}\" is a TLS setting, for a \"rediss{}://\" URL", name,
                         form.scheme.substr(5)));
      }
    } else if (name == "db") {
      if (form.local) return;
      if (form.kind == node_kind::cluster) fail("a cluster has only database 0; ?db= is not taken");
      fail(fmt::format("the database of a \"{0}://\" URL is its path (\"{0}://host/2\"), not ?db=",
                       form.scheme));
    } else if (name == "seed") {
      if (form.kind == node_kind::standalone) {
        fail(
            "query parameter \"seed\" is for \"redis+cluster://\" and \"redis+sentinel://\" "
            "URLs");
      }
    } else if (is_sentinel_parameter(name)) {
      if (form.kind != node_kind::sentinel) {
        fail(fmt::format("query parameter \"{}\" is for \"redis+sentinel://\" URLs", name));
      }
    } else if (name != "wait_replicas") {
      fail(fmt::format("unknown query parameter \"{}\"; a \"{}://\" URL takes {}", name,
                       form.scheme, parameters_of(form)));
    }
  }

  void parse_query(std::string_view query, const url_form& form, node_config& result) const {
    for_each_parameter(query, [&](std::string_view name, std::string_view raw) {
      check_parameter_belongs(name, form);
      std::string value =
          decode(raw, fmt::format("query parameter \"{}\"", name), is_secret_parameter(name));
      if (value.empty()) fail(fmt::format("query parameter \"{}\" is empty", name));
      if (is_tls_parameter(name)) {
        set_tls_parameter(name, std::move(value), result.tls);
      } else if (name == "db") {
        parse_database(value, result);
      } else if (name == "seed") {
        result.seeds.push_back(parse_seed(raw, value, form));
      } else if (name == "master") {
        result.sentinel_master = std::move(value);
      } else if (name == "sentinel_user") {
        result.sentinel_username = std::move(value);
      } else if (name == "sentinel_password") {
        result.sentinel_password = std::move(value);
      } else if (name == "wait_replicas") {
        result.wait_replicas = parse_wait_replicas(value);
      }
    });
  }

  void set_tls_parameter(std::string_view name, std::string value, tls_options& tls) const {
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
    } else if (value == "yes" || value == "true" || value == "1") {  // verify
      tls.verify_peer = true;
    } else if (value == "no" || value == "false" || value == "0") {
      tls.verify_peer = false;
    } else {
      fail(fmt::format("verify=\"{}\" is neither yes nor no", value));
    }
  }

  // "host:port" as node_config::seeds holds it, the form's port filled in when none is given.
  std::string parse_seed(std::string_view raw, std::string_view value, const url_form& form) const {
    const auto parsed = detail::parse_endpoint(value, "seed=[::1]:7000");
    if (!parsed.problem.empty()) fail(fmt::format("seed \"{}\": {}", raw, parsed.problem));
    return join_host_port(parsed.host, parsed.port.value_or(form.default_port));
  }

  unsigned parse_wait_replicas(std::string_view value) const {
    if (!all_digits(value)) {
      fail(fmt::format("wait_replicas=\"{}\" is not a decimal number", value));
    }
    // At most 2 significant digits can be in range, which also keeps from_chars from overflow.
    const auto first = value.find_first_not_of('0');
    const std::string_view digits =
        first == std::string_view::npos ? std::string_view("0") : value.substr(first);
    unsigned count = 0;
    if (digits.size() <= 2) std::from_chars(digits.data(), digits.data() + digits.size(), count);
    if (digits.size() > 2 || count > detail::most_wait_replicas) {
      fail(fmt::format("wait_replicas={} is out of range 0-{}", value, detail::most_wait_replicas));
    }
    return count;
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

  std::string_view url_;
  std::optional<std::string_view> scheme_;    // without "://"
  std::string_view prefix_;                   // the scheme with "://", or empty
  std::optional<std::string_view> userinfo_;  // between the prefix and the '@' that ends it
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
  return join_host_port(host, port);
}

}  // namespace redlock
