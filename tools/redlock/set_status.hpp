#ifndef REDLOCK_TOOLS_REDLOCK_SET_STATUS_HPP
#define REDLOCK_TOOLS_REDLOCK_SET_STATUS_HPP

// `status A B ...`: several locks, each judged as a lock (judge_status), then the set of them as
// `run A B ...` takes it: one lease holds a set when its token is on a quorum for every key.

#include "messages.hpp"

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::cli {

struct set_verdict {
  std::string subject;                 // "a, b and c"
  std::vector<std::string> resources;  // in the order given
  std::vector<lock_state> states;      // each resource's, in that order
  std::size_t locked = 0;
  std::size_t free = 0;
  std::size_t unknown = 0;
  // The one token that every locked resource is locked by (with all of them locked: one lease, a
  // set as `run A B` takes it, holds them); empty when none is locked or their owners differ.
  std::optional<std::string> owner;
  node_counts counts;             // the same for every resource: each node is asked once
  bool enough_reachable = false;  // a quorum answered
  // "a and b: 2 of 2 locked by token 1a2b3c4d (quorum 3 of 5 nodes)"
  // "a, b and c: 2 of 3 locked by 2 owners, 1 free (quorum 3 of 5 nodes)"; ", 1 not locked"
  // (below quorum) and ", 1 unknown" when some are.
  std::string line;
  std::vector<std::string> count_lines;  // unasked_lines, told once for the whole set
};

// Expects one verdict per resource, in the order of `subject`'s resources.
set_verdict judge_set(std::string_view subject, std::span<const status_verdict> verdicts);

// status A B --json, after each resource's node and verdict objects:
// {"type":"set","resources":["a","b"],"states":["locked","locked"],"locked":2,"free":0,
//  "unknown":0,"token":"1a2b...","nodes":5,"quorum":3,"unreachable":0,"misconfigured":0,
//  "quorum_answered":true}
// token is the one owner of every locked resource (set_verdict::owner), else null.
std::string json_of(const set_verdict& verdict);

}  // namespace redlock::cli

#endif
