#include "lock/slot_rounds.hpp"

#include "config/options_check.hpp"
#include "lock/key_names.hpp"
#include "lock/lease_state.hpp"
#include "lock/local_queues.hpp"
#include "lock/scripts.hpp"
#include "resp/script.hpp"
#include "text.hpp"

#include <fmt/format.h>

namespace redlock::detail {

slot_rounds::slot_rounds(std::string name, std::size_t permits, bool single_round)
    : name_(std::move(name)),
      count_(permits),
      single_round_(single_round),
      queue_key_(permit_queue_key(name_)),
      permits_key_(semaphore_permits_key(name_)),
      first_slot_key_(queue_key_ + "0") {
  // A count out of bounds is refused by problem() before any round.
  if (permits > most_permits) return;
  watch_.reset_unknown(permits);
  tried_in_this_try_.assign(permits, false);
  for (std::size_t slot = 0; slot < permits; ++slot)
    slot_keys_.push_back(queue_key_ + std::to_string(slot));
  key_views_.assign(slot_keys_.begin(), slot_keys_.end());
  key_views_.push_back(permits_key_);
  permits_text_ = std::to_string(permits);
}

std::string slot_rounds::subject() const {
  return fmt::format("semaphore {} (slot {} of {})", quoted_resource(name_), tried_, count_);
}

std::string slot_rounds::problem(std::size_t max_reply_memory) const {
  std::string problem;
  if (name_.empty()) {
    problem = "its name is empty";
  } else if (count_ == 0 || count_ > most_permits) {
    problem = fmt::format("permits must be between 1 and {}, not {}", most_permits, count_);
  } else if (const std::size_t refusal_bytes =
                 count_ * semaphore_refusal_bytes_per_permit + 256;  // every slot's PTTL as text
             refusal_bytes > max_reply_memory) {
    problem = fmt::format(
        "a refusal of {} permits takes up to {} bytes, more than "
        "client_options::replies.max_reply_memory ({})",
        count_, refusal_bytes, max_reply_memory);
  }
  if (problem.empty()) return problem;
  return fmt::format("redlock: cannot acquire a permit of semaphore {}: {}", quoted_resource(name_),
                     problem);
}

std::string slot_rounds::contended_here(const resource_queue* queue, bool waiter_goes_first) const {
  // This client's own leases do not make the semaphore busy: a try skips the slots they hold.
  if (queue == nullptr || !waiter_goes_first) return {};
  return fmt::format("redlock: another acquire of this client waits for a permit of {}",
                     quoted_resource(name_));
}

void slot_rounds::join(resource_queue& queue) {
  queue.semaphore = true;
  if (queue.slot_holders.size() < count_) queue.slot_holders.resize(count_, nullptr);
  queue_ = &queue;
}

std::string slot_rounds::queued_too_long(std::chrono::milliseconds waited, bool) const {
  return fmt::format(
      "redlock: no permit of semaphore {} for this acquire after {} ms: this client's other "
      "leases and acquires had them all",
      quoted_resource(name_), waited.count());
}

std::optional<round_strategy::round_request> slot_rounds::next_round(const round_inputs& in,
                                                                     std::minstd_rand& random) {
  const auto held = held_here();
  auto slot = watch_.choose(held, random);
  if (!slot) {
    slot_watch any;
    any.reset_unknown(count_);
    slot = any.choose(held, random);
  }
  // Every slot is held by this client (only one of its releases can help), or in a try was tried
  // already (not reached: a try goes on only while an untried slot may be free).
  if (!slot) return std::nullopt;
  tried_ = *slot;
  if (single_round_) tried_in_this_try_[*slot] = true;
  reports_.assign(in.nodes, {});
  disagreement_.reset();

  // Every slot's key and the permits record, then with fencing the tried slot's counter (only
  // for this round).
  const std::string& key = slot_keys_[*slot];
  const std::string counter = in.fencing ? fencing_counter_key(key) : "";
  if (in.fencing) key_views_.push_back(counter);
  const std::string tried = std::to_string(*slot + 1);
  const std::string ttl = std::to_string(in.ttl.count());
  std::vector<std::string_view> args = {tried, in.token, ttl, permits_text_};
  if (in.fencing) args.push_back("1");
  auto payload = std::make_shared<const std::string>(
      encode_evalsha(semaphore_acquire_script(), key_views_, args));
  if (in.fencing) key_views_.pop_back();
  return round_request{.form = in.fencing ? set_form::fenced_slot : set_form::slot,
                       .kind = lock_request::slot_set,
                       .key = key,
                       .shared = std::move(payload)};
}

std::string slot_rounds::nothing_to_try() const {
  return fmt::format("redlock: every one of the {} permits of semaphore {} is held by this client",
                     count_, quoted_resource(name_));
}

void slot_rounds::record(std::size_t node, const set_answer& answer, steady_clock::time_point) {
  if (answer.what == node_answer::kind::no && node < reports_.size())
    reports_[node] = answer.slot_ttls;
  if (answer.recorded_permits && !disagreement_) disagreement_ = {node, *answer.recorded_permits};
}

std::string slot_rounds::lasting_problem(const node_facts& nodes) const {
  if (!disagreement_) return {};
  const auto [node, recorded] = *disagreement_;
  return fmt::format(
      "redlock: cannot acquire a permit of semaphore {}: {} records {} permits for it while "
      "this acquire counts {}; every user of one semaphore must give the same number of "
      "permits (the record expires once no permit is held)",
      quoted_resource(name_), nodes.address(node), recorded, count_);
}

bool slot_rounds::another_try_may_win(std::minstd_rand& random) const {
  return single_round_ && watch_.choose(held_here(), random).has_value();
}

void slot_rounds::learn(const node_answers& answers, std::size_t quorum,
                        steady_clock::time_point now, double drift_factor) {
  watch_.reset(tried_, answers, reports_, quorum, now, drift_factor);
}

bool slot_rounds::late_refusal(std::size_t node, const set_answer& answer,
                               steady_clock::time_point now, double drift_factor, bool watching) {
  if (answer.what != node_answer::kind::no || !watching) return false;
  watch_.report(node, answer.slot_ttls, now, drift_factor);
  return true;
}

bool slot_rounds::may_be_free() const {
  const auto held = held_here();
  for (std::size_t slot = 0; slot < held.size(); ++slot) {
    if (!held[slot] && watch_.may_be_free(slot)) return true;
  }
  return false;
}

std::optional<steady_clock::time_point> slot_rounds::free_by() const {
  return watch_.free_by(held_here());
}

std::string slot_rounds::keys_of_round(bool fencing) const {
  auto keys = fmt::format("{} .. {}", quoted_resource(slot_keys_.front()),
                          quoted_resource(slot_keys_.back()));
  keys += ", " + quoted_resource(permits_key_);
  if (fencing) keys += ", " + quoted_resource(fencing_counter_key(slot_keys_[tried_]));
  return keys;
}

bool slot_rounds::hold(resource_queue& queue, lease_state& lease) {
  queue.slot_holders[tried_] = &lease.local_hold;
  return true;
}

std::vector<bool> slot_rounds::held_here() const {
  std::vector<bool> held(count_, false);
  for (std::size_t slot = 0; slot < held.size(); ++slot) {
    const bool ours = queue_ != nullptr && slot < queue_->slot_holders.size() &&
                      queue_->slot_holders[slot] != nullptr;
    held[slot] = ours || (slot < tried_in_this_try_.size() && tried_in_this_try_[slot]);
  }
  return held;
}

}  // namespace redlock::detail
