#ifndef REDLOCK_OPS_RELEASE_HPP
#define REDLOCK_OPS_RELEASE_HPP

#include "redlock/detail/initiate.hpp"

#include <memory>

namespace redlock::detail {

struct lease_state;

// lease::async_release on a lease that has a state: token-checked DEL on every node, decided by
// a quorum; the resource goes to the next local waiter once the requests are queued.
void run_release(const std::shared_ptr<lease_state>& state, void_caller caller);

}  // namespace redlock::detail

#endif
