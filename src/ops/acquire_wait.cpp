#include "ops/acquire_op.hpp"

#include <algorithm>

namespace redlock::detail {

bool acquire_op::may_be_free() const {
  if (!permits_) return watch_.may_be_free();
  const auto held = held_here();
  for (std::size_t slot = 0; slot < held.size(); ++slot) {
    if (!held[slot] && permits_->watch.may_be_free(slot)) return true;
  }
  return false;
}

std::optional<steady_clock::time_point> acquire_op::free_by() const {
  return permits_ ? permits_->watch.free_by(held_here()) : watch_.free_by();
}

bool acquire_op::learn_from_slot_round(steady_clock::time_point now) {
  auto& plan = *permits_;
  plan.watch.reset(plan.tried, round_->answers(), plan.reports, nodes().quorum(), now,
                   space_->options().drift_factor);
  watch_round_ = rounds_;
  return apply_heard();
}

bool acquire_op::round_in_flight() const noexcept {
  return stage_ == stage::in_round || stage_ == stage::fencing;
}

void acquire_op::forget_holder(std::size_t slot, std::size_t node) {
  if (permits_) {
    permits_->watch.released(slot, node);
  } else {
    watch_.released(node);
  }
}

bool acquire_op::apply_heard() {
  return heard_.apply([this](std::size_t slot, std::size_t node) { forget_holder(slot, node); },
                      [this] { return may_be_free(); });
}

void acquire_op::note_slot_report(std::size_t node, const slot_watch::slot_ttls& ttls,
                                  steady_clock::time_point now) {
  if (stage_ != stage::sleeping || woken_ || watch_round_ != rounds_) return;
  permits_->watch.report(node, ttls, now, space_->options().drift_factor);
  if (may_be_free()) return wake_soon();
  plan_wake(now);
}

void acquire_op::note_holder_ttl(std::size_t node, long long pttl_ms,
                                 steady_clock::time_point now) {
  holder_ttls_[node] = holder_ttl{pttl_ms, now};
  if (stage_ != stage::sleeping || woken_ || watch_round_ != rounds_) return;
  watch_.holder_ttl(node, pttl_ms, now, space_->options().drift_factor);
  if (may_be_free()) return wake_soon();
  plan_wake(now);
}

bool acquire_op::learn_from_round() {
  watch_.reset(round_->answers(), nodes().quorum());
  watch_round_ = rounds_;
  for (std::size_t i = 0; i < holder_ttls_.size(); ++i) {
    if (holder_ttls_[i] && round_->answers()[i].what == node_answer::kind::no) {
      watch_.holder_ttl(i, holder_ttls_[i]->pttl_ms, holder_ttls_[i]->at,
                        space_->options().drift_factor);
    }
  }
  return apply_heard();
}

void acquire_op::sleep(steady_clock::time_point now, bool due_now) {
  stage_ = stage::sleeping;
  woken_ = false;
  watch_round_ = rounds_;
  backoff_until_ = now + retry_.next(space_->random());
  if (due_now) return wake_after_news_heard_in_round();
  // A round lost without such news: no herd woke in step, so the collision window starts over.
  wakes_after_news_heard_in_round_ = 0;
  plan_wake(now);
}

void acquire_op::plan_wake(steady_clock::time_point now) {
  const auto* listener = space_->listener();
  const sleep_facts facts{.free_by = free_by(),
                          .may_be_free = may_be_free(),
                          .announcements_cover = listener != nullptr && listener->all_subscribed(),
                          .backoff_until = backoff_until_};
  arm_timer(wake_at(facts, now, deadline_));
}

void acquire_op::wake_soon() {
  woken_ = true;
  const auto delay =
      wake_jitter(space_->round_trip().bounded(), competitions_lost(rounds_), space_->random());
  arm_timer(until_deadline(steady_clock::now() + delay, deadline_));
}

void acquire_op::wake_after_news_heard_in_round() {
  woken_ = true;
  const auto delay =
      collision_delay(space_->round_trip().bounded(), wakes_after_news_heard_in_round_++,
                      retry_.ceiling(), space_->random());
  arm_timer(until_deadline(steady_clock::now() + delay, deadline_));
}

void acquire_op::listen() {
  if (listening_ || single_round_) return;
  if (auto* listener = space_->listener()) {
    listening_ = true;
    listener->retain();
  }
}

void acquire_op::stop_listening() {
  if (!listening_) return;
  listening_ = false;
  if (auto* listener = space_->listener()) listener->release();
}

}  // namespace redlock::detail
