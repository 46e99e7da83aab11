#ifndef REDLOCK_LOCK_SLOT_ROUNDS_HPP
#define REDLOCK_LOCK_SLOT_ROUNDS_HPP

#include "algo/slot_watch.hpp"
#include "lock/key_names.hpp"
#include "lock/round_strategy.hpp"
#include "lock/scripts.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redlock::detail {

// A semaphore permit's rounds: each tries one of the semaphore's `permits` slot locks, through
// semaphore_acquire_script (with fencing, its variant that also increments the tried slot's
// counter where it grants). A slot lease is a lock lease of the slot's key: the round's key is the
// tried slot's, and everything after the acquire (renewal, loss, release, fencing with the slot's
// own counter) is the lock's.
//
// A round tries a slot that no lease of this client holds, drawn as slot_watch::choose says
// (before the first refusal: any of those). When the last refusals show every slot held, a random
// one is tried anyway: the wait before this round was bounded by the backoff or the holders' TTLs,
// and a round is how to look again. A refusal carries every slot's PTTL on that node, so one
// refused round tells which slots may be free on a quorum.
//
// A try (single round) tries each slot once at most, and goes on while some slot it has not tried
// is not known to be held on a quorum (a node that granted the tried slot said nothing of the
// others): `permits` rounds at most, and `contended` means every slot was refused or seen held.
class slot_rounds final : public round_strategy {
 public:
  slot_rounds(std::string name, std::size_t permits, bool single_round);

  // The record of the number of permits on every node, extended with every slot lease so that it
  // lives as long as the permits are held (lease_state::companion_key).
  const std::string& permits_key() const noexcept { return permits_key_; }

  // The key of slot 0, the lease's resource until the first round tries one.
  const std::string& first_slot_key() const noexcept { return first_slot_key_; }

  const std::string& queue_key() const override { return queue_key_; }
  const std::string& name() const override { return name_; }
  std::string subject() const override;
  std::string problem(std::size_t max_reply_memory) const override;
  std::string contended_here(const resource_queue* queue, bool waiter_goes_first) const override;
  void join(resource_queue& queue) override;
  std::string queued_too_long(std::chrono::milliseconds waited, bool held_here) const override;

  std::optional<round_request> next_round(const round_inputs& in,
                                          std::minstd_rand& random) override;
  std::string nothing_to_try() const override;
  void record(std::size_t node, const set_answer& answer, steady_clock::time_point now) override;
  std::string lasting_problem(const node_facts& nodes) const override;
  bool another_try_may_win(std::minstd_rand& random) const override;
  void learn(const node_answers& answers, std::size_t quorum, steady_clock::time_point now,
             double drift_factor) override;
  bool late_refusal(std::size_t node, const set_answer& answer, steady_clock::time_point now,
                    double drift_factor, bool watching) override;
  void forget_holder(std::size_t slot, std::size_t node) override { watch_.released(slot, node); }
  // A semaphore's releases are never handed off (local_queues), so its acquires never compete.
  void held_until(std::size_t, std::size_t, steady_clock::time_point) override {}
  bool may_be_free() const override;
  std::optional<steady_clock::time_point> free_by() const override;
  std::string keys_of_round(bool fencing) const override;
  bool keys_in_one_slot(bool) const override { return keys_share_hash_slot(name_); }
  bool hold(resource_queue& queue, lease_state& lease) override;
  // Each slot has a counter of its own: the tried slot's.
  std::vector<fenced_key> fenced_keys() const override {
    return {{slot_keys_[tried_], fencing_counter_key(slot_keys_[tried_])}};
  }

 private:
  // The slots not to try: those this client's leases hold, and in a try those it has tried.
  std::vector<bool> held_here() const;

  std::string name_;
  std::size_t count_;
  bool single_round_;
  std::string queue_key_;  // permit_queue_key(name); slot i's key is this + i
  std::string permits_key_;
  std::string first_slot_key_;
  const resource_queue* queue_ = nullptr;  // the acquire's, once it joined
  slot_watch watch_;
  std::size_t tried_ = 0;
  std::vector<slot_watch::slot_ttls> reports_;  // the current round's refusals, by node
  std::vector<bool> tried_in_this_try_;
  std::vector<std::string> slot_keys_;       // by slot, made once: every round names them all
  std::vector<std::string_view> key_views_;  // of slot_keys_ and permits_key_
  std::string permits_text_;                 // `count_` in decimal
  // A node whose permits record disagrees with `count_`, and the number it records.
  std::optional<std::pair<std::size_t, std::size_t>> disagreement_;
};

}  // namespace redlock::detail

#endif
