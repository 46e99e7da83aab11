#include "lock/lease_state.hpp"

#include "algo/validity.hpp"
#include "block_cache.hpp"
#include "call_observer.hpp"
#include "clock.hpp"
#include "text.hpp"
#include "token.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace redlock::detail {

constinit const lease_state::details lease_state::no_details_{};

using boost::system::error_code;

lease_state::lease_state(std::shared_ptr<lock_home> owner, std::string resource_name,
                         const lock_options& lock)
    : home_(std::move(owner)),
      resource_(std::move(resource_name)),
      local_handoffs_(lock.local_handoffs),
      renewal_({.ttl = lock.ttl,
                .auto_renew = lock.auto_renew,
                .max_hold = lock.max_hold,
                .drift_factor = home_->drift_factor()}) {}

std::shared_ptr<lease_state> lease_state::make(std::shared_ptr<lock_home> home,
                                               std::string resource, const lock_options& options) {
  return std::allocate_shared<lease_state>(cached_allocator<lease_state>(), std::move(home),
                                           std::move(resource), options);
}

// A held state is released by ~lease before it can get here; the list hook unlinks itself.
lease_state::~lease_state() {
  renewal_timer_.disarm();
  recycle_lock_token(std::move(token_));
}

void lease_state::renewal_timer_entry::arm(steady_clock::time_point at, void (*due)(lease_state&)) {
  call_ = due;
  owner_.home_->timers().arm(*this, at);
}

void lease_state::renewal_timer_entry::disarm() noexcept {
  owner_.home_->timers().disarm(*this);
}

void lease_state::renewal_timer_entry::due() {
  // Armed only while the lease holds, and a held lease is destroyed on the executor, which is
  // running this: the lease is alive. Kept so while `call_` may release or lose it.
  const auto self = owner_.shared_from_this();
  call_(owner_);
}

void lease_state::hold_set(std::vector<std::string> set) {
  kind_ = hold_kind::set;
  own_details().resources = std::move(set);
}

void lease_state::extend_along(std::string key) {
  own_details().companion_key = std::move(key);
}

void lease_state::use_token(std::string round_token) {
  recycle_lock_token(std::move(token_));
  token_ = std::move(round_token);
}

void lease_state::sets_other_key(std::string_view key) {
  if (key == resource_) return;  // the same name: the slot it hashed to stays
  resource_.assign(key);  // reuses the buffer: the rounds of one acquire set keys of one size
  resource_slot_ = slot_unknown;
}

void lease_state::hold_as_reader(std::string queue) {
  kind_ = hold_kind::reader;
  own_details().queue_key = std::move(queue);
}

void lease_state::hold_as_writer(std::string queue, std::string mark, std::string mark_token) {
  kind_ = hold_kind::writer;
  details& names = own_details();
  names.queue_key = std::move(queue);
  names.mark_key = std::move(mark);
  names.mark_id = std::move(mark_token);
}

void lease_state::observe_as(std::string name) {
  own_details().observed_name = std::move(name);
}

void lease_state::fencing_tokens_known(std::vector<std::uint64_t> tokens) {
  if (tokens.empty()) return;
  if (kind_ == hold_kind::set) {
    if (tokens.size() == 1) fencing_token_ = tokens.front();
    own_details().fencing_tokens = std::move(tokens);
  } else {
    fencing_token_ = tokens.front();
  }
}

void lease_state::held_with(const held_round& round) {
  if (details_) details_->diagnostics.clear();
  contended_ = round.contended;
  granted_nodes_ = round.granted_nodes;
  current_ = phase::held;
  acquired_at_ = round.started;
  renewal_.held(round.started, round.valid_until);
  home_->track_lease(*this);
}

void lease_state::diagnose(std::string why) {
  if (why.empty() && !details_) return;  // nothing written yet, nothing to clear
  own_details().diagnostics = std::move(why);
}

void lease_state::report_to(observer& watcher, void (observer::*what)(const lease_event&),
                            error_code ec, steady_clock::time_point hold_ended) const {
  auto held = steady_clock::duration::zero();
  if (acquired_at_ != steady_clock::time_point{}) {
    if (hold_ended == steady_clock::time_point{}) hold_ended = lock_clock::now();
    held = hold_ended - acquired_at_;
  }
  call_observer(watcher, home_->executor(), what,
                lease_event{.resource = observed_name().empty() ? resource_ : observed_name(),
                            .error = ec,
                            .held = held});
}

std::string lease_state::subject() const {
  if (kind_ == hold_kind::set) return quoted_set(resources());
  return quoted_resource(resource_);
}

std::string lease_state::keys() const {
  if (kind_ == hold_kind::set) return quoted_keys(resources());
  if (companion_key().empty()) return quoted_keys({resource_});
  return quoted_keys({resource_, companion_key()});
}

std::string lease_state::why_expired() const {
  switch (renewal_.why_expired()) {
    case lease_machine::expiry::max_hold:
      return fmt::format("redlock: {} expired: max_hold of {} ms reached", subject(),
                         renewal_.max_hold()->count());
    case lease_machine::expiry::last_extension_unconfirmed:
      return fmt::format(
          "redlock: {} expired: its last extension before max_hold ({} ms) was not confirmed by "
          "a quorum in time",
          subject(), renewal_.max_hold()->count());
    case lease_machine::expiry::ttl_without_renewal:
      return fmt::format("redlock: {} expired: its TTL ran out (auto_renew is off)", subject());
    case lease_machine::expiry::extension_unconfirmed:
      break;
  }
  return fmt::format(
      "redlock: {} expired: its validity ran out before a quorum confirmed an extension",
      subject());
}

void lease_state::wait_for_loss(std::shared_ptr<loss_waiter> waiter) {
  lost_waiters_.push_back(std::move(waiter));
}

void lease_state::stop_waiting_for_loss(const loss_waiter* waiter) {
  lost_waiters_.erase(std::remove_if(lost_waiters_.begin(), lost_waiters_.end(),
                                     [waiter](const auto& each) { return each.get() == waiter; }),
                      lost_waiters_.end());
}

local_queues::lease_release lease_state::release_decision() {
  return home_->queues().release_of(local_hold, {.local_handoffs = local_handoffs_,
                                                 .longest_ttl = validity().longest_ttl(),
                                                 .contended = contended_,
                                                 .resources = held_resources()});
}

void lease_state::stop_holding(phase next, error_code waiters_get, next_waiter_start next_waiter) {
  if (current_ != phase::held) return;
  current_ = next;
  renewal_.stop();
  renewal_timer_.disarm();
  home_->untrack_lease(*this);
  if (!lost_waiters_.empty()) {
    auto waiters = std::move(lost_waiters_);
    lost_waiters_.clear();
    for (auto& waiter : waiters)
      waiter->lease_ended(waiters_get);
  }
  // Last: the next local waiter's SET is queued behind whatever this lease sent before.
  home_->queues().holder_gone(local_hold, queue_names(), next_waiter);
}

}  // namespace redlock::detail
