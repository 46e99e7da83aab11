#include "ops/acquire_op.hpp"

#include "clock.hpp"
#include "config/options_check.hpp"
#include "lock/scripts.hpp"
#include "observe.hpp"
#include "ops/acquire.hpp"
#include "ops/extend.hpp"
#include "ops/lock_rounds.hpp"
#include "ops/rw_rounds.hpp"
#include "ops/set_rounds.hpp"
#include "ops/slot_rounds.hpp"
#include "token.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace redlock::detail {

void acquire_op::start() {
  if (space_->closed()) {
    lease_->diagnose("the client is shut down");
    return complete(asio::error::operation_aborted);
  }
  if (auto problem = strategy_->problem(space_->options().replies.max_reply_memory);
      !problem.empty()) {
    lease_->diagnose(std::move(problem));
    return complete(error::invalid_argument);
  }
  if (auto problem = check_lock_options(lease_->resource(), lease_->options(), space_->options());
      !problem.empty()) {
    lease_->diagnose(fmt::format("redlock: cannot acquire {}: {}", subject(), problem));
    return complete(error::invalid_argument);
  }
  if (nodes().has_cluster_node()) {
    // Its keys would be in several hash slots, and a cluster refuses such scripts (CROSSSLOT).
    if (auto problem = strategy_->cross_slot_problem(lease_->options().fencing); !problem.empty()) {
      lease_->diagnose(std::move(problem));
      return complete(error::invalid_argument);
    }
  }
  if (const auto& duplicates = nodes().duplicate_nodes(); !duplicates.empty()) {
    lease_->diagnose(fmt::format("redlock: cannot acquire {}: {}", subject(), duplicates));
    return complete(error::invalid_argument);
  }
  lease_->use_token(make_lock_token());
  if (lease_->options().wait) deadline_ = lock_clock::now() + *lease_->options().wait;

  auto& queues = space_->queues();
  const auto queue_keys = strategy_->queue_keys();
  if (single_round_) {
    for (const auto& key : queue_keys) {
      const resource_queue* queue = queues.find(key);
      if (auto why = strategy_->contended_here(queue, queue && queues.waiter_goes_first(*queue));
          !why.empty()) {
        lease_->diagnose(std::move(why));
        return complete(error::contended);
      }
    }
  }

  space_->track(this);
  done_.on_cancel([weak = weak_from_this()](asio::cancellation_type type) {
    if (auto self = weak.lock()) self->cancel(type);
  });
  // A set joins the queue of each resource here, at once: see local_queues on why that order
  // cannot deadlock.
  queues.join(shared_from_this(), queue_keys, lease_->options().ttl);
  strategy_->join(*queue_of_own());
  if (queues.try_start(*this)) {
    const auto window = 2 * space_->round_trip().bounded();
    if (single_round_ || !queues.announced_lately(queue_keys, lock_clock::now(), window))
      return begin_round();
    // This client released it with an announcement a moment ago: the waiters elsewhere that the
    // announcement woke send their rounds after a jitter; so does this acquire.
    competing_ = true;
    stage_ = stage::sleeping;
    listen();
    return wake_soon();
  }
  if (single_round_) {
    // Another acquire of this client goes first in one of its queues: a try does not wait.
    lease_->diagnose(strategy_->contended_here(queue_of_own(), true));
    return finish(error::contended);
  }
  stage_ = stage::queued;
  // Subscribed by the time a hand-off limit makes it compete with other processes.
  listen();
  arm_timer(deadline_);
}

std::string round_strategy::cross_slot_problem(bool fencing) const {
  if (keys_in_one_slot(fencing)) return {};
  return fmt::format(
      "redlock: cannot acquire {} on a Redis Cluster node: its keys would not share one hash "
      "slot, because the name holds a '}}' but no hash tag; give it one, as in \"{{orders}}:42\"",
      subject());
}

void acquire_op::wake() {
  if (stage_ == stage::queued) begin_round();
}

void acquire_op::compete(steady_clock::time_point key_gone_by) {
  if (stage_ != stage::queued) return;
  const auto now = lock_clock::now();
  competing_ = true;
  strategy_->held_until(nodes().size(), nodes().quorum(), key_gone_by);
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
  for (std::size_t node = 0; node < nodes().size(); ++node) {
    if (round_in_flight()) {
      heard_.released(slot, node);
    } else {
      forget_holder(slot, node);
    }
  }
  // Only the acquire the local queues started may go to the nodes.
  if (!started()) return;
  if (stage_ == stage::queued || stage_ == stage::sleeping || stage_ == stage::subscribing)
    begin_round();
}

