#include "ops/lease_end.hpp"

#include "lock_space.hpp"
#include "log.hpp"
#include "ops/lock_requests.hpp"
#include "redlock/error.hpp"

#include <memory>
#include <utility>

namespace redlock::detail {

local_queues::lease_release release_on_nodes(lease_state& lease, const std::vector<bool>* only) {
  const auto how = lease.release_decision();
  auto& space = space_of(lease);
  key_gone on_gone;
  if (how.next_waiter.competes) {
    const auto held = lease.held_resources();
    on_gone = [weak = std::weak_ptr<lock_home>(lease.home()),
               keys = std::vector<std::string>(held.begin(), held.end())](std::size_t node) {
      if (const auto owner = weak.lock()) owner->queues().key_gone_on_node(node, keys);
    };
  }
  release_best_effort(space.nodes(), lease.held(), lease.token(), how.channel,
                      lease.validity().longest_ttl(), only, std::move(on_gone));
  return how;
}

void lose(lease_state& lease, std::string why) {
  lease.diagnose(std::move(why));
  space_of(lease).log(log_level::warning, lease.diagnostics());
  // Whatever is left of our key on a minority of nodes would only expire: delete it now, and
  // before the next local waiter's SET is queued, so that on every node our DEL runs first.
  const auto how = release_on_nodes(lease);
  lease.stop_holding(lease_state::phase::lost, make_error_code(error::lock_lost), how.next_waiter);
  lease.report(&observer::on_lost, error::lock_lost);
}

}  // namespace redlock::detail
