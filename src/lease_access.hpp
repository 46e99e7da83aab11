#ifndef REDLOCK_LEASE_ACCESS_HPP
#define REDLOCK_LEASE_ACCESS_HPP

#include "lock/lease_state.hpp"
#include "redlock/lease.hpp"

#include <memory>
#include <utility>

namespace redlock::detail {

// The library's way into a redlock::lease: makes one from its state, and (for tests) reads it.
struct lease_access {
  static lease make(std::shared_ptr<lease_state> state) { return lease(std::move(state)); }
  static const std::shared_ptr<lease_state>& state_of(const lease& handle) noexcept {
    return handle.state_;
  }
};

}  // namespace redlock::detail

#endif