void acquire_op::subscription_changed(bool subscribed) {
  if (stage_ == stage::subscribing) {
    if (space_->listener() == nullptr || space_->listener()->settled(lease_->resource()))
      wake_soon();
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
  plan_wake(lock_clock::now());
}

void acquire_op::succeed(steady_clock::time_point valid_until) {
  const auto keep_alive = shared_from_this();  // leaving the queue may drop the last owner
  stage_ = stage::finished;
  if (timer_) timer_->cancel();
  space_->untrack(this);
  stop_listening();
  resource_queue* const queue = queue_of_own();
  const boost::container::small_vector<resource_queue*, 1> held_queues(queues().begin(),
                                                                       queues().end());
  space_->queues().hold_in(lease_->local_hold, held_queues);
  space_->queues().leave(*this, strategy_->queue_keys(), false);
  const bool next_may_start = strategy_->hold(*queue, *lease_);
  for (auto other = held_queues.begin() + 1; other != held_queues.end(); ++other)
    strategy_->hold(**other, *lease_);
  acquired_ = true;
  lease_->held_with({.started = round_->start(),
                     .valid_until = valid_until,
                     .contended = rounds_ > 1 || competing_,
                     .granted_nodes = round_->votes().yes_count()});
  start_renewal(*lease_);
  note_if_degraded();
  complete(error_code{});
  if (next_may_start) space_->queues().start_next_waiter(*queue);
}

void acquire_op::finish(error_code ec) {
  const auto keep_alive = shared_from_this();  // leaving the queue may drop the last owner
  send_deferred_cleanups();
  if (strategy_->marks_may_stand()) drop_marks();
  stage_ = stage::finished;
  if (timer_) timer_->cancel();
  space_->untrack(this);
  stop_listening();
  leave_queue();
  complete(ec);
}

void acquire_op::complete(error_code ec) {
  if (observer* const watcher = space_->watcher()) {
    if (lease_->observed_name().empty() && strategy_->name() != lease_->resource())
      lease_->observe_as(strategy_->name());
    std::size_t granted = 0;
    if (round_) granted = ec ? round_->votes().yes_count() : lease_->granted_nodes();
    call_observer(*watcher, space_->executor(), &observer::on_acquire,
                  acquire_event{.resource = strategy_->name(),
                                .error = ec,
                                .took = lock_clock::now() - started_,
                                .rounds = rounds_,
                                .granted_nodes = granted});
  }
  done_.complete(ec, make_lease());
}

bool acquire_op::held_here() const {
  return std::any_of(queues().begin(), queues().end(), [](const resource_queue* queue) {
    return queue->holder != nullptr || !queue->readers.empty();
  });
}

void acquire_op::leave_queue() {
  if (queues().empty()) return;  // never queued
  space_->queues().leave(*this, strategy_->queue_keys(), true);
}

void acquire_op::claims_until(steady_clock::time_point until) {
  claim_ends_ = until;
  if (stage_ == stage::queued) arm_timer(until_deadline(until, deadline_));
}

void acquire_op::cancel(asio::cancellation_type type) {
  using ct = asio::cancellation_type;
  switch (stage_) {
    case stage::queued:
    case stage::subscribing:
    case stage::sleeping:
      // Nothing of ours is on the nodes: a failed round was cleaned up before sleeping, but for
      // the cleanups that wait for their node's answer, which finish sends now.
      lease_->diagnose("redlock: acquire cancelled while waiting");
      return finish(asio::error::operation_aborted);
    case stage::in_round:
    case stage::fencing:
      if ((type & (ct::terminal | ct::partial)) == ct::none) return;
      release_where(round_->cleanup_targets(), lease_->resource(), lease_->token());
      lease_->diagnose("redlock: acquire cancelled during a round; released what it set");
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
  const auto now = lock_clock::now();
  const bool timed_out = deadline_ && now >= *deadline_;
  if (stage_ == stage::queued && timed_out) {
    lease_->diagnose(strategy_->queued_too_long(*lease_->options().wait, held_here()));
    finish(error::wait_timeout);
  } else if (stage_ == stage::queued) {
    if (!claim_ends_ || now < *claim_ends_) return;
    claim_ends_.reset();
    arm_timer(deadline_);
    space_->queues().claim_expired(*this);  // may start this op at once
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
  auto rounds = std::make_unique<lock_rounds>(resource);
  std::make_shared<acquire_op>(space, std::move(rounds), std::move(resource), options, single_round,
                               std::move(caller))
      ->start();
}

void start_acquire_rw(const std::shared_ptr<lock_space>& space, std::string name, bool write,
                      const lock_options& options, bool single_round,
                      caller_handler<acquire_signature> caller) {
  auto rounds = std::make_unique<rw_rounds>(
      std::move(name), write ? rw_rounds::side::write : rw_rounds::side::read, make_lock_token());
  std::string key = rounds->round_key();
  std::make_shared<acquire_op>(space, std::move(rounds), std::move(key), options, single_round,
                               std::move(caller))
      ->start();
}

void start_acquire_all(const std::shared_ptr<lock_space>& space, std::vector<std::string> resources,
                       const lock_options& options, bool single_round,
                       caller_handler<acquire_signature> caller) {
  auto rounds = std::make_unique<set_rounds>(std::move(resources));
  std::vector<std::string> set = rounds->resources();
  // One resource, after merging, is that lock: its key either way, taken with a SET rather than
  // the set's script (cheaper on the server), and a lease that is the lock's.
  if (set.size() == 1)
    return start_acquire(space, std::move(set.front()), options, single_round, std::move(caller));
  std::string first = set.empty() ? std::string() : set.front();
  auto op = std::make_shared<acquire_op>(space, std::move(rounds), std::move(first), options,
                                         single_round, std::move(caller));
  op->hold_set(std::move(set));
  op->start();
}

void start_acquire_permit(const std::shared_ptr<lock_space>& space, std::string name,
                          std::size_t permits, const lock_options& options, bool single_round,
                          caller_handler<acquire_signature> caller) {
  auto rounds = std::make_unique<slot_rounds>(std::move(name), permits, single_round);
  std::string first_slot = rounds->first_slot_key();
  std::string permits_record = rounds->permits_key();
  auto op = std::make_shared<acquire_op>(space, std::move(rounds), std::move(first_slot), options,
                                         single_round, std::move(caller));
  // Extended with every slot lease, so that it lives as long as the permits are held.
  op->extend_along(std::move(permits_record));
  op->start();
}

}  // namespace redlock::detail
