#include "config/node_config_query.hpp"

#include "config/options_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <iterator>
#include <set>
#include <utility>
#include <vector>

namespace redlock::detail {
namespace {

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

// Whether a part of a query (between two '&') starts a new parameter after a secret value: it is
// empty (the '&' only separates), or it is "name=..." for a name that this parser knows.
bool starts_parameter(std::string_view part) {
  if (part.empty()) return true;
  const auto equals = part.find('=');
  if (equals == std::string_view::npos) return false;
  const auto name = part.substr(0, equals);
  return is_known_parameter(name) || is_secret_parameter(name);
}

struct query_part {
  std::string_view name;
  std::optional<std::string_view> value;  // raw; empty without a '='
};

// The non-empty "name=value" parts of a query, split at '&' (a secret value: secret_value_end).
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

}  // namespace

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

template <class Each>
void url_parser::for_each_parameter(std::string_view query, Each each) const {
  std::set<std::string_view> seen;
  for (const auto& part : split_query(query)) {
    if (!part.value) {
      fail(fmt::format("query parameter \"{}\" has no value (write {}=...)", part.name, part.name));
    }
    if (part.name != "seed" && !seen.insert(part.name).second) {
      fail(fmt::format("query parameter \"{}\" is repeated", part.name));
    }
    each(part.name, *part.value);
  }
}

std::string url_parser::parameters_of(const url_form& form) {
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

void url_parser::check_parameter_belongs(std::string_view name, const url_form& form) const {
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
    fail(fmt::format("unknown query parameter \"{}\"; a \"{}://\" URL takes {}", name, form.scheme,
                     parameters_of(form)));
  }
}

void url_parser::parse_query(std::string_view query, const url_form& form,
                             node_config& result) const {
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

void url_parser::set_tls_parameter(std::string_view name, std::string value,
                                   tls_options& tls) const {
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

std::string url_parser::parse_seed(std::string_view raw, std::string_view value,
                                   const url_form& form) const {
  const auto parsed = detail::parse_endpoint(value, "seed=[::1]:7000");
  if (!parsed.problem.empty()) fail(fmt::format("seed \"{}\": {}", raw, parsed.problem));
  return join_host_port(parsed.host, parsed.port.value_or(form.default_port));
}

unsigned url_parser::parse_wait_replicas(std::string_view value) const {
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

}  // namespace redlock::detail
