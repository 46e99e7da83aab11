#include "ops/start_acquire.hpp"

#include "block_cache.hpp"
#include "lock/lease_state.hpp"
#include "lock/lock_rounds.hpp"
#include "lock/rw_rounds.hpp"
#include "lock/set_rounds.hpp"
#include "lock/slot_rounds.hpp"
#include "ops/acquire_driver.hpp"
#include "token.hpp"

namespace redlock::detail {

namespace {

// An acquire's driver lives for one acquire: its memory is recycled (block_cache.hpp).
template <class... Args>
std::shared_ptr<acquire_driver> make_driver(Args&&... args) {
  return std::allocate_shared<acquire_driver>(cached_allocator<acquire_driver>(),
                                              std::forward<Args>(args)...);
}

// Observer events name what the caller acquires (the read-write lock, the set, the semaphore), not
// the key a round sets, which the lease's resource is. Only with an observer: the name is a copy.
// `name` is the strategy's, which the driver keeps.
void observe_as_asked(const lock_space& space, acquire_driver& op, const std::string& name) {
  if (space.watcher() != nullptr) op.lease().observe_as(name);
}

}  // namespace

void start_acquire(const std::shared_ptr<lock_space>& space, std::string resource,
                   const lock_options& options, bool single_round,
                   caller_handler<acquire_signature> caller) {
  auto lease = lease_state::make(space, std::move(resource), options);
  auto rounds = std::make_unique<lock_rounds>(lease->resource());
  make_driver(space, std::move(rounds), std::move(lease), options, single_round, std::move(caller))
      ->start();
}

void start_acquire_rw(const std::shared_ptr<lock_space>& space, std::string name, bool write,
                      const lock_options& options, bool single_round,
                      caller_handler<acquire_signature> caller) {
  auto rounds = std::make_unique<rw_rounds>(
      std::move(name), write ? rw_rounds::side::write : rw_rounds::side::read, make_lock_token());
  auto lease = lease_state::make(space, rounds->round_key(), options);
  const std::string& observed = rounds->name();
  auto op = make_driver(space, std::move(rounds), std::move(lease), options, single_round,
                        std::move(caller));
  observe_as_asked(*space, *op, observed);
  op->start();
}

void start_acquire_all(const std::shared_ptr<lock_space>& space, std::vector<std::string> resources,
                       const lock_options& options, bool single_round,
                       caller_handler<acquire_signature> caller) {
  auto rounds = std::make_unique<set_rounds>(std::move(resources));
  std::vector<std::string> set = rounds->resources();
  // One resource, after merging, is that lock: its key either way, taken with a SET rather than
  // the set's script (cheaper on the server), and a lease that is the lock's.
  if (set.size() == 1)
    return start_acquire(space, std::move(set.front()), options, single_round, std::move(caller));
  auto lease = lease_state::make(space, set.empty() ? std::string() : set.front(), options);
  const std::string& observed = rounds->name();
  auto op = make_driver(space, std::move(rounds), std::move(lease), options, single_round,
                        std::move(caller));
  op->lease().hold_set(std::move(set));
  observe_as_asked(*space, *op, observed);
  op->start();
}

void start_acquire_permit(const std::shared_ptr<lock_space>& space, std::string name,
                          std::size_t permits, const lock_options& options, bool single_round,
                          caller_handler<acquire_signature> caller) {
  auto rounds = std::make_unique<slot_rounds>(std::move(name), permits, single_round);
  auto lease = lease_state::make(space, rounds->first_slot_key(), options);
  std::string permits_record = rounds->permits_key();
  const std::string& observed = rounds->name();
  auto op = make_driver(space, std::move(rounds), std::move(lease), options, single_round,
                        std::move(caller));
  // Extended with every slot lease, so that it lives as long as the permits are held.
  op->lease().extend_along(std::move(permits_record));
  observe_as_asked(*space, *op, observed);
  op->start();
}

}  // namespace redlock::detail
