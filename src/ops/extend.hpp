#ifndef REDLOCK_OPS_EXTEND_HPP
#define REDLOCK_OPS_EXTEND_HPP

#include "redlock/detail/initiate.hpp"

#include <chrono>
#include <cstdint>
#include <memory>

namespace redlock::detail {

struct lease_state;
class user_operation;

// Sends extension `id` (extend_script with `ttl`, token-checked) of a held lease to every node and
// applies its outcome to the lease: the validity a quorum confirms (lease_state), a loss when a
// quorum says the key is no longer ours, the next renewal. `caller` (null for renewal) gets the
// outcome.
void start_extension(std::shared_ptr<lease_state> state, std::chrono::milliseconds ttl,
                     std::uint64_t id, bool from_renewal, std::shared_ptr<user_operation> caller);

// lease::async_extend on a lease that has a state.
void run_extend(const std::shared_ptr<lease_state>& state, std::chrono::milliseconds ttl,
                void_caller caller);

}  // namespace redlock::detail

#endif
