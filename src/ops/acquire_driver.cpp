#include "ops/acquire_driver.hpp"

#include "lease_access.hpp"
#include "ops/extend.hpp"
#include "ops/lock_requests.hpp"

#include <cassert>

namespace redlock::detail {

acquire_driver::acquire_driver(std::shared_ptr<lock_space> space,
                               std::unique_ptr<round_strategy> strategy,
                               std::shared_ptr<lease_state> lease, const lock_options& options,
                               bool single_round, caller_handler<acquire_signature>&& caller)
    : fan_out_sink(space->nodes().size()),
      space_(std::move(space)),
      machine_(*space_, std::move(strategy), std::move(lease), options, single_round, *this, *this),
      done_(std::move(caller.handler), space_->executor(), caller.on_client_executor) {}

void acquire_driver::perform(const acquire_action& action) {
  using kind = acquire_action::kind;
  switch (action.what) {
    case kind::watch:
      space_->track(this);
      return done_.on_cancel([weak = weak_from_this()](boost::asio::cancellation_type type) {
        if (auto self = weak.lock()) self->cancel(type);
      });
    case kind::send_round: {
      const auto& request = machine_.round_request();
      const auto rules = rules_of(request.kind);
      auto& nodes = space_->nodes();
      // The round's key is the lease's resource: hashed once for the acquire and its release.
      assert(request.key == lease().resource());
      const auto slot = resource_slot_for(nodes, lease());
      if (request.shared) {
        nodes.send(request.key, request.shared, *this, open_ballot(), rules, nullptr, slot);
      } else {
        nodes.send(request.key, request.owned, *this, open_ballot(), rules, nullptr, slot);
      }
      return;
    }
    case kind::arm_timer:
      if (!action.at) return timer_.disarm();
      return timer_.arm(space_->executor(), *action.at, weak_from_this(), [](acquire_driver& self) {
        self.drive([](acquire_machine& m, moment now) { m.timer(now); }, true);
      });
    case kind::release: {
      const acquire_release what = machine_.release_of(action);  // more may be asked meanwhile
      return release_best_effort(space_->nodes(), machine_.hold_of(what), what.token,
                                 space_->options().release_channel, machine_.options().ttl,
                                 what.targets.empty() ? nullptr : &what.targets);
    }
    case kind::write_back_fence:
      return write_back_fence();
    case kind::late_grant_to_write_backs:  // a copy: more may be asked meanwhile
      return write_backs_.late_grant(late_grant(machine_.late_grant_of(action)));
    case kind::listen:
      if (auto* listener = space_->listener()) listener->retain(machine_.listened());
      return;
    case kind::stop_listening:
      if (auto* listener = space_->listener()) listener->release(machine_.listened());
      return;
    case kind::check_subscription: {
      const bool settled = space_->announcements_settled(lease().resource());
      return drive([=](acquire_machine& m, moment now) { m.subscription_state(settled, now); });
    }
    case kind::leave_queues:
      return space_->queues().leave(*this, machine_.strategy().queue_keys(), true);
    case kind::start_next_waiter:
      return space_->queues().start_next_waiter(*action.queue);
    case kind::complete:
      return complete(action.code);
  }
}

void acquire_driver::write_back_fence() {
  const unsigned round = machine_.rounds();
  write_backs_.start(
      space_, machine_.fence_plan(), lease().token(), machine_.fence_pending(),
      [weak = weak_from_this(), round](std::size_t r, bool confirmed, const node_answers& answers) {
        if (const auto self = weak.lock()) {
          self->drive([&](acquire_machine& m, moment now) {
            m.fence_written_back(round, r, confirmed, answers, now);
          });
        }
      },
      [this, round] { return machine_.writing_back(round); });
}

void acquire_driver::complete(boost::system::error_code ec) {
  space_->untrack(this);
  if (!ec) start_renewal(lease());
  if (observer* const watcher = space_->watcher()) machine_.report_to(*watcher, ec, input_time_);
  done_.complete(ec, lease_access::make(machine_.lease()));
}

}  // namespace redlock::detail
