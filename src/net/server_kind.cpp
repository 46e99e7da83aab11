#include "net/server_kind.hpp"

#include <fmt/format.h>

#include <string_view>

namespace redlock::detail {

std::optional<server_kind> server_mode_of(const resp::value& hello_reply) {
  if (hello_reply.kind != resp::type::map && hello_reply.kind != resp::type::array) {
    return std::nullopt;
  }
  const auto& fields = hello_reply.elements;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    if (fields[i].text != "mode") continue;
    const std::string_view mode = fields[i + 1].text;
    if (mode == "standalone") return server_kind::standalone;
    if (mode == "cluster") return server_kind::cluster;
    if (mode == "sentinel") return server_kind::sentinel;
    return std::nullopt;
  }
  return std::nullopt;
}

std::string url_as(const node_config& node, node_kind kind) {
  const std::string_view tls = node.tls.enabled ? "s" : "";
  if (!node.unix_path.empty()) {
    // Only a standalone node may be a local socket; the others are named by their TCP address.
    if (kind == node_kind::standalone) return "unix://" + node.unix_path;
    return fmt::format("redis{}+{}://HOST:PORT", tls,
                       kind == node_kind::cluster ? "cluster" : "sentinel");
  }
  switch (kind) {
    case node_kind::cluster:
      return fmt::format("redis{}+cluster://{}", tls, node.address());
    case node_kind::sentinel:
      return fmt::format("redis{}+sentinel://{}?master=NAME", tls, node.address());
    case node_kind::standalone:
      break;
  }
  return fmt::format("redis{}://{}", tls, node.address());
}

std::optional<std::string> wrong_kind_refusal(server_kind expected, server_kind found,
                                              const node_config& node) {
  if (expected == server_kind::any || expected == found) return std::nullopt;
  switch (found) {
    case server_kind::sentinel:
      return fmt::format(
          "the server is a Redis Sentinel, which holds no keys: use {} (NAME: the master it "
          "monitors) to lock on the master it names",
          url_as(node, node_kind::sentinel));
    case server_kind::cluster:
      // A cluster node serving every slot works as redis://: only its redirections are refused.
      if (expected == server_kind::standalone) return std::nullopt;
      return fmt::format("the server is a Redis Cluster node, not a sentinel: use {}",
                         url_as(node, node_kind::cluster));
    case server_kind::standalone:
      if (expected == server_kind::cluster) {
        return fmt::format(
            "the server is not a Redis Cluster node (its cluster mode is off): use {}",
            url_as(node, node_kind::standalone));
      }
      return fmt::format("the server is a Redis server, not a sentinel: use {}",
                         url_as(node, node_kind::standalone));
    case server_kind::any:
      break;
  }
  return std::nullopt;
}

std::optional<std::string> cluster_redirect_refusal(const resp::value& reply,
                                                    const node_config& node) {
  if (reply.kind != resp::type::simple_error) return std::nullopt;
  const auto word = reply.error_code_word();
  if (word != "MOVED" && word != "ASK") return std::nullopt;
  return fmt::format(
      "the server is a Redis Cluster node: it answered {} (the key's hash slot is served by "
      "another node): use {}",
      reply.text, url_as(node, node_kind::cluster));
}

bool replace_cluster_redirect(resp::value& reply, std::string_view name, const node_config& node) {
  auto refusal = cluster_redirect_refusal(reply, node);
  if (!refusal) return false;
  reply = resp::value{};
  reply.kind = resp::type::simple_error;
  reply.text = fmt::format("{}: {}", name, *refusal);
  return true;
}

}  // namespace redlock::detail
