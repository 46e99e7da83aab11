#include "ops/acquire_op.hpp"

#include "ops/acquire.hpp"
#include "ops/extend.hpp"
#include "options_check.hpp"
#include "redlock/semaphore.hpp"
#include "scripts.hpp"
#include "text.hpp"
#include "token.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace redlock::detail {

void acquire_op::for_semaphore(std::string name, std::size_t permits) {
  auto& plan = permits_.emplace();
  plan.name = std::move(name);
  plan.count = permits;
  plan.queue_key = permit_queue_key(plan.name);
  if (permits <= semaphore::max_permits) {
    plan.watch.reset_unknown(permits);
    plan.tried_in_this_try.assign(permits, false);
    for (std::size_t slot = 0; slot < permits; ++slot)
      plan.slot_keys.push_back(plan.queue_key + std::to_string(slot));
    plan.key_views.assign(plan.slot_keys.begin(), plan.slot_keys.end());
    plan.permits_text = std::to_string(permits);
  }
  lease_->resource = plan.queue_key + "0";  // each round sets the slot it tries
  // Extended with every slot lease, so that it lives as long as the permits are held.
  lease_->companion_key = semaphore_permits_key(plan.name);
  plan.key_views.push_back(lease_->companion_key);
}

void acquire_op::start() {
  if (space_->closed()) {
    lease_->diagnostics = "the client is shut down";
    return done_.complete(asio::error::operation_aborted, make_lease());
  }
  if (permits_) {
    if (auto problem = check_semaphore(); !problem.empty()) {
      lease_->diagnostics = fmt::format("redlock: cannot acquire a permit of semaphore {}: {}",
                                        quoted_resource(permits_->name), problem);
      return done_.complete(error::invalid_argument, make_lease());
    }
  }
  if (auto problem = check_lock_options(lease_->resource, lease_->options, space_->options());
      !problem.empty()) {
    lease_->diagnostics = fmt::format("redlock: cannot acquire {}: {}", subject(), problem);
    return done_.complete(error::invalid_argument, make_lease());
  }
  if (const auto& duplicates = nodes().duplicate_nodes(); !duplicates.empty()) {
    lease_->diagnostics = fmt::format("redlock: cannot acquire {}: {}", subject(), duplicates);
    return done_.complete(error::invalid_argument, make_lease());
  }
  lease_->token = make_lock_token();
  encode_set(set_command_);
  if (lease_->options.wait) deadline_ = steady_clock::now() + *lease_->options.wait;

  const std::string& queue_key = permits_ ? permits_->queue_key : lease_->resource;
  if (single_round_) {
    const resource_queue* busy = space_->queues().find(queue_key);
    // A semaphore's own leases do not make it busy: a try skips the slots they hold.
    if (permits_ && busy != nullptr && busy->waiters.empty()) busy = nullptr;
    if (busy != nullptr && (busy->holder != nullptr || !busy->waiters.empty())) {
      lease_->diagnostics =
          permits_ ? fmt::format("redlock: another acquire of this client waits for a permit of {}",
                                 quoted_resource(permits_->name))
                   : fmt::format("redlock: {} is held or awaited by another lease of this client",
                                 subject());
      return done_.complete(error::contended, make_lease());
    }
  }

  space_->track(this);
  done_.on_cancel([weak = weak_from_this()](asio::cancellation_type type) {
    if (auto self = weak.lock()) self->cancel(type);
  });
  queue_ = &space_->queues().queue_for(queue_key);
  if (permits_) {
    queue_->semaphore = true;
    if (queue_->slot_holders.size() < permits_->count)
      queue_->slot_holders.resize(permits_->count, nullptr);
  }
  queue_->waiters.push_back(shared_from_this());
  if (queue_->holder == nullptr && queue_->waiters.size() == 1) {
    begin_round();
  } else {
    stage_ = stage::queued;
    // Subscribed by the time a hand-off limit makes it compete with other processes.
    listen();
    arm_timer(deadline_);
  }
}

