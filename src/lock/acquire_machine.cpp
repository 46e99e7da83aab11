#include "lock/acquire_machine.hpp"

#include "block_cache.hpp"
#include "call_observer.hpp"
#include "config/options_check.hpp"
#include "token.hpp"
#include "unsafe_switches.hpp"

#include <boost/container/small_vector.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace redlock::detail {

using boost::system::error_code;
namespace asio = boost::asio;

acquire_machine::acquire_machine(lock_home& home, std::unique_ptr<round_strategy> strategy,
                                 std::shared_ptr<lease_state> lease, const lock_options& options,
                                 bool single_round, queued_acquire& self,
                                 const announcement_facts& announcements)
    : home_(home),
      nodes_(home.nodes_known()),
      lease_(std::move(lease)),
      strategy_(std::move(strategy)),
      self_(self),
      announcements_(announcements),
      options_(options),
      single_round_(single_round),
      retry_(options.retry) {}

void acquire_machine::forget_taken_actions() {
  actions_.clear();
  head_ = 0;
  releases_.clear();
  late_grants_.clear();
}

void acquire_machine::start(steady_clock::time_point now,
                            const std::shared_ptr<queued_acquire>& self) {
  started_ = now;
  if (home_.closed()) {
    lease_->diagnose("the client is shut down");
    return complete(asio::error::operation_aborted);
  }
  if (auto problem = strategy_->problem(home_.options().replies.max_reply_memory);
      !problem.empty()) {
    lease_->diagnose(std::move(problem));
    return complete(error::invalid_argument);
  }
  if (auto problem = check_lock_options(lease_->resource(), options_, home_.options());
      !problem.empty()) {
    lease_->diagnose(fmt::format("redlock: cannot acquire {}: {}", subject(), problem));
    return complete(error::invalid_argument);
  }
  if (nodes().has_cluster_node()) {
    // Its keys would be in several hash slots, and a cluster refuses such scripts (CROSSSLOT).
    if (auto problem = strategy_->cross_slot_problem(options_.fencing); !problem.empty()) {
      lease_->diagnose(std::move(problem));
      return complete(error::invalid_argument);
    }
  }
  if (const auto& duplicates = nodes().duplicate_nodes(); !duplicates.empty()) {
    lease_->diagnose(fmt::format("redlock: cannot acquire {}: {}", subject(), duplicates));
    return complete(error::invalid_argument);
  }
  lease_->use_token(make_lock_token());
  if (options_.wait) deadline_ = now + *options_.wait;

  auto& queues = home_.queues();
  const auto queue_keys = strategy_->queue_keys();
  // The queues are made (those that do not exist yet) before they are joined, so that each is
  // looked up once. A try looks at each first: an empty queue keeps it out no more than none
  // does, and a try kept out forgets those it made.
  boost::container::small_vector<resource_queue*, 1> own_queues;
  for (const auto& key : queue_keys) {
    resource_queue& queue = queues.queue_for(key);
    own_queues.push_back(&queue);
    if (!single_round_) continue;
    if (auto why = strategy_->contended_here(&queue, queues.waiter_goes_first(queue));
        !why.empty()) {
      for (const auto& made : queue_keys)
        queues.forget_if_idle(made);
      lease_->diagnose(std::move(why));
      return complete(error::contended);
    }
  }

  ask(acquire_action::kind::watch);
  // A set joins the queue of each resource here, at once: see local_queues on why that order
  // cannot deadlock.
  queues.join(self, own_queues, options_.ttl);
  strategy_->join(*queue_of_own());
  if (queues.try_start(self_)) {
    const auto window = 2 * home_.round_trip().bounded();
    if (single_round_ || !queues.announced_lately(queue_keys, now, window)) return begin_round(now);
    // This client released it with an announcement a moment ago: the waiters elsewhere that the
    // announcement woke send their rounds after a jitter; so does this acquire.
    competing_ = true;
    stage_ = stage::sleeping;
    listen();
    return wake_soon(now);
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

void acquire_machine::wake(steady_clock::time_point now) {
  if (stage_ == stage::queued) begin_round(now);
}

void acquire_machine::compete(steady_clock::time_point key_gone_by, steady_clock::time_point now) {
  if (stage_ != stage::queued) return;
  competing_ = true;
  strategy_->held_until(nodes().size(), nodes().quorum(), key_gone_by);
  sleep(now);
}

void acquire_machine::announced(std::size_t node, std::size_t slot, steady_clock::time_point now) {
  if (round_in_flight()) {
    if (has_defect(known_defect::announcement_dropped_in_round)) return;  // unsafe: tests only
    return heard_.released(slot, node);
  }
  if (stage_ != stage::sleeping || woken_) return;
  forget_holder(slot, node);
  // The first announcement that may free a quorum wakes the acquire; the other copies of the same
  // release find it woken.
  if (may_be_free()) wake_soon(now);
}

void acquire_machine::permit_released_here(std::size_t slot, steady_clock::time_point now) {
  for (std::size_t node = 0; node < nodes().size(); ++node) {
    if (round_in_flight()) {
      heard_.released(slot, node);
    } else {
      forget_holder(slot, node);
    }
  }
  // Only the acquire the local queues started may go to the nodes.
  if (!self_.started()) return;
  if (stage_ == stage::queued || stage_ == stage::sleeping || stage_ == stage::subscribing)
    begin_round(now);
}

void acquire_machine::subscription_changed(bool subscribed, bool settled,
                                           steady_clock::time_point now) {
  if (stage_ == stage::subscribing) {
    if (settled) wake_soon(now);
    return;
  }
  if (round_in_flight()) {
    if (subscribed) heard_.resubscribed();
    return;
  }
  if (stage_ != stage::sleeping || woken_) return;
  // Back after a reconnect: whatever was announced meanwhile is lost, so look again.
  if (subscribed) return wake_soon(now);
  // Announcements from that node no longer arrive: the backoff matters again.
  plan_wake(now);
}

void acquire_machine::subscription_state(bool settled, steady_clock::time_point now) {
  if (stage_ != stage::subscribing) return;
  if (settled) return wake_soon(now);
  // The subscribers report within connect_timeout; this is only a backstop.
  arm_timer(until_deadline(now + home_.options().connect_timeout, deadline_));
}

void acquire_machine::claims_until(steady_clock::time_point until) {
  claim_ends_ = until;
  if (stage_ == stage::queued) arm_timer(until_deadline(until, deadline_));
}

void acquire_machine::timer(steady_clock::time_point now) {
  timer_armed_ = false;
  const bool timed_out = deadline_ && now >= *deadline_;
  if (stage_ == stage::queued && timed_out) {
    lease_->diagnose(strategy_->queued_too_long(*options_.wait, held_here()));
    finish(error::wait_timeout);
  } else if (stage_ == stage::queued) {
    if (!claim_ends_ || now < *claim_ends_) return;
    claim_ends_.reset();
    arm_timer(deadline_);
    home_.queues().claim_expired(self_);  // may start this acquire at once
  } else if (stage_ == stage::sleeping || stage_ == stage::subscribing) {
    if (timed_out) return finish(error::wait_timeout);
    begin_round(now);
  }
}

void acquire_machine::cancel(asio::cancellation_type type) {
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

bool acquire_machine::learn_from_round(steady_clock::time_point now) {
  strategy_->learn(round_->answers(), nodes().quorum(), now, home_.options().drift_factor);
  if (strategy_->take_marks_to_drop()) drop_marks();
  watch_round_ = rounds_;
  return apply_heard();
}

bool acquire_machine::apply_heard() {
  return heard_.apply([this](std::size_t slot, std::size_t node) { forget_holder(slot, node); },
                      [this] { return may_be_free(); });
}

void acquire_machine::note_late_refusal(std::size_t node, const set_answer& answer,
                                        steady_clock::time_point now) {
  // Sleeping on what this very round taught, and not already woken.
  const bool watching = stage_ == stage::sleeping && !woken_ && watch_round_ == rounds_;
  if (!strategy_->late_refusal(node, answer, now, home_.options().drift_factor, watching)) return;
  if (may_be_free()) return wake_soon(now);
  plan_wake(now);
}

void acquire_machine::sleep(steady_clock::time_point now, bool due_now) {
  stage_ = stage::sleeping;
  woken_ = false;
  watch_round_ = rounds_;
  backoff_until_ = now + retry_.next(home_.random());
  if (due_now) return wake_after_news_heard_in_round(now);
  // A round lost without such news: no herd woke in step, so the collision window starts over.
  wakes_after_news_heard_in_round_ = 0;
  plan_wake(now);
}

void acquire_machine::plan_wake(steady_clock::time_point now) {
  const sleep_facts facts{
      .free_by = strategy_->free_by(),
      .may_be_free = may_be_free(),
      .announcements_cover = announcements_.announcements_cover(lease_->resource()),
      .backoff_until = backoff_until_};
  arm_timer(wake_at(facts, now, deadline_));
}

void acquire_machine::wake_soon(steady_clock::time_point now) {
  woken_ = true;
  const auto delay =
      wake_jitter(home_.round_trip().bounded(), competitions_lost(rounds_), home_.random());
  arm_timer(until_deadline(now + delay, deadline_));
}

void acquire_machine::wake_after_news_heard_in_round(steady_clock::time_point now) {
  woken_ = true;
  const auto delay =
      collision_delay(home_.round_trip().bounded(), wakes_after_news_heard_in_round_++,
                      retry_.ceiling(), home_.random());
  arm_timer(until_deadline(now + delay, deadline_));
}

void acquire_machine::listen() {
  if (listening_ || single_round_ || !home_.announces_releases()) return;
  listening_ = true;
  listened_ = lease_->resource();
  ask(acquire_action::kind::listen);
}

void acquire_machine::stop_listening() {
  if (!listening_) return;
  listening_ = false;
  ask(acquire_action::kind::stop_listening);
}

void acquire_machine::succeed(steady_clock::time_point valid_until) {
  stage_ = stage::finished;
  arm_timer(std::nullopt);
  stop_listening();
  resource_queue* const queue = queue_of_own();
  const boost::container::small_vector<resource_queue*, 1> held_queues(self_.queues().begin(),
                                                                       self_.queues().end());
  home_.queues().hold_in(lease_->local_hold, held_queues);
  home_.queues().leave(self_, strategy_->queue_keys(), false);
  const bool next_may_start = strategy_->hold(*queue, *lease_);
  for (auto other = held_queues.begin() + 1; other != held_queues.end(); ++other)
    strategy_->hold(**other, *lease_);
  acquired_ = true;
  lease_->held_with({.started = round_->start(),
                     .valid_until = valid_until,
                     .contended = rounds_ > 1 || competing_,
                     .granted_nodes = round_->votes().yes_count()});
  note_if_degraded();
  complete(error_code{});
  if (next_may_start) ask({.what = acquire_action::kind::start_next_waiter, .queue = queue});
}

void acquire_machine::finish(error_code ec) {
  send_deferred_cleanups();
  if (strategy_->marks_may_stand()) drop_marks();
  stage_ = stage::finished;
  arm_timer(std::nullopt);
  stop_listening();
  // Never queued: nothing to leave.
  if (!self_.queues().empty()) ask(acquire_action::kind::leave_queues);
  complete(ec);
}

void acquire_machine::complete(error_code ec) {
  stage_ = stage::finished;
  ask({.what = acquire_action::kind::complete, .code = ec});
}

void acquire_machine::report_to(observer& watcher, error_code ec,
                                steady_clock::time_point now) const {
  std::size_t granted = 0;
  if (round_) granted = ec ? round_->votes().yes_count() : lease_->granted_nodes();
  call_observer(watcher, home_.executor(), &observer::on_acquire,
                acquire_event{.resource = strategy_->name(),
                              .error = ec,
                              .took = now - started_,
                              .rounds = rounds_,
                              .granted_nodes = granted});
}

bool acquire_machine::held_here() const {
  return std::any_of(self_.queues().begin(), self_.queues().end(), [](const resource_queue* queue) {
    return queue->holder != nullptr || !queue->readers.empty();
  });
}

}  // namespace redlock::detail
