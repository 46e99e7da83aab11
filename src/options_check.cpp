#include "options_check.hpp"

#include "algo/validity.hpp"

#include <fmt/format.h>

#include <chrono>
#include <set>
#include <string>

namespace redlock::detail {

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
