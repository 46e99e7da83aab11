#include "nodes/cluster/topology.hpp"

#include "algo/hash_slot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace redlock::detail {

std::string endpoint_text(const cluster_endpoint& at) {
  if (at.host.find(':') != std::string::npos) return fmt::format("[{}]:{}", at.host, at.port);
  return fmt::format("{}:{}", at.host, at.port);
}

std::vector<cluster_endpoint> address_and_seeds(const node_config& node) {
  std::vector<cluster_endpoint> servers;
  if (auto first = parse_endpoint(node.address())) servers.push_back(*first);
  for (const auto& seed : node.seeds) {
    if (auto at = parse_endpoint(seed);
        at && std::find(servers.begin(), servers.end(), *at) == servers.end())
      servers.push_back(*at);
  }
  return servers;
}

node_config server_of(const node_config& cluster, const cluster_endpoint& at) {
  node_config server = cluster;
  server.kind = node_kind::standalone;
  server.seeds.clear();
  server.host = at.host;
  server.port = at.port;
  return server;
}

std::optional<cluster_endpoint> parse_endpoint(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const auto digits = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc{} || end != digits.data() + digits.size() || port == 0 || port > 65535)
    return std::nullopt;
  return cluster_endpoint{std::string(host), static_cast<std::uint16_t>(port)};
}

namespace {

// A CLUSTER SHARDS entry is a list of name, value pairs: a RESP3 map, or a RESP2 array.
const resp::value* field(const resp::value& entry, std::string_view name) {
  if (entry.kind != resp::type::map && entry.kind != resp::type::array) return nullptr;
  for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
    if (entry.elements[i].is_string() && entry.elements[i].text == name)
      return &entry.elements[i + 1];
  }
  return nullptr;
}

std::optional<std::int64_t> number(const resp::value* v) {
  if (v == nullptr) return std::nullopt;
  if (v->kind == resp::type::integer) return v->integer;
  if (!v->is_string()) return std::nullopt;
  std::int64_t out = 0;
  const auto* end = v->text.data() + v->text.size();
  const auto [ptr, ec] = std::from_chars(v->text.data(), end, out);
  if (ec != std::errc{} || ptr != end) return std::nullopt;
  return out;
}

std::string_view text(const resp::value* v) {
  return v != nullptr && v->is_string() ? std::string_view(v->text) : std::string_view();
}

bool valid_slot(std::int64_t slot) {
  return slot >= 0 && slot < static_cast<std::int64_t>(cluster_slot_count);
}

bool valid_port(std::int64_t port) {
  return port > 0 && port <= 65535;
}

std::optional<unsigned> decimal(std::string_view digits) {
  unsigned out = 0;
  const auto* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, out);
  if (digits.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return out;
}

std::string host_or(std::string_view host, std::string_view answered_by_host) {
  if (host.empty() || host == "?") return std::string(answered_by_host);
  return std::string(host);
}

}  // namespace

void cluster_topology::add(std::uint16_t first, std::uint16_t last,
                           const cluster_endpoint& endpoint) {
  auto found = std::find(masters_.begin(), masters_.end(), endpoint);
  if (found == masters_.end()) found = masters_.insert(masters_.end(), endpoint);
  const auto master = static_cast<std::size_t>(found - masters_.begin());
  const slot_range range{.first = first, .last = last, .master = master};
  ranges_.insert(
      std::upper_bound(ranges_.begin(), ranges_.end(), range,
                       [](const slot_range& a, const slot_range& b) { return a.first < b.first; }),
      range);
}

const cluster_endpoint* cluster_topology::master_of(std::uint16_t slot) const noexcept {
  // The last range that starts at or before `slot`.
  auto after =
      std::upper_bound(ranges_.begin(), ranges_.end(), slot,
                       [](std::uint16_t s, const slot_range& range) { return s < range.first; });
  if (after == ranges_.begin()) return nullptr;
  const auto& range = *std::prev(after);
  if (slot > range.last) return nullptr;
  return &masters_[range.master];
}

std::vector<std::uint32_t> cluster_topology::masters_by_slot() const {
  std::vector<std::uint32_t> owners(cluster_slot_count, unserved);
  // `started` counts the ranges that start at or before `slot`; the last of them is the one
  // master_of's search finds, so that even overlapping ranges (which a sane cluster never sends)
  // read alike.
  std::size_t started = 0;
  for (std::size_t slot = 0; slot < cluster_slot_count; ++slot) {
    while (started < ranges_.size() && ranges_[started].first <= slot)
      ++started;
    if (started == 0 || slot > ranges_[started - 1].last) continue;
    owners[slot] = static_cast<std::uint32_t>(ranges_[started - 1].master);
  }
  return owners;
}

std::size_t cluster_topology::uncovered_slots() const noexcept {
  std::size_t covered = 0;
  std::size_t next_free = 0;  // ranges are sorted; overlaps, which a sane cluster never sends,
                              // are counted once
  for (const auto& range : ranges_) {
    const std::size_t first = std::max<std::size_t>(range.first, next_free);
    if (range.last + std::size_t{1} > first) covered += range.last + std::size_t{1} - first;
    next_free = std::max<std::size_t>(next_free, range.last + std::size_t{1});
  }
  return cluster_slot_count - covered;
}

