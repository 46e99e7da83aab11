#include "clock.hpp"
#include "ops/acquire_op.hpp"

#include <algorithm>

namespace redlock::detail {

bool acquire_op::learn_from_round(steady_clock::time_point now) {
  strategy_->learn(round_->answers(), nodes().quorum(), now, space_->options().drift_factor);
  if (strategy_->take_marks_to_drop()) drop_marks();
  watch_round_ = rounds_;
  return apply_heard();
}

bool acquire_op::round_in_flight() const noexcept {
  return stage_ == stage::in_round || stage_ == stage::fencing;
}

bool acquire_op::apply_heard() {
  return heard_.apply([this](std::size_t slot, std::size_t node) { forget_holder(slot, node); },
                      [this] { return may_be_free(); });
}

void acquire_op::note_late_refusal(std::size_t node, const set_answer& answer,
                                   steady_clock::time_point now) {
  // Sleeping on what this very round taught, and not already woken.
  const bool watching = stage_ == stage::sleeping && !woken_ && watch_round_ == rounds_;
  if (!strategy_->late_refusal(node, answer, now, space_->options().drift_factor, watching)) return;
  if (may_be_free()) return wake_soon();
  plan_wake(now);
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
  const sleep_facts facts{
      .free_by = strategy_->free_by(),
      .may_be_free = may_be_free(),
      .announcements_cover = listener != nullptr && listener->covers(lease_->resource()),
      .backoff_until = backoff_until_};
  arm_timer(wake_at(facts, now, deadline_));
}

void acquire_op::wake_soon() {
  woken_ = true;
  const auto delay =
      wake_jitter(space_->round_trip().bounded(), competitions_lost(rounds_), space_->random());
  arm_timer(until_deadline(lock_clock::now() + delay, deadline_));
}

void acquire_op::wake_after_news_heard_in_round() {
  woken_ = true;
  const auto delay =
      collision_delay(space_->round_trip().bounded(), wakes_after_news_heard_in_round_++,
                      retry_.ceiling(), space_->random());
  arm_timer(until_deadline(lock_clock::now() + delay, deadline_));
}

void acquire_op::listen() {
  if (listening_ || single_round_) return;
  if (auto* listener = space_->listener()) {
    listening_ = true;
    listened_ = lease_->resource();
    listener->retain(listened_);
  }
}

void acquire_op::stop_listening() {
  if (!listening_) return;
  listening_ = false;
  if (auto* listener = space_->listener()) listener->release(listened_);
}

}  // namespace redlock::detail
