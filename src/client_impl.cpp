#include "client_impl.hpp"

#include "algo/hash_slot.hpp"
#include "lock/lease_state.hpp"
#include "ops/extend.hpp"
#include "ops/vote.hpp"

#include <algorithm>

namespace redlock::detail {

client_impl::client_impl(boost::asio::any_io_executor executor, std::vector<node_config> nodes,
                         client_options options)
    : space_(
          std::make_shared<lock_space>(std::move(executor), std::move(nodes), std::move(options))) {
  // A lease whose keys' master changed on some node renews at once: its key there came over with
  // the TTL it had, and the renewal due at half-life may have gone to the former master.
  space_->nodes().watch_masters(
      [weak = std::weak_ptr<lock_space>(space_)](std::size_t, const master_moved& moved) {
        const auto space = weak.lock();
        if (!space || space->closed()) return;
        for (auto* lease : space->leases<lease_state>()) {
          if (moved.every_key || std::binary_search(moved.slots.begin(), moved.slots.end(),
                                                    hash_slot(lease->resource()))) {
            renew_at_once(*lease);
          }
        }
      });
}

void client_impl::shutdown(std::shared_ptr<user_operation> waiter) {
  shutdown_.run(*space_, std::move(waiter));
}

}  // namespace redlock::detail
