#include "lock/lease_state.hpp"
#include "lock_space.hpp"
#include "redlock/detail/initiate.hpp"
#include "user_operation.hpp"

#include <boost/asio/error.hpp>

#include <memory>

namespace redlock::detail {

namespace asio = boost::asio;

namespace {

// async_wait_lost: kept in the lease's list while it waits, and out of it as soon as it is done
// (cancelled, or the client shut down), so that a watchdog that waits and gives up again and again
// costs nothing that grows.
class lost_waiter final : public user_operation, public loss_waiter {
 public:
  lost_waiter(const std::shared_ptr<lease_state>& state, void_caller&& caller)
      : user_operation(state->home(), state->home()->executor(), std::move(caller)),
        state_(state) {}

  void lease_ended(boost::system::error_code ec) override { finish(ec); }

 private:
  void on_finished() override {
    if (auto state = state_.lock()) {
      const auto keep_alive = shared_from_this();  // the list may hold the last reference
      state->stop_waiting_for_loss(this);
    }
  }

  std::weak_ptr<lease_state> state_;
};

}  // namespace

void initiate_wait_lost(const std::shared_ptr<lease_state>& state, void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  auto op = std::make_shared<lost_waiter>(state, std::move(caller));
  switch (state->current()) {
    case lease_state::phase::lost:
      return op->finish(error::lock_lost);
    case lease_state::phase::never_held:
      return op->finish(error::not_held);
    case lease_state::phase::released:
      return op->finish(asio::error::operation_aborted);
    case lease_state::phase::held:
      break;
  }
  if (space_of(*state).closed()) return op->finish(asio::error::operation_aborted);
  state->wait_for_loss(op);
  op->start();
}

}  // namespace redlock::detail