void acquire_op::wake() {
  if (stage_ == stage::queued) begin_round();
}

void acquire_op::compete(steady_clock::time_point key_gone_by) {
  if (stage_ != stage::queued) return;
  const auto now = steady_clock::now();
  competing_ = true;
  watch_.reset_all_held(nodes().size(), nodes().quorum(), key_gone_by);
  sleep(now);
}

void acquire_op::announced(std::size_t node, std::size_t slot) {
  if (round_in_flight()) return heard_.released(slot, node);
  if (stage_ != stage::sleeping || woken_) return;
  forget_holder(slot, node);
  // The first announcement that may free a quorum wakes the op; the other copies of the same
  // release find it woken.
  if (may_be_free()) wake_soon();
}

void acquire_op::permit_released_here(std::size_t slot) {
  if (!permits_) return;
  for (std::size_t node = 0; node < nodes().size(); ++node) {
    if (round_in_flight()) {
      heard_.released(slot, node);
    } else {
      forget_holder(slot, node);
    }
  }
  if (stage_ == stage::queued || stage_ == stage::sleeping || stage_ == stage::subscribing)
    begin_round();
}

void acquire_op::subscription_changed(bool subscribed) {
  if (stage_ == stage::subscribing) {
    if (space_->listener() == nullptr || space_->listener()->all_settled()) wake_soon();
    return;
  }
  if (round_in_flight()) {
    if (subscribed) heard_.resubscribed();
    return;
  }
  if (stage_ != stage::sleeping || woken_) return;
  // Back after a reconnect: whatever was announced meanwhile is lost, so look again.
  if (subscribed) return wake_soon();
  // Announcements from that node no longer arrive: the backoff matters again.
  plan_wake(steady_clock::now());
}

std::string acquire_op::subject() const {
  if (!permits_) return quoted_resource(lease_->resource);
  return fmt::format("semaphore {} (slot {} of {})", quoted_resource(permits_->name),
                     permits_->tried, permits_->count);
}

std::string acquire_op::check_semaphore() const {
  if (permits_->name.empty()) return "its name is empty";
  if (permits_->count == 0 || permits_->count > semaphore::max_permits) {
    return fmt::format("permits must be between 1 and {}, not {}", semaphore::max_permits,
                       permits_->count);
  }
  // A refusal carries every slot's PTTL as text (semaphore_acquire_script).
  const std::size_t refusal_bytes = permits_->count * semaphore_refusal_bytes_per_permit + 256;
  if (refusal_bytes > space_->options().replies.max_reply_memory) {
    return fmt::format(
        "a refusal of {} permits takes up to {} bytes, more than "
        "client_options::replies.max_reply_memory ({})",
        permits_->count, refusal_bytes, space_->options().replies.max_reply_memory);
  }
  return {};
}

std::vector<bool> acquire_op::held_here() const {
  std::vector<bool> held(permits_->count, false);
  for (std::size_t slot = 0; slot < held.size() && slot < queue_->slot_holders.size(); ++slot)
    held[slot] = queue_->slot_holders[slot] != nullptr || permits_->tried_in_this_try[slot];
  return held;
}

void acquire_op::succeed(steady_clock::time_point valid_until) {
  const auto keep_alive = shared_from_this();  // leaving the queue may drop the last owner
  stage_ = stage::finished;
  if (timer_) timer_->cancel();
  space_->untrack(this);
  stop_listening();
  drop_from_waiters();
  resource_queue* const queue = std::exchange(queue_, nullptr);
  if (permits_) {
    queue->slot_holders[permits_->tried] = lease_.get();
  } else {
    queue->holder = lease_.get();
  }
  lease_->queue = queue;
  lease_->diagnostics.clear();
  lease_->granted_nodes = round_->votes().yes_count();
  acquired_ = true;
  lease_->on_acquired(round_->start(), valid_until);
  start_renewal(*lease_);
  note_if_degraded();
  done_.complete(error_code{}, make_lease());
  // A semaphore's next waiter need not wait for this lease: it tries the other slots.
  if (permits_) space_->queues().start_next_waiter(*queue);
}

