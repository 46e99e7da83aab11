#include "redlock/lease.hpp"

#include "lease_state.hpp"
#include "ops/extend.hpp"
#include "ops/release.hpp"
#include "ops/vote.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Ends a held lease whose handle is going away: stop renewing, release best effort.
void abandon(const std::shared_ptr<lease_state>& state) {
  if (state->current != lease_state::phase::held) return;
  if (!state->space->closed()) state->release_on_nodes();
  state->stop_holding(lease_state::phase::released, asio::error::operation_aborted);
}

// Completes `handler` with `ec` when there is no lease state to run on.
void complete_without_state(void_handler handler, error_code ec) {
  // A default-constructed lease knows no I/O executor: hop through the system executor into the
  // handler's own, so that the handler never runs inside the initiating function.
  auto executor = asio::get_associated_executor(handler);
  asio::post(asio::system_executor(),
             asio::bind_executor(executor, [handler = void_handler(std::move(handler)),
                                            ec]() mutable { std::move(handler)(ec); }));
}

// async_wait_lost: kept in the lease's list while it waits, and out of it as soon as it is done
// (cancelled, or the client shut down), so that a watchdog that waits and gives up again and again
// costs nothing that grows.
class lost_waiter final : public user_operation {
 public:
  lost_waiter(const std::shared_ptr<lease_state>& state, void_caller&& caller)
      : user_operation(state->space, std::move(caller)), state_(state) {}

 private:
  void on_finished() override {
    if (auto state = state_.lock()) {
      const auto keep_alive = shared_from_this();  // the list may hold the last reference
      std::erase_if(state->lost_waiters,
                    [this](const auto& waiter) { return waiter.get() == this; });
    }
  }

  std::weak_ptr<lease_state> state_;
};

}  // namespace

void initiate_release(const std::shared_ptr<lease_state>& state, void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  run_release(state, std::move(caller));
}

void initiate_extend(const std::shared_ptr<lease_state>& state, std::chrono::milliseconds ttl,
                     void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  run_extend(state, ttl, std::move(caller));
}

void initiate_wait_lost(const std::shared_ptr<lease_state>& state, void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  auto op = std::make_shared<lost_waiter>(state, std::move(caller));
  switch (state->current) {
    case lease_state::phase::lost:
      return op->finish(error::lock_lost);
    case lease_state::phase::never_held:
      return op->finish(error::not_held);
    case lease_state::phase::released:
      return op->finish(asio::error::operation_aborted);
    case lease_state::phase::held:
      break;
  }
  if (state->space->closed()) return op->finish(asio::error::operation_aborted);
  state->lost_waiters.push_back(op);
  op->start();
}

const asio::any_io_executor& executor_of(const lease_state* state) noexcept {
  static const asio::any_io_executor none;
  return state ? state->space->executor() : none;
}

}  // namespace redlock::detail

namespace redlock {

lease& lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    lease old(std::move(*this));
    state_ = std::move(other.state_);
  }
  return *this;
}

lease::~lease() {
  // Any thread may get here. Only the phase is read before the hop to the client's executor (an
  // atomic, and one that never returns to `held`); the client and its executor are fixed at
  // construction. Then inline when already on the executor (the usual case), else posted.
  if (!state_ ||
      state_->current.load(std::memory_order_acquire) != detail::lease_state::phase::held) {
    return;
  }
  try {
    const auto& executor = state_->space->executor();
    boost::asio::dispatch(executor, [state = std::move(state_)] { detail::abandon(state); });
  } catch (...) {
    // Allocation failure: the lock expires with its TTL instead.
  }
}

lease::executor_type lease::get_executor() const noexcept {
  return state_ ? state_->space->executor() : executor_type();
}

const std::string& lease::resource() const noexcept {
  static const std::string none;
  return state_ ? state_->resource : none;
}

const std::string& lease::token() const noexcept {
  static const std::string none;
  return state_ && state_->current != detail::lease_state::phase::never_held ? state_->token : none;
}

std::chrono::steady_clock::time_point lease::valid_until() const noexcept {
  return state_ ? state_->validity.valid_until() : std::chrono::steady_clock::time_point{};
}

bool lease::held() const noexcept {
  return state_ && state_->is_held();
}

const std::string& lease::diagnostics() const noexcept {
  static const std::string none;
  return state_ ? state_->diagnostics : none;
}

std::optional<std::uint64_t> lease::fencing_token() const noexcept {
  if (!state_ || state_->current == detail::lease_state::phase::never_held) return std::nullopt;
  return state_->fencing_token;
}

std::size_t lease::granted_nodes() const noexcept {
  return state_ ? state_->granted_nodes.load() : 0;
}

}  // namespace redlock
