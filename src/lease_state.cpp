#include "lease_state.hpp"

#include "algo/validity.hpp"
#include "clock.hpp"
#include "observe.hpp"
#include "text.hpp"
#include "user_operation.hpp"

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
  space->track_lease(*this);
}

void lease_state::report_to(observer& watcher, void (observer::*what)(const lease_event&),
                            error_code ec) const {
  const auto held = acquired_at == steady_clock::time_point{} ? steady_clock::duration::zero()
                                                              : lock_clock::now() - acquired_at;
  call_observer(
      watcher, space->executor(), what,
      lease_event{
          .resource = observed_name.empty() ? resource : observed_name, .error = ec, .held = held});
}

std::string lease_state::subject() const {
  if (kind == hold_kind::set) return quoted_set(resources);
  return quoted_resource(resource);
}

std::string lease_state::keys() const {
  if (kind == hold_kind::set) return quoted_keys(resources);
  if (companion_key.empty()) return quoted_keys({resource});
  return quoted_keys({resource, companion_key});
}

std::string lease_state::why_expired() const {
  if (renewal_stopped_by_max_hold) {
    // Renewal made its last extension, capped at max_hold, or had none left to make: the lease
    // was to end within a TTL anyway.
    if (!validity.has_unconfirmed()) {
      return fmt::format("redlock: {} expired: max_hold of {} ms reached", subject(),
                         options.max_hold->count());
    }
    return fmt::format(
        "redlock: {} expired: its last extension before max_hold ({} ms) was not confirmed by a "
        "quorum in time",
        subject(), options.max_hold->count());
  }
  if (!options.auto_renew && !validity.has_unconfirmed()) {
    return fmt::format("redlock: {} expired: its TTL ran out (auto_renew is off)", subject());
  }
  return fmt::format(
      "redlock: {} expired: its validity ran out before a quorum confirmed an extension",
      subject());
}

local_queues::lease_release lease_state::release_decision() {
  return space->queues().release_of(local_hold, {.local_handoffs = options.local_handoffs,
                                                 .longest_ttl = validity.longest_ttl(),
                                                 .contended = contended,
                                                 .resources = held_resources()});
}

local_queues::lease_release lease_state::release_on_nodes(const std::vector<bool>* only) {
  const auto how = release_decision();
  node_set::key_gone on_gone;
  if (how.next_waiter.competes) {
    on_gone = [weak = std::weak_ptr<lock_space>(space),
               keys = std::vector<std::string>(held_resources().begin(), held_resources().end())](
                  std::size_t node) {
      if (const auto owner = weak.lock()) owner->queues().key_gone_on_node(node, keys);
    };
  }
  space->nodes().release_best_effort(held(), token, how.channel, validity.longest_ttl(), only,
                                     std::move(on_gone));
  return how;
}

void lease_state::lose(std::string why) {
  diagnostics = std::move(why);
  space->log(log_level::warning, diagnostics);
  // Whatever is left of our key on a minority of nodes would only expire: delete it now, and
  // before the next local waiter's SET is queued, so that on every node our DEL runs first.
  const auto how = release_on_nodes();
  stop_holding(phase::lost, make_error_code(error::lock_lost), how.next_waiter);
  report(&observer::on_lost, error::lock_lost);
}

void lease_state::stop_holding(phase next, error_code waiters_get, next_waiter_start next_waiter) {
  if (current != phase::held) return;
  current = next;
  ++timer_generation;
  timer.cancel();
  space->untrack_lease(*this);
  auto waiters = std::move(lost_waiters);
  lost_waiters.clear();
  for (auto& waiter : waiters)
    waiter->finish(waiters_get);
  // Last: the next local waiter's SET is queued behind whatever this lease sent before.
  space->queues().holder_gone(local_hold, queue_names(), next_waiter);
}

}  // namespace redlock::detail
