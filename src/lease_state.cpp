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
  valid_until = until;
  longest_ttl = options.ttl;
  space->track_lease(this);
  schedule_renewal();
  arm_timer();
}

void lease_state::arm_timer() {
  ++timer_generation;
  timer.expires_at(std::min(next_renewal, valid_until));
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
  if (now >= valid_until) return lose(why_expired());
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
    if (unconfirmed_extensions.empty()) {
      return fmt::format("redlock: {} expired: max_hold of {} ms reached",
                         quoted_resource(resource), options.max_hold->count());
    }
    return fmt::format(
        "redlock: {} expired: its last extension before max_hold ({} ms) was not confirmed by a "
        "quorum in time",
        quoted_resource(resource), options.max_hold->count());
  }
  if (!options.auto_renew && unconfirmed_extensions.empty()) {
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
  next_renewal = valid_until - options.ttl / 2;
}

namespace {

// The TTL that, sent now, keeps a key until `until` after the drift allowance:
// ttl - (ttl * drift_factor + 2 ms) >= until - now.
std::chrono::milliseconds ttl_covering(steady_clock::time_point until, steady_clock::time_point now,
                                       double drift_factor) {
  const double needed_ms = std::chrono::duration<double, std::milli>(until - now).count() + 2.0;
  const auto ttl = std::chrono::milliseconds(
      static_cast<std::chrono::milliseconds::rep>(std::ceil(needed_ms / (1.0 - drift_factor))) + 1);
  return std::max(ttl, std::chrono::milliseconds(1));
}

}  // namespace

void lease_state::renew() {
  const auto now = steady_clock::now();
  // Never shorten what is claimed, or what an extension still in flight may give the key: the TTL
  // covers both, and is at least the lease's own TTL.
  auto claimed = valid_until;
  for (const auto& sent : unconfirmed_extensions)
    claimed = std::max(claimed, sent.cap);
  auto ttl = std::max(options.ttl, ttl_covering(claimed, now, space->options().drift_factor));
  if (options.max_hold) {
    // Never past acquired_at + max_hold: the extension that reaches it is the last one, and only
    // if it still lengthens the validity claimed now (after a user extension past max_hold it
    // would not). The lock then runs out, and the timer reports it lost.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        acquired_at + *options.max_hold - now);
    if (left <= ttl) {
      ttl = left;
      renewal_stopped_by_max_hold = true;
      if (ttl <= std::chrono::milliseconds(0) ||
          now + ttl - drift_allowance(ttl, space->options().drift_factor) <= valid_until) {
        next_renewal = steady_clock::time_point::max();
        return;
      }
    }
  }
  start_extend(ttl, true, nullptr);
}

void lease_state::release_on_nodes(const std::vector<bool>* only) {
  const auto how = space->queues().release_of(*this);
  node_set::key_gone on_gone;
  if (how.next_waiter_competes) {
    on_gone = [weak = std::weak_ptr<lock_space>(space), key = resource](std::size_t node) {
      if (const auto owner = weak.lock()) owner->queues().key_gone_on_node(node, key);
    };
  }
  space->nodes().release_best_effort(resource, token, how.channel, longest_ttl, only,
                                     std::move(on_gone));
}

bool lease_state::confirm_extension(std::uint64_t id, steady_clock::time_point now) {
  if (now >= valid_until) return false;  // the lease had run out: a late yes brings nothing back
  const auto confirmed = std::find_if(unconfirmed_extensions.begin(), unconfirmed_extensions.end(),
                                      [id](const sent_extension& sent) { return sent.id == id; });
  // Not found: a newer extension was confirmed first, and this older one ran before it.
  if (confirmed == unconfirmed_extensions.end()) return true;
  auto until = confirmed->cap;
  for (auto later = confirmed; later != unconfirmed_extensions.end(); ++later)
    until = std::min(until, later->cap);
  valid_until = std::max(valid_until, until);
  unconfirmed_extensions.erase(unconfirmed_extensions.begin(), confirmed + 1);
  return true;
}

void lease_state::start_extend(std::chrono::milliseconds ttl, bool from_renewal,
                               std::shared_ptr<user_operation> caller) {
  const auto start = steady_clock::now();
  const sent_extension sent{++extensions_sent,
                            start + ttl - drift_allowance(ttl, space->options().drift_factor)};
  // From now on the extension may run on any node, whatever its answer will be: it can only
  // shorten what we may claim until a quorum confirms it (see lease_state).
  valid_until = std::min(valid_until, sent.cap);
  unconfirmed_extensions.push_back(sent);
  longest_ttl = std::max(longest_ttl, ttl);
  if (from_renewal) {
    renewal_in_flight = true;
    next_renewal = steady_clock::time_point::max();  // until it is decided
  } else if (options.auto_renew && !renewal_in_flight && !renewal_stopped_by_max_hold) {
    // A shorter validity needs an earlier renewal; a longer one is planned when confirmed.
    next_renewal = std::min(next_renewal, valid_until - options.ttl / 2);
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
