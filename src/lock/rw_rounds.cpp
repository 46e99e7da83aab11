#include "lock/rw_rounds.hpp"

#include "lock/key_names.hpp"
#include "lock/lease_state.hpp"
#include "lock/local_queues.hpp"
#include "lock/scripts.hpp"
#include "resp/script.hpp"
#include "text.hpp"
#include "unsafe_switches.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>

namespace redlock::detail {

rw_rounds::rw_rounds(std::string name, side which, std::string mark_id)
    : name_(std::move(name)),
      which_(which),
      mark_id_(std::move(mark_id)),
      writer_key_(rw_writer_key(name_)),
      readers_key_(rw_readers_key(name_)),
      mark_key_(rw_mark_key(name_)),
      counter_key_(fencing_counter_key(name_)),
      queue_key_(rw_queue_key(name_)) {}

std::string rw_rounds::subject() const {
  return fmt::format("{} (to {})", quoted_resource(name_), which_ == side::read ? "read" : "write");
}

std::string rw_rounds::problem(std::size_t) const {
  if (!name_.empty()) return {};
  return "redlock: cannot acquire a read-write lock: its name is empty";
}

std::string rw_rounds::contended_here(const resource_queue* queue, bool waiter_goes_first) const {
  if (queue == nullptr) return {};
  // A try never goes ahead of this client's waiters; a reader shares with its readers.
  const bool busy = queue->holder != nullptr || waiter_goes_first ||
                    (which_ == side::write && !queue->readers.empty());
  if (!busy) return {};
  return fmt::format("redlock: {} is held or awaited by another lease of this client", subject());
}

void rw_rounds::join(resource_queue& queue) {
  queue.shared = true;
}

std::string rw_rounds::queued_too_long(std::chrono::milliseconds waited, bool) const {
  return fmt::format(
      "redlock: {} still held or awaited by another lease of this client after {} ms", subject(),
      waited.count());
}

std::optional<round_strategy::round_request> rw_rounds::next_round(const round_inputs& in,
                                                                   std::minstd_rand&) {
  ttl_ = in.ttl;
  holders_.open_round(in.nodes);
  marked_.assign(in.nodes, false);
  const std::string ttl = std::to_string(in.ttl.count());
  const std::string_view keys[] = {writer_key_, readers_key_, mark_key_, counter_key_};
  const std::string_view args[] = {in.token, ttl, in.fencing ? "1" : "0", mark_id_};
  const auto used_keys = std::span(keys, in.fencing ? 4 : 3);
  if (which_ == side::read) {
    return round_request{
        .form = in.fencing ? set_form::fenced_read : set_form::read,
        .kind = lock_request::read_set,
        .key = readers_key_,
        .shared = std::make_shared<const std::string>(
            encode_evalsha(rw_read_acquire_script(), used_keys, std::span(args, 3))),
    };
  }
  marks_may_stand_ = true;
  return round_request{
      .form = in.fencing ? set_form::fenced_write : set_form::write,
      .kind = lock_request::write_set,
      .key = writer_key_,
      .shared = std::make_shared<const std::string>(
          encode_evalsha(rw_write_acquire_script(), used_keys, args)),
  };
}

void rw_rounds::record(std::size_t node, const set_answer& answer, steady_clock::time_point now) {
  holders_.record(node, answer, now);
  if (answer.marked && node < marked_.size()) {
    marked_[node] = true;
    marks_seen_ = true;
  }
}

void rw_rounds::learn(const node_answers& answers, std::size_t quorum, steady_clock::time_point now,
                      double drift_factor) {
  holders_.learn(answers, quorum, drift_factor);
  if (which_ == side::read) return;
  const auto marks = static_cast<std::size_t>(std::count(marked_.begin(), marked_.end(), true));
  if (marks >= quorum) {
    // Renewed well within their TTL, which runs from this round's scripts on.
    renew_marks_by_ = now + ttl_ / 3;
  } else {
    renew_marks_by_.reset();
    marks_to_drop_ = marks_seen_;
  }
}

bool rw_rounds::late_refusal(std::size_t node, const set_answer& answer,
                             steady_clock::time_point now, double drift_factor, bool watching) {
  // A late mark counts for nothing now (the round was decided without it) but must still be
  // deleted when the acquire ends.
  if (answer.marked && node < marked_.size()) marks_seen_ = true;
  return holders_.late_refusal(node, answer, now, drift_factor, watching);
}

void rw_rounds::forget_holder(std::size_t, std::size_t node) {
  holders_.watch().released(node);
}

void rw_rounds::held_until(std::size_t nodes, std::size_t quorum,
                           steady_clock::time_point key_gone_by) {
  holders_.watch().reset_all_held(nodes, quorum, key_gone_by);
}

std::optional<steady_clock::time_point> rw_rounds::free_by() const {
  const auto free = holders_.watch().free_by();
  if (!renew_marks_by_) return free;
  return free ? std::min(*free, *renew_marks_by_) : *renew_marks_by_;
}

std::string rw_rounds::keys_of_round(bool fencing) const {
  if (!fencing) return quoted_keys({writer_key_, readers_key_, mark_key_});
  return quoted_keys({writer_key_, readers_key_, mark_key_, counter_key_});
}

bool rw_rounds::keys_in_one_slot(bool) const {
  return keys_share_hash_slot(name_);
}

bool rw_rounds::hold(resource_queue& queue, lease_state& lease) {
  if (which_ == side::read) {
    lease.hold_as_reader(queue_key_);
    queue.readers.push_back(&lease.local_hold);
    return true;  // the next waiter may be a reader too
  }
  lease.hold_as_writer(queue_key_, mark_key_, mark_id_);
  queue.holder = &lease.local_hold;
  return false;
}

hold_keys rw_rounds::round_hold(std::string_view key, bool with_mark) const {
  if (which_ == side::read) {
    return hold_keys{
        .kind = hold_kind::reader, .key = key, .mark = {}, .mark_id = {}, .message = queue_key_};
  }
  return hold_keys{.kind = hold_kind::writer,
                   .key = key,
                   .mark = mark_key_,
                   .mark_id = with_mark ? std::string_view(mark_id_) : std::string_view(),
                   .message = queue_key_};
}

bool rw_rounds::take_marks_to_drop() {
  if (!marks_to_drop_) return false;
  marks_to_drop_ = false;
  marks_seen_ = false;
  marks_may_stand_ = false;
  return true;
}

std::vector<round_strategy::fenced_key> rw_rounds::fenced_keys() const {
  if (which_ == side::read) return {{readers_key_, counter_key_, true}};
  if (has_defect(known_defect::rw_fence_wrong_counter)) {  // unsafe: tests only
    return {{writer_key_, fencing_counter_key(writer_key_)}};
  }
  return {{writer_key_, counter_key_}};
}

}  // namespace redlock::detail
