#include "lock/lease_machine.hpp"

#include "redlock/error.hpp"

#include <algorithm>

namespace redlock::detail {

using boost::system::error_code;

std::optional<lease_action> lease_machine::next_action() {
  if (head_ == actions_.size()) {
    actions_.clear();
    head_ = 0;
    return std::nullopt;
  }
  return actions_[head_++];
}

lease_machine::expiry lease_machine::why_expired() const noexcept {
  // Renewal made its last extension, capped at max_hold, or had none left to make: the lease was
  // to end within a TTL anyway.
  if (stopped_by_max_hold_)
    return validity_.has_unconfirmed() ? expiry::last_extension_unconfirmed : expiry::max_hold;
  if (!settings_.auto_renew && !validity_.has_unconfirmed()) return expiry::ttl_without_renewal;
  return expiry::extension_unconfirmed;
}

void lease_machine::held(steady_clock::time_point acquired_at,
                         steady_clock::time_point valid_until) {
  acquired_at_ = acquired_at;
  validity_.on_acquired(valid_until, settings_.ttl);
  schedule();
  arm();
}

void lease_machine::timer(steady_clock::time_point now) {
  if (ended_) return;
  if (now >= validity_.valid_until()) return ask({.what = lease_action::kind::expire});
  if (now >= next_renewal_) renew(now);
  arm();
}

void lease_machine::renew_now(steady_clock::time_point now) {
  if (ended_ || !settings_.auto_renew || stopped_by_max_hold_) return;
  renew(now);
  arm();
}

void lease_machine::extend(std::chrono::milliseconds ttl, steady_clock::time_point now) {
  send(ttl, false, now);
}

error_code lease_machine::extension_decided(std::uint64_t id, bool from_renewal, error_code ec,
                                            steady_clock::time_point now) {
  if (from_renewal) renewal_in_flight_ = false;
  if (ended_) return ec;
  if (!ec && !validity_.confirm(id, now)) ec = error::no_quorum;  // confirmed, but too late
  return ec;
}

void lease_machine::plan_after_extension(bool from_renewal, bool failed,
                                         steady_clock::time_point now) {
  if (ended_) return;
  if (from_renewal && failed) {
    // Try again soon while validity lasts; later than that is useless, the timer reports the loss
    // at valid_until.
    next_renewal_ = renewal_retry_at(now, settings_.ttl, validity_.valid_until())
                        .value_or(steady_clock::time_point::max());
  } else if (from_renewal || !failed) {
    schedule();
  }
  arm();  // the validity or the next renewal may have moved
}

void lease_machine::schedule() {
  if (!settings_.auto_renew || renewal_in_flight_ || stopped_by_max_hold_) {
    if (!renewal_in_flight_) next_renewal_ = steady_clock::time_point::max();
    return;
  }
  // At acquire this is half of the TTL after the round started, less the round's duration and the
  // drift allowance; after a long user extension, half a TTL before that one runs out. Moved
  // earlier to the start of its tick, so that the client's renewals of that tick go out together.
  next_renewal_ = renewal_due_now();
}

steady_clock::time_point lease_machine::renewal_due_now() const {
  return renewal_tick_start(renewal_due(validity_.valid_until(), settings_.ttl), settings_.ttl);
}

void lease_machine::renew(steady_clock::time_point now) {
  // Never shorter than what is claimed or what an extension in flight may give the key, never
  // past acquired_at + max_hold: the extension that reaches max_hold is the last one (the lock
  // then runs out, and the timer reports it lost), if it still lengthens the validity at all.
  std::optional<steady_clock::time_point> max_hold_end;
  if (settings_.max_hold) max_hold_end = acquired_at_ + *settings_.max_hold;
  const auto plan =
      plan_renewal(validity_, now, settings_.ttl, max_hold_end, settings_.drift_factor);
  if (plan.last) stopped_by_max_hold_ = true;
  if (plan.none) {
    if (!renewal_in_flight_) next_renewal_ = steady_clock::time_point::max();
    return;
  }
  // Beside a renewal in flight (renew_now), as an extension of its own: the renewal's outcome
  // keeps deciding when the next one is due.
  send(plan.ttl, !renewal_in_flight_, now);
}

void lease_machine::send(std::chrono::milliseconds ttl, bool from_renewal,
                         steady_clock::time_point now) {
  // From now on the extension may run on any node, whatever its answer will be: it can only
  // shorten what we may claim until a quorum confirms it.
  const sent_extension sent = validity_.send(now, ttl, settings_.drift_factor);
  if (from_renewal) {
    renewal_in_flight_ = true;
    next_renewal_ = steady_clock::time_point::max();  // until it is decided
  } else if (settings_.auto_renew && !renewal_in_flight_ && !stopped_by_max_hold_) {
    // A shorter validity needs an earlier renewal; a longer one is planned when confirmed.
    next_renewal_ = std::min(next_renewal_, renewal_due_now());
  }
  arm();
  ask({.ttl = ttl,
       .id = sent.id,
       .what = lease_action::kind::send_extension,
       .from_renewal = from_renewal});
}

}  // namespace redlock::detail
