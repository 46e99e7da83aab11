#ifndef REDLOCK_OPS_START_ACQUIRE_HPP
#define REDLOCK_OPS_START_ACQUIRE_HPP

#include "redlock/detail/initiate.hpp"
#include "redlock/options.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace redlock::detail {

class lock_space;

// client::async_acquire / async_try_acquire (`single_round`) of lock `resource`.
void start_acquire(const std::shared_ptr<lock_space>& space, std::string resource,
                   const lock_options& options, bool single_round,
                   caller_handler<acquire_signature> caller);

// rw_lock::async_acquire_read / async_acquire_write (`write`) and their tries (`single_round`) of
// read-write lock `name`.
void start_acquire_rw(const std::shared_ptr<lock_space>& space, std::string name, bool write,
                      const lock_options& options, bool single_round,
                      caller_handler<acquire_signature> caller);

// client::async_acquire_all / async_try_acquire_all (`single_round`) of the set `resources`.
void start_acquire_all(const std::shared_ptr<lock_space>& space, std::vector<std::string> resources,
                       const lock_options& options, bool single_round,
                       caller_handler<acquire_signature> caller);

// semaphore::async_acquire / async_try_acquire: one of `permits` slots of semaphore `name`.
void start_acquire_permit(const std::shared_ptr<lock_space>& space, std::string name,
                          std::size_t permits, const lock_options& options, bool single_round,
                          caller_handler<acquire_signature> caller);

}  // namespace redlock::detail

#endif
