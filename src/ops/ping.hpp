#ifndef REDLOCK_OPS_PING_HPP
#define REDLOCK_OPS_PING_HPP

#include "redlock/detail/initiate.hpp"

#include <memory>

namespace redlock::detail {

class lock_space;

// client::async_ping: PING on every node; succeeds when a quorum answers PONG.
void start_ping(const std::shared_ptr<lock_space>& space, void_caller caller);

}  // namespace redlock::detail

#endif
