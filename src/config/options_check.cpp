#include "config/options_check.hpp"

#include "algo/validity.hpp"
#include "config/characters.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <charconv>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace redlock::detail {
namespace {

// The problems of a cluster or sentinel node's own fields, or of fields that only those kinds use
// set on another kind.
std::string check_node_kind(const node_config& node) {
  const bool grouped = node.kind == node_kind::cluster || node.kind == node_kind::sentinel;
  if (!grouped && node.kind != node_kind::standalone) {
    return fmt::format("node {} has an unknown kind {}", node.address(),
                       static_cast<unsigned>(node.kind));
  }
  if (node.kind == node_kind::cluster) {
    if (!node.unix_path.empty()) {
      return fmt::format(
          "node {}: a cluster is reached over TCP at host:port; unix_path must be empty",
          node.address());
    }
    if (node.database != 0) {
      return fmt::format("node {}: a cluster has only database 0, not {}", node.address(),
                         node.database);
    }
  }
  if (node.kind == node_kind::sentinel) {
    if (!node.unix_path.empty()) {
      return fmt::format(
          "node {}: sentinels are reached over TCP at host:port; unix_path must be empty",
          node.address());
    }
    if (node.sentinel_master.empty()) {
      return fmt::format(
          "node {}: a sentinel node needs sentinel_master, the name the sentinels know the master "
          "by",
          node.address());
    }
    if (!node.sentinel_username.empty() && node.sentinel_password.empty()) {
      return fmt::format("node {} names sentinel user \"{}\" without a sentinel_password",
                         node.address(), node.sentinel_username);
    }
  } else if (!node.sentinel_master.empty() || !node.sentinel_username.empty() ||
             !node.sentinel_password.empty()) {
    return fmt::format(
        "node {}: sentinel_master, sentinel_username and sentinel_password are for sentinel nodes",
        node.address());
  }
  if (!grouped && !node.seeds.empty()) {
    return fmt::format("node {}: seeds are for cluster and sentinel nodes, not a standalone one",
                       node.address());
  }
  for (const auto& seed : node.seeds) {
    if (auto problem = seed_problem(seed); !problem.empty()) {
      return fmt::format("node {}: seed \"{}\" is not \"host:port\": {}", node.address(), seed,
                         problem);
    }
  }
  if (node.wait_replicas > most_wait_replicas) {
    return fmt::format("node {}: wait_replicas {} is above the limit of {}", node.address(),
                       node.wait_replicas, most_wait_replicas);
  }
  return {};
}

}  // namespace

endpoint parse_endpoint(std::string_view text, std::string_view bracket_example) {
  endpoint result;
  std::string_view host;
  std::optional<std::string_view> port;
  auto refuse = [&](std::string problem) {
    result.problem = std::move(problem);
    return result;
  };

  if (text.find("://") != std::string_view::npos) {
    return refuse("write host:port, without a scheme");
  }
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return refuse("IPv6 host is missing its closing ']'");
    host = text.substr(1, close - 1);
    const std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return refuse(fmt::format("unexpected \"{}\" after the IPv6 host", after));
      }
      port = after.substr(1);
    }
    if (host.empty()) return refuse("host is empty");
    const std::string address(host);
    in6_addr binary{};
    if (::inet_pton(AF_INET6, address.c_str(), &binary) != 1) {
      return refuse(fmt::format("host \"[{}]\" is not an IPv6 address", host));
    }
  } else {
    const auto colon = text.find(':');
    host = text.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = text.substr(colon + 1);
      // Only hex digits, ':' and '.' make an IPv6 address; with anything else (whitespace, say)
      // the second ':' more likely comes from another "host:port".
      if (port->find(':') != std::string_view::npos &&
          text.find_first_not_of("0123456789abcdefABCDEF:.") == std::string_view::npos) {
        return refuse(fmt::format("host looks like an IPv6 address; write it in brackets: \"{}\"",
                                  bracket_example));
      }
    }
    if (host.empty()) return refuse("host is empty");
    for (char c : host) {
      if (!is_host_char(c))
        return refuse(fmt::format("host \"{}\" has an invalid character", host));
    }
    // No host name is all digits, and the number-only IPv4 forms ("7972" = 0.0.31.36) name no
    // server anyone means: such a host is a port whose host was left out ("?seed=7972").
    if (all_digits(host)) {
      return refuse(
          fmt::format("host \"{}\" is a number: a port without its host? write HOST:PORT, e.g. "
                      "\"127.0.0.1:{}\"",
                      host, host));
    }
  }
  result.host = std::string(host);

  if (port) {
    if (port->empty()) return refuse("port is empty");
    if (!all_digits(*port)) {
      result.blank_in_port = port->find_first_of(whitespace) != std::string_view::npos;
      return refuse(fmt::format("port \"{}\" is not a decimal number", *port));
    }
    // More than 5 significant digits cannot be in range; checking that first also keeps
    // from_chars away from values that overflow.
    const auto first = port->find_first_not_of('0');
    const std::string_view digits =
        first == std::string_view::npos ? std::string_view("0") : port->substr(first);
    unsigned value = 0;
    if (digits.size() <= 5) std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.size() > 5 || value < 1 || value > 65535) {
      return refuse(fmt::format("port {} is out of range 1-65535", *port));
    }
    result.port = static_cast<std::uint16_t>(value);
  }
  return result;
}

