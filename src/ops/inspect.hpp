#ifndef REDLOCK_OPS_INSPECT_HPP
#define REDLOCK_OPS_INSPECT_HPP

#include "redlock/detail/initiate.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace redlock::detail {

class lock_space;

// client::async_inspect: `resource`'s key read on every node (algo/inspection.hpp).
void start_inspect(const std::shared_ptr<lock_space>& space, std::string resource,
                   caller_handler<inspect_signature> caller);

// semaphore::async_inspect: the `permits` slot keys of semaphore `name`, in one read per node.
void start_inspect_permits(const std::shared_ptr<lock_space>& space, std::string name,
                           std::size_t permits, caller_handler<inspect_permits_signature> caller);

}  // namespace redlock::detail

#endif
