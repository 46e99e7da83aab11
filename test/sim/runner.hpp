#ifndef REDLOCK_TEST_SIM_RUNNER_HPP
#define REDLOCK_TEST_SIM_RUNNER_HPP

// Runs one scenario: model nodes on a simulated network, one redlock::client per simulated
// process, each running its operations; the faults at their instants; then a quiet end in which
// every lease is released and the TTLs run out. Returns the history the checkers judge.

#include "sim/history.hpp"
#include "sim/runtime/network.hpp"
#include "sim/scenario.hpp"

#include <cstdint>
#include <optional>

namespace redlock::sim {

struct run_options {
  bool trace = false;  // keep every event's line in history::events
  // What the client sockets take at once (network.hpp); unset: the seed decides
  // (socket_writes_for).
  std::optional<socket_writes> writes;
};

// The seed's socket_writes mode: a quarter of the seeds write only asynchronously (every history
// as it was before the library wrote directly), a quarter whole batches at once, half by chance.
socket_writes socket_writes_for(std::uint64_t seed);

struct run_stats {
  std::uint64_t events = 0;
  std::uint64_t messages = 0;
  std::uint64_t commands = 0;
  std::uint64_t batched_renewals = 0;  // batch_extend_script calls, summed over the nodes
  double virtual_seconds = 0;
};

history run_scenario(const scenario& s, const run_options& options, run_stats* stats = nullptr);

// The name of resource number `i` for a kind: lock-like kinds share r<i>, semaphores are s<i>
// (with i + 1 permits), read-write locks w<i>.
std::string resource_name(op_kind kind, std::uint32_t i);
std::uint32_t semaphore_permits(std::uint32_t i);

}  // namespace redlock::sim

#endif
