#include "lease_state.hpp"

#include "algo/validity.hpp"
#include "ops/extend.hpp"
#include "ops/vote.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace redlock::detail {

using boost::system::error_code;

lease_state::lease_state(std::shared_ptr<lock_space> owner, std::string resource_name,
                         const lock_options& lock)
    : space(std::move(owner)),
      resource(std::move(resource_name)),
      options(lock),
      timer(space->executor()) {}

// A held state is released by ~lease before it can get here; the list hook unlinks itself.
lease_state::~lease_state() = default;

void lease_state::on_acquired(steady_clock::time_point round_start,
                              steady_clock::time_point until) {
  current = phase::held;
  acquired_at = round_start;
  validity.on_acquired(until, options.ttl);
  space->track_lease(this);
  schedule_renewal();
  arm_timer();
}

void lease_state::arm_timer() {
  ++timer_generation;
  timer.expires_at(std::min(next_renewal, validity.valid_until()));
  timer.async_wait([weak = weak_from_this(), generation = timer_generation](error_code ec) {
    auto self = weak.lock();
    if (ec || !self || generation != self->timer_generation || self->current != phase::held) {
      return;
    }
    self->on_timer();
  });
}

void lease_state::on_timer() {
  const auto now = steady_clock::now();
  if (now >= validity.valid_until()) return lose(why_expired());
  if (now >= next_renewal) renew();
  arm_timer();
}

std::string lease_state::keys() const {
  if (companion_key.empty()) return quoted_keys({resource});
  return quoted_keys({resource, companion_key});
}

std::string lease_state::why_expired() const {
  if (renewal_stopped_by_max_hold) {
    // Renewal made its last extension, capped at max_hold, or had none left to make: the lease
    // was to end within a TTL anyway.
    if (!validity.has_unconfirmed()) {
      return fmt::format("redlock: {} expired: max_hold of {} ms reached",
                         quoted_resource(resource), options.max_hold->count());
    }
    return fmt::format(
        "redlock: {} expired: its last extension before max_hold ({} ms) was not confirmed by a "
        "quorum in time",
        quoted_resource(resource), options.max_hold->count());
  }
  if (!options.auto_renew && !validity.has_unconfirmed()) {
    return fmt::format("redlock: {} expired: its TTL ran out (auto_renew is off)",
                       quoted_resource(resource));
  }
  return fmt::format(
      "redlock: {} expired: its validity ran out before a quorum confirmed an extension",
      quoted_resource(resource));
}

void lease_state::schedule_renewal() {
  if (!options.auto_renew || renewal_in_flight || renewal_stopped_by_max_hold) {
    if (!renewal_in_flight) next_renewal = steady_clock::time_point::max();
    return;
  }
  // At acquire this is half of the TTL after the round started, less the round's duration and the
  // drift allowance; after a long user extension, half a TTL before that one runs out.
  next_renewal = renewal_due(validity.valid_until(), options.ttl);
}

void lease_state::renew() {
  // Never shorter than what is claimed or what an extension in flight may give the key, never
  // past acquired_at + max_hold: the extension that reaches max_hold is the last one (the lock
  // then runs out, and the timer reports it lost), if it still lengthens the validity at all.
  std::optional<steady_clock::time_point> max_hold_end;
  if (options.max_hold) max_hold_end = acquired_at + *options.max_hold;
  const auto plan = plan_renewal(validity, steady_clock::now(), options.ttl, max_hold_end,
                                 space->options().drift_factor);
  if (plan.last) renewal_stopped_by_max_hold = true;
  if (plan.none) {
    next_renewal = steady_clock::time_point::max();
    return;
  }
  start_extend(plan.ttl, true, nullptr);
}

void lease_state::release_on_nodes(const std::vector<bool>* only) {
  const auto how = space->queues().release_of(*this);
  node_set::key_gone on_gone;
  if (how.next_waiter_competes) {
    on_gone = [weak = std::weak_ptr<lock_space>(space), key = resource](std::size_t node) {
      if (const auto owner = weak.lock()) owner->queues().key_gone_on_node(node, key);
    };
  }
  space->nodes().release_best_effort(resource, token, how.channel, validity.longest_ttl(), only,
                                     std::move(on_gone));
}

void lease_state::start_extend(std::chrono::milliseconds ttl, bool from_renewal,
                               std::shared_ptr<user_operation> caller) {
  // From now on the extension may run on any node, whatever its answer will be: it can only
  // shorten what we may claim until a quorum confirms it.
  const sent_extension sent =
      validity.send(steady_clock::now(), ttl, space->options().drift_factor);
  if (from_renewal) {
    renewal_in_flight = true;
    next_renewal = steady_clock::time_point::max();  // until it is decided
  } else if (options.auto_renew && !renewal_in_flight && !renewal_stopped_by_max_hold) {
    // A shorter validity needs an earlier renewal; a longer one is planned when confirmed.
    next_renewal = std::min(next_renewal, renewal_due(validity.valid_until(), options.ttl));
  }
  arm_timer();
  start_extension(shared_from_this(), ttl, sent.id, from_renewal, std::move(caller));
}

void lease_state::lose(std::string why) {
  diagnostics = std::move(why);
  space->log(log_level::warning, diagnostics);
  // Whatever is left of our key on a minority of nodes would only expire: delete it now, and
  // before the next local waiter's SET is queued, so that on every node our DEL runs first.
  release_on_nodes();
  stop_holding(phase::lost, make_error_code(error::lock_lost));
}

void lease_state::stop_holding(phase next, error_code waiters_get) {
  if (current != phase::held) return;
  current = next;
  ++timer_generation;
  timer.cancel();
  space->untrack_lease(this);
  auto waiters = std::move(lost_waiters);
  lost_waiters.clear();
  for (auto& waiter : waiters)
    waiter->finish(waiters_get);
  // Last: the next local waiter's SET is queued behind whatever this lease sent before.
  space->queues().holder_gone(*this);
}

}  // namespace redlock::detail
