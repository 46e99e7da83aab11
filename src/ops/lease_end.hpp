#ifndef REDLOCK_OPS_LEASE_END_HPP
#define REDLOCK_OPS_LEASE_END_HPP

#include "lock/lease_state.hpp"
#include "lock/local_queues.hpp"

#include <string>
#include <vector>

namespace redlock::detail {

// Token-checked release of `lease` on every node (or those in `only`), nobody waiting for it,
// announced unless it hands the resource to a local waiter. Returns that decision
// (lease_state::release_decision) for lease_state::stop_holding. When the next local waiter
// competes, each node whose answer shows the key gone there is passed to it as an announcement
// would be (local_queues::key_gone_on_node).
local_queues::lease_release release_on_nodes(lease_state& lease,
                                             const std::vector<bool>* only = nullptr);

// The lock cannot be kept: says why, cleans up the nodes, tells the waiters, frees the resource
// locally and tells the observer.
void lose(lease_state& lease, std::string why);

}  // namespace redlock::detail

#endif