topology_or_problem read_cluster_shards(const resp::value& reply, std::string_view answered_by_host,
                                        bool tls) {
  if (reply.is_error()) return fmt::format("CLUSTER SHARDS failed: {}", reply.text);
  if (reply.kind != resp::type::array)
    return fmt::format("CLUSTER SHARDS answered {}, not an array", resp::to_string(reply.kind));
  cluster_topology topology;
  for (const auto& shard : reply.elements) {
    const resp::value* slots = field(shard, "slots");
    const resp::value* nodes = field(shard, "nodes");
    if (slots == nullptr || nodes == nullptr || !slots->is_aggregate() || !nodes->is_aggregate())
      return std::string("CLUSTER SHARDS: a shard without its slots or nodes");
    if (slots->elements.size() % 2 != 0)
      return std::string("CLUSTER SHARDS: a shard's slots are not pairs of first and last");
    const cluster_endpoint* master = nullptr;
    cluster_endpoint endpoint;
    for (const auto& node : nodes->elements) {
      if (text(field(node, "role")) != "master" || text(field(node, "health")) == "failed")
        continue;
      const auto port = number(field(node, tls ? "tls-port" : "port"));
      if (!port || !valid_port(*port)) {
        return fmt::format(
            "CLUSTER SHARDS: master {} has no valid {}", text(field(node, "id")),
            tls ? "tls-port (is TLS enabled on the cluster's client port?)" : "port");
      }
      std::string_view host = text(field(node, "endpoint"));
      if (host.empty() || host == "?") host = text(field(node, "ip"));
      endpoint = {host_or(host, answered_by_host), static_cast<std::uint16_t>(*port)};
      master = &endpoint;
      break;
    }
    if (master == nullptr) continue;  // no master right now: its slots stay uncovered
    for (std::size_t i = 0; i < slots->elements.size(); i += 2) {
      const auto first = number(&slots->elements[i]);
      const auto last = number(&slots->elements[i + 1]);
      if (!first || !last || !valid_slot(*first) || !valid_slot(*last) || *first > *last)
        return std::string("CLUSTER SHARDS: a slot range out of 0..16383");
      topology.add(static_cast<std::uint16_t>(*first), static_cast<std::uint16_t>(*last), *master);
    }
  }
  return topology;
}

topology_or_problem read_cluster_slots(const resp::value& reply,
                                       std::string_view answered_by_host) {
  if (reply.is_error()) return fmt::format("CLUSTER SLOTS failed: {}", reply.text);
  if (reply.kind != resp::type::array)
    return fmt::format("CLUSTER SLOTS answered {}, not an array", resp::to_string(reply.kind));
  cluster_topology topology;
  for (const auto& entry : reply.elements) {
    if (entry.kind != resp::type::array || entry.elements.size() < 3)
      return std::string("CLUSTER SLOTS: an entry without its range and master");
    const auto first = number(&entry.elements[0]);
    const auto last = number(&entry.elements[1]);
    if (!first || !last || !valid_slot(*first) || !valid_slot(*last) || *first > *last)
      return std::string("CLUSTER SLOTS: a slot range out of 0..16383");
    const auto& master = entry.elements[2];
    if (master.kind != resp::type::array || master.elements.size() < 2)
      return std::string("CLUSTER SLOTS: a range without its master's address");
    const auto port = number(&master.elements[1]);
    if (!port || !valid_port(*port)) return std::string("CLUSTER SLOTS: a master without a port");
    topology.add(
        static_cast<std::uint16_t>(*first), static_cast<std::uint16_t>(*last),
        {host_or(text(&master.elements[0]), answered_by_host), static_cast<std::uint16_t>(*port)});
  }
  return topology;
}

std::optional<cluster_redirect> read_redirect(const resp::value& reply,
                                              std::string_view answered_by_host) {
  if (!reply.is_error()) return std::nullopt;
  const std::string_view word = reply.error_code_word();
  cluster_redirect out;
  if (word == "MOVED") {
    out.what = cluster_redirect::kind::moved;
  } else if (word == "ASK") {
    out.what = cluster_redirect::kind::ask;
  } else {
    return std::nullopt;
  }
  // "<WORD> <slot> <host>:<port>"; the host may be an IPv6 address, so the port follows the last
  // colon.
  std::string_view rest = std::string_view(reply.text).substr(word.size());
  if (rest.empty() || rest.front() != ' ') return std::nullopt;
  rest.remove_prefix(1);
  const auto space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view slot_text = rest.substr(0, space);
  const std::string_view address = rest.substr(space + 1);
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto slot = decimal(slot_text);
  const auto port = decimal(address.substr(colon + 1));
  if (!slot || *slot >= cluster_slot_count || !port || !valid_port(*port)) return std::nullopt;
  out.slot = static_cast<std::uint16_t>(*slot);
  out.target = {host_or(address.substr(0, colon), answered_by_host),
                static_cast<std::uint16_t>(*port)};
  return out;
}

std::string_view cluster_refusal(const resp::value& reply) noexcept {
  if (!reply.is_error()) return {};
  const std::string_view word = reply.error_code_word();
  if (word == "TRYAGAIN") return "the slot is being migrated (TRYAGAIN)";
  if (word == "CLUSTERDOWN") return "the cluster cannot serve the slot (CLUSTERDOWN)";
  if (word == "LOADING") return "the shard master is loading its data (LOADING)";
  if (word == "READONLY") return "the node answering is a replica (READONLY)";
  return {};
}

}  // namespace redlock::detail