void acquire_op::finish(error_code ec) {
  const auto keep_alive = shared_from_this();  // leaving the queue may drop the last owner
  send_deferred_cleanups();
  stage_ = stage::finished;
  if (timer_) timer_->cancel();
  space_->untrack(this);
  stop_listening();
  leave_queue();
  done_.complete(ec, make_lease());
}

void acquire_op::drop_from_waiters() {
  std::erase_if(queue_->waiters, [this](const auto& waiter) { return waiter.get() == this; });
}

void acquire_op::leave_queue() {
  if (queue_ == nullptr) return;  // never queued
  const bool was_first = !queue_->waiters.empty() && queue_->waiters.front().get() == this;
  drop_from_waiters();
  if (was_first && queue_->holder == nullptr) space_->queues().start_next_waiter(*queue_);
  queue_ = nullptr;
  space_->queues().forget_if_idle(permits_ ? permits_->queue_key : lease_->resource);
}

void acquire_op::cancel(asio::cancellation_type type) {
  using ct = asio::cancellation_type;
  switch (stage_) {
    case stage::queued:
    case stage::subscribing:
    case stage::sleeping:
      // Nothing of ours is on the nodes: a failed round was cleaned up before sleeping, but for
      // the cleanups that wait for their node's answer, which finish sends now.
      lease_->diagnostics = "redlock: acquire cancelled while waiting";
      return finish(asio::error::operation_aborted);
    case stage::in_round:
    case stage::fencing:
      if ((type & (ct::terminal | ct::partial)) == ct::none) return;
      release_where(round_->cleanup_targets(), lease_->resource, lease_->token);
      lease_->diagnostics = "redlock: acquire cancelled during a round; released what it set";
      return finish(asio::error::operation_aborted);
    case stage::idle:
    case stage::finished:
      return;
  }
}

void acquire_op::arm_timer(std::optional<steady_clock::time_point> at) {
  ++timer_generation_;
  if (!at) return;
  if (!timer_) timer_.emplace(space_->executor());
  timer_->expires_at(*at);
  timer_->async_wait([weak = weak_from_this(), generation = timer_generation_](error_code ec) {
    auto self = weak.lock();
    if (ec || !self || generation != self->timer_generation_) return;
    self->on_timer();
  });
}

void acquire_op::on_timer() {
  const bool timed_out = deadline_ && steady_clock::now() >= *deadline_;
  if (stage_ == stage::queued && timed_out) {
    lease_->diagnostics =
        permits_ ? fmt::format(
                       "redlock: no permit of semaphore {} for this acquire after {} ms: "
                       "this client's other leases and acquires had them all",
                       quoted_resource(permits_->name), lease_->options.wait->count())
                 : fmt::format("redlock: {} still held by another lease of this client after {} ms",
                               subject(), lease_->options.wait->count());
    finish(error::wait_timeout);
  } else if (stage_ == stage::sleeping || stage_ == stage::subscribing) {
    if (timed_out) return finish(error::wait_timeout);
    begin_round();
  }
}

}  // namespace redlock::detail

namespace redlock::detail {

void start_acquire(const std::shared_ptr<lock_space>& space, std::string resource,
                   const lock_options& options, bool single_round,
                   caller_handler<acquire_signature> caller) {
  std::make_shared<acquire_op>(space, std::move(resource), options, single_round, std::move(caller))
      ->start();
}

void start_acquire_permit(const std::shared_ptr<lock_space>& space, std::string name,
                          std::size_t permits, const lock_options& options, bool single_round,
                          caller_handler<acquire_signature> caller) {
  auto op =
      std::make_shared<acquire_op>(space, std::string(), options, single_round, std::move(caller));
  op->for_semaphore(std::move(name), permits);
  op->start();
}

}  // namespace redlock::detail
