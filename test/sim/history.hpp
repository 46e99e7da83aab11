#ifndef REDLOCK_TEST_SIM_HISTORY_HPP
#define REDLOCK_TEST_SIM_HISTORY_HPP

// What a simulated run did, as the checkers judge it: each acquire and what came of it, each
// moment a holder relied on its lease (a claim: "at `at` the lease said it is ours until
// `until`"), the writes a fenced store accepted or refused, the faults as they happened, and what
// the model servers held at the moments that matter. Times are virtual and exact.

#include "sim/runtime/world.hpp"
#include "sim/scenario.hpp"

#include <boost/system/error_code.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace redlock::sim {

struct claim {
  time_point at;
  time_point until;
};

// A write to the store the lock guards, carrying the lease's fencing token.
struct fenced_write {
  std::string resource;
  std::uint64_t token = 0;
  time_point at;
  bool accepted = false;
  std::size_t hold = 0;
};

struct hold {
  std::size_t op = 0;  // index in scenario::operations
  std::uint32_t client = 0;
  op_kind kind = op_kind::lock;
  // The resources as the user named them (a semaphore's or a read-write lock's name).
  std::vector<std::string> resources;
  std::uint32_t permits = 1;
  bool fencing = false;
  time_point started;
  std::optional<time_point> acquired;
  std::optional<time_point> acquire_done;  // when the acquire completed, held or not
  boost::system::error_code acquire_error;
  unsigned acquire_completions = 0;
  std::string token;
  std::map<std::string, std::uint64_t> fencing_tokens;
  // The nodes whose keys held this lease's token when the acquire completed.
  std::set<std::uint32_t> granted_by;
  // A set's nodes where some of its keys held the token and some did not (never allowed).
  std::vector<std::string> partial_sets;
  std::vector<claim> claims;
  std::optional<time_point> release_started;
  // The client was shut down (async_shutdown) while this lease was held: the user gave it up.
  std::optional<time_point> shut_down;
  std::optional<time_point> release_done;
  boost::system::error_code release_error;
  unsigned release_completions = 0;
  std::optional<time_point> extended;
  boost::system::error_code extend_error;
  bool finished = false;  // the operation's coroutine ran to its end
};

// A node that lost its keys (a restart without persistence), and when. `at_once`: it came back
// before its keys would have expired, which the Redlock algorithm does not survive (the Redis
// spec's delayed restart exists for this); a delayed restart loses only the fencing counters,
// which the lock's fencing assumes are persisted.
//
// For a loss at once, where each lease's token lived just before and just after it: a lease's
// effective holders are not those that granted its acquire (a grant whose reply came late is not
// renewed, and a key the lease did not renew runs out), so whether the loss broke the lease is
// judged from these.
struct token_holder {
  std::uint32_t node = 0;
  std::optional<std::int64_t> ms_left;  // on the node's clock; none: the key has no expiry
};
using token_holders = std::map<std::string, std::vector<token_holder>>;

struct key_loss {
  std::uint32_t node = 0;
  time_point at;
  bool at_once = false;
  token_holders holders_before;
  token_holders holders_after;
};

struct history {
  std::vector<hold> holds;
  std::vector<fenced_write> writes;
  std::vector<key_loss> losses;
  std::vector<std::string> events;  // everything, in order, for a replay's printout
  // Lock keys still alive on some node after the quiet end of the run: node, key, ms left.
  std::vector<std::string> leftovers;
  // The lock keys alive a moment after the workload ended (every lease released, every failed
  // round cleaned up): node, key, and the tokens it holds.
  struct settled_key {
    std::uint32_t node = 0;
    std::string key;
    std::vector<std::string> tokens;
  };
  std::vector<settled_key> settled;
  time_point faults_end;
  time_point workload_end;
  bool workload_finished = false;
};

// Milliseconds of virtual time since the run began, with microseconds: "1234.567".
std::string at_text(time_point t);

}  // namespace redlock::sim

#endif
