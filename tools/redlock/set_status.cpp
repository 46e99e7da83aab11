#include "set_status.hpp"

#include "json_line.hpp"

#include <fmt/format.h>

#include <set>

namespace redlock::cli {

set_verdict judge_set(std::string_view subject, std::span<const status_verdict> verdicts) {
  set_verdict v;
  v.subject = subject;
  v.enough_reachable = !verdicts.empty();
  for (const auto& verdict : verdicts) {
    v.resources.push_back(verdict.resource);
    v.states.push_back(verdict.state);
    v.locked += verdict.state == lock_state::locked ? 1 : 0;
    v.free += verdict.state == lock_state::free ? 1 : 0;
    v.unknown += verdict.state == lock_state::unknown ? 1 : 0;
    v.enough_reachable = v.enough_reachable && verdict.enough_reachable;
  }
  if (!verdicts.empty()) {
    const auto& first = verdicts.front();
    v.counts = {first.nodes, first.quorum, first.reachable, first.unreachable, first.misconfigured};
  }
  std::set<std::string> owners;
  for (const auto& verdict : verdicts) {
    if (verdict.state == lock_state::locked) owners.insert(verdict.owner);
  }
  if (owners.size() == 1) v.owner = *owners.begin();
  v.line = fmt::format("{}: {} of {} locked", subject, v.locked, verdicts.size());
  if (v.owner) {
    v.line += fmt::format(" by token {}", token_prefix(*v.owner));
  } else if (owners.size() > 1) {
    v.line += fmt::format(" by {} owners", owners.size());
  }
  if (v.free > 0) v.line += fmt::format(", {} free", v.free);
  const std::size_t others = verdicts.size() - v.locked - v.free - v.unknown;
  if (others > 0) v.line += fmt::format(", {} not locked", others);
  if (v.unknown > 0) v.line += fmt::format(", {} unknown", v.unknown);
  v.line += fmt::format(" (quorum {} of {} nodes)", v.counts.quorum, v.counts.nodes);
  v.count_lines = unasked_lines(v.counts);
  return v;
}

std::string json_of(const set_verdict& verdict) {
  std::vector<std::string> states;
  for (const auto state : verdict.states)
    states.emplace_back(state_name(state));
  json_line line;
  line.string("type", "set")
      .strings("resources", verdict.resources)
      .strings("states", states)
      .integer("locked", verdict.locked)
      .integer("free", verdict.free)
      .integer("unknown", verdict.unknown)
      .optional_string("token", verdict.owner)
      .integer("nodes", verdict.counts.nodes)
      .integer("quorum", verdict.counts.quorum)
      .integer("unreachable", verdict.counts.unreachable)
      .integer("misconfigured", verdict.counts.misconfigured)
      .boolean("quorum_answered", verdict.enough_reachable);
  return line.str();
}

}  // namespace redlock::cli