std::string seed_problem(std::string_view seed) {
  auto parsed = parse_endpoint(seed, "[::1]:7000");
  if (!parsed.problem.empty()) return std::move(parsed.problem);
  if (!parsed.port) return "the port is missing";
  return {};
}

std::string check_client_options(const std::vector<node_config>& nodes,
                                 const client_options& options) {
  if (nodes.empty()) return "a client needs at least one node";
  if (options.node_timeout <= std::chrono::milliseconds(0)) return "node_timeout must be positive";
  if (options.connect_timeout <= std::chrono::milliseconds(0)) {
    return "connect_timeout must be positive";
  }
  if (!(options.drift_factor >= 0.0 && options.drift_factor < 0.5)) {
    return fmt::format("drift_factor {} is outside [0, 0.5)", options.drift_factor);
  }
  if (options.replies.max_reply_memory < 1024) {
    return fmt::format("replies.max_reply_memory {} is below the minimum of 1024 bytes",
                       options.replies.max_reply_memory);
  }
  if (options.replies.max_depth < 1) return "replies.max_depth must be at least 1";
  std::set<std::string> seen;
  for (const auto& node : nodes) {
    if (!node.unix_path.empty()) {
      if (node.unix_path.front() != '/') {
        return fmt::format("node {}: the Unix socket path must be absolute", node.address());
      }
      if (node.unix_path.size() > longest_unix_path) {
        return fmt::format(
            "node {}: the Unix socket path is longer than the {} bytes a socket address holds",
            node.address(), longest_unix_path);
      }
      if (node.tls.enabled) {
        return fmt::format(
            "node {}: TLS over a Unix socket is not supported; turn tls off for "
            "the local socket, or reach the node over TCP",
            node.address());
      }
    } else {
      if (node.host.empty()) return "a node has an empty host name";
      if (node.port == 0) return fmt::format("node {} has port 0", node.address());
    }
    if (node.database < 0) {
      return fmt::format("node {} has a negative database index {}", node.address(), node.database);
    }
    if (!node.username.empty() && node.password.empty()) {
      return fmt::format("node {} names ACL user \"{}\" without a password", node.address(),
                         node.username);
    }
    if (node.tls.enabled && node.tls.cert_file.empty() != node.tls.key_file.empty()) {
      return fmt::format("node {}: a TLS client certificate needs both cert_file and key_file",
                         node.address());
    }
    if (auto problem = check_node_kind(node); !problem.empty()) return problem;
    // As written: the node set compares what the names resolve to once connected.
    if (!seen.insert(node.address()).second) {
      return fmt::format("node {} is listed twice; Redlock needs independent nodes",
                         node.address());
    }
  }
  return {};
}

std::string check_lock_options(const std::string& resource, const lock_options& options,
                               const client_options& client) {
  if (resource.empty()) return "the resource name is empty";
  if (options.ttl <= std::chrono::milliseconds(0)) {
    return fmt::format("ttl must be positive (got {} ms)", options.ttl.count());
  }
  const auto drift = drift_allowance(options.ttl, client.drift_factor);
  if (options.ttl <= drift) {
    return fmt::format("ttl {} ms is not longer than the drift allowance of {} ms",
                       options.ttl.count(), to_ms(drift));
  }
  if (options.wait && *options.wait < std::chrono::milliseconds(0)) {
    return fmt::format("wait must not be negative (got {} ms)", options.wait->count());
  }
  if (options.max_hold && *options.max_hold <= std::chrono::milliseconds(0)) {
    return fmt::format("max_hold must be positive (got {} ms)", options.max_hold->count());
  }
  return {};
}

}  // namespace redlock::detail
