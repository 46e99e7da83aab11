// The members of redlock::lease, the handle a caller holds on a lease_state: hopping to the
// client's executor, and what happens when a held handle goes away without a release.
#include "lock/lease_state.hpp"
#include "lock_space.hpp"
#include "ops/lease_end.hpp"
#include "redlock/lease.hpp"

#include <boost/asio/dispatch.hpp>

#include <algorithm>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Ends a held lease whose handle is going away: stop renewing, release best effort.
void abandon(const std::shared_ptr<lease_state>& state) {
  if (state->current() != lease_state::phase::held) return;
  next_waiter_start next_waiter;  // a closed client releases nothing: the next waiter wakes
  if (!space_of(*state).closed()) next_waiter = release_on_nodes(*state).next_waiter;
  state->stop_holding(lease_state::phase::released, asio::error::operation_aborted, next_waiter);
  state->report(&observer::on_release, error_code{});
}

}  // namespace

const asio::any_io_executor& executor_of(const lease_state* state) noexcept {
  static const asio::any_io_executor none;
  return state ? state->home()->executor() : none;
}

}  // namespace redlock::detail

namespace redlock {

void lease::detach() noexcept {
  if (!state_ || state_->current() != detail::lease_state::phase::held) return;
  state_->stop_holding(detail::lease_state::phase::released, boost::asio::error::operation_aborted);
}

lease& lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    lease old(std::move(*this));
    state_ = std::move(other.state_);
  }
  return *this;
}

void lease::abandon_if_held() noexcept {
  // Any thread may get here. Only the phase is read before the hop to the client's executor (an
  // atomic, and one that never returns to `held`); the client and its executor are fixed at
  // construction. Then inline when already on the executor (the usual case), else posted.
  if (state_->current(std::memory_order_acquire) != detail::lease_state::phase::held) return;
  try {
    const auto& executor = state_->home()->executor();
    boost::asio::dispatch(executor, [state = std::move(state_)] { detail::abandon(state); });
  } catch (...) {
    // Allocation failure: the lock expires with its TTL instead.
  }
}

lease::executor_type lease::get_executor() const noexcept {
  return state_ ? state_->home()->executor() : executor_type();
}

const std::string& lease::resource() const noexcept {
  static const std::string none;
  return state_ ? state_->resource() : none;
}

std::span<const std::string> lease::resources() const noexcept {
  if (!state_) return {};
  if (state_->kind() == detail::hold_kind::set) return state_->resources();
  return {&state_->resource(), 1};
}

const std::string& lease::token() const noexcept {
  static const std::string none;
  return state_ && state_->current() != detail::lease_state::phase::never_held ? state_->token()
                                                                               : none;
}

std::chrono::steady_clock::time_point lease::valid_until() const noexcept {
  return state_ ? state_->validity().valid_until() : std::chrono::steady_clock::time_point{};
}

bool lease::held() const noexcept {
  return state_ && state_->is_held();
}

const std::string& lease::diagnostics() const noexcept {
  static const std::string none;
  return state_ ? state_->diagnostics() : none;
}

std::optional<std::uint64_t> lease::fencing_token() const noexcept {
  if (!state_ || state_->current() == detail::lease_state::phase::never_held) return std::nullopt;
  return state_->fencing_token();
}

std::optional<std::uint64_t> lease::fencing_token(std::string_view resource) const noexcept {
  if (!state_ || state_->current() == detail::lease_state::phase::never_held) return std::nullopt;
  if (state_->kind() != detail::hold_kind::set)
    return resource == state_->resource() ? state_->fencing_token() : std::nullopt;
  const auto& set = state_->resources();
  const auto found = std::lower_bound(set.begin(), set.end(), resource);
  if (found == set.end() || *found != resource) return std::nullopt;
  const auto index = static_cast<std::size_t>(found - set.begin());
  if (index >= state_->fencing_tokens().size()) return std::nullopt;
  return state_->fencing_tokens()[index];
}

std::size_t lease::granted_nodes() const noexcept {
  return state_ ? state_->granted_nodes() : 0;
}

}  // namespace redlock
