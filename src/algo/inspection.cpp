#include "algo/inspection.hpp"

#include "redlock/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace redlock {

std::size_t inspection::nodes_holding(std::string_view token) const noexcept {
  return static_cast<std::size_t>(std::count_if(nodes.begin(), nodes.end(), [&](const auto& n) {
    return n.holder && !n.not_a_lock && *n.holder == token;
  }));
}

std::size_t inspection::answered() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(nodes.begin(), nodes.end(), [](const auto& n) { return n.answered(); }));
}

std::string_view to_string(inspection::verdict v) noexcept {
  switch (v) {
    case inspection::verdict::held:
      return "held";
    case inspection::verdict::free:
      return "free";
    case inspection::verdict::not_held:
      return "not_held";
    case inspection::verdict::unknown:
      return "unknown";
  }
  return "unknown";
}

}  // namespace redlock

namespace redlock::detail {

using boost::system::error_code;

const std::string_view read_holdings_script =
    "local out = {} "
    "for i, key in ipairs(KEYS) do "
    "local value = redis.pcall('GET', key) "
    "if type(value) == 'table' and value.err then out[i] = value "
    "else out[i] = {value, redis.call('PTTL', key)} end "
    "end "
    "return out";

namespace {

node_holding read_one(std::string_view address, const resp::value& reply) {
  node_holding holding;
  holding.address = std::string(address);
  if (reply.is_error()) {
    if (reply.error_code_word() == "WRONGTYPE") {
      holding.holder = std::string();
      holding.not_a_lock = true;
      return holding;
    }
    holding.error = error::server_error;
    holding.error_text = fmt::format("{}: error reply: {}", address, reply.text);
    return holding;
  }
  if (reply.kind != resp::type::array || reply.elements.size() != 2 ||
      reply.elements[1].kind != resp::type::integer) {
    holding.error = error::protocol_error;
    holding.error_text = fmt::format("{}: unexpected reply to the read script", address);
    return holding;
  }
  const auto& value = reply.elements[0];
  const auto pttl = reply.elements[1].integer;
  if (value.is_null()) return holding;  // no key (pttl -2)
  holding.holder = value.text;
  if (pttl >= 0) holding.ttl = std::chrono::milliseconds(pttl);
  return holding;
}

}  // namespace

std::vector<node_holding> read_holdings(std::string_view address, error_code ec,
                                        const resp::value& reply, std::size_t keys) {
  std::vector<node_holding> holdings;
  holdings.reserve(keys);
  const bool per_key = !ec && reply.kind == resp::type::array && reply.elements.size() == keys;
  for (std::size_t key = 0; key < keys; ++key) {
    if (ec) {
      node_holding failed;
      failed.address = std::string(address);
      failed.error = ec;
      failed.error_text =
          reply.text.empty() ? fmt::format("{}: {}", address, ec.message()) : reply.text;
      holdings.push_back(std::move(failed));
    } else {
      holdings.push_back(read_one(address, per_key ? reply.elements[key] : reply));
    }
  }
  return holdings;
}

void judge(inspection& seen) {
  // Nodes holding each token (a key that is not a string counts as a holder of its own).
  std::map<std::string, std::vector<const node_holding*>> by_token;
  std::size_t silent = 0;
  std::size_t other_keys = 0;
  for (const auto& node : seen.nodes) {
    if (!node.answered()) {
      ++silent;
    } else if (node.not_a_lock) {
      ++other_keys;
    } else if (node.holder) {
      by_token[*node.holder].push_back(&node);
    }
  }
  std::size_t most = other_keys > 0 ? 1 : 0;
  const std::string* leader = nullptr;
  for (const auto& [token, holders] : by_token) {
    if (holders.size() > most || (leader == nullptr && holders.size() == most && most > 0)) {
      most = holders.size();
      leader = &token;
    }
  }
  seen.holder.reset();
  seen.held_for.reset();
  if (leader != nullptr && most >= seen.quorum) {
    seen.state = inspection::verdict::held;
    seen.holder = *leader;
    // Held on a quorum for as long as the quorum-th longest TTL lasts; no expiry counts longest.
    std::vector<std::optional<std::chrono::milliseconds>> ttls;
    for (const auto* node : by_token[*leader])
      ttls.push_back(node->ttl);
    std::sort(ttls.begin(), ttls.end(), [](const auto& a, const auto& b) {
      if (!a) return b.has_value();
      if (!b) return false;
      return *a > *b;
    });
    seen.held_for = ttls[seen.quorum - 1];
    return;
  }
  if (most + silent >= seen.quorum) {
    seen.state = inspection::verdict::unknown;
  } else if (by_token.empty() && other_keys == 0) {
    seen.state = inspection::verdict::free;
  } else {
    seen.state = inspection::verdict::not_held;
  }
}

}  // namespace redlock::detail
