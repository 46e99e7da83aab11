#ifndef REDLOCK_LOCK_RW_ROUNDS_HPP
#define REDLOCK_LOCK_RW_ROUNDS_HPP

#include "lock/holder_ttls.hpp"
#include "lock/round_strategy.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace redlock::detail {

// A read-write lock's rounds, a reader's or a writer's: every round runs rw_read_acquire_script or
// rw_write_acquire_script (scripts.hpp) on every node, which grants, or refuses with the PTTL of
// what refused it. Quorum, validity, cleanup and waiting are the mutex's (acquire_driver): a reader
// and a writer, or two writers, cannot both win a quorum, because the two quorums share a node
// whose script refused one of them.
//
// A writer refused by live readers marks the lock on that node with its mark id (one per acquire;
// every round has a token of its own), and new readers are refused there while the mark lives.
// Marks only keep readers out if they stand on a quorum: then no reader can win a majority, and
// once the readers are gone the writer wins (other writers are refused by its marks as well). So:
//  - After a round refused with marks on a quorum, the writer keeps them and waits, and renews
//    them with a round at least every ttl/3 (free_by), as long as it waits.
//  - After a round with marks on fewer nodes (two writers split the nodes' marks, or nodes
//    failed), it deletes its marks on every node and backs off like a split vote: marks that no
//    quorum carries would only hold readers back and leave the writers deadlocked.
//  - An acquire that ends without the lock deletes its marks (acquire_driver::finish) whenever a
//    round was sent since its marks were last deleted: a round's answer may come after the end,
//    or never (a timeout), or after the next round opened, and may have set a mark all the same.
//    The deletion follows every earlier request of the acquire on each node, so it finds every
//    mark they set. A writer's lease deletes those left on nodes that did not grant it when it
//    releases.
// Fairness given: a writer whose marks stand on a quorum is not overtaken by readers that arrive
// after them; readers already holding keep their holds until they release or expire. Among
// writers, the one whose marks stand goes first; others back off.
class rw_rounds final : public round_strategy {
 public:
  enum class side : std::uint8_t { read, write };

  // `mark_id`: a writer's, unique (a token); unused by a reader.
  rw_rounds(std::string name, side which, std::string mark_id);

  // The key this acquire's rounds set: the readers' set, or the writer's key.
  const std::string& round_key() const noexcept {
    return which_ == side::read ? readers_key_ : writer_key_;
  }

  const std::string& queue_key() const override { return queue_key_; }
  const std::string& name() const override { return name_; }
  std::string subject() const override;
  std::string problem(std::size_t max_reply_memory) const override;
  std::string contended_here(const resource_queue* queue, bool waiter_goes_first) const override;
  void join(resource_queue& queue) override;
  std::string queued_too_long(std::chrono::milliseconds waited, bool held_here) const override;

  std::optional<round_request> next_round(const round_inputs& in,
                                          std::minstd_rand& random) override;
  std::string nothing_to_try() const override { return {}; }  // its keys can always be tried
  void record(std::size_t node, const set_answer& answer, steady_clock::time_point now) override;
  std::string lasting_problem(const node_facts&) const override { return {}; }
  bool another_try_may_win(std::minstd_rand&) const override { return false; }
  void learn(const node_answers& answers, std::size_t quorum, steady_clock::time_point now,
             double drift_factor) override;
  bool late_refusal(std::size_t node, const set_answer& answer, steady_clock::time_point now,
                    double drift_factor, bool watching) override;
  void forget_holder(std::size_t slot, std::size_t node) override;
  void held_until(std::size_t nodes, std::size_t quorum,
                  steady_clock::time_point key_gone_by) override;
  bool may_be_free() const override { return holders_.watch().may_be_free(); }
  std::optional<steady_clock::time_point> free_by() const override;
  std::string keys_of_round(bool fencing) const override;
  bool keys_in_one_slot(bool fencing) const override;
  bool hold(resource_queue& queue, lease_state& lease) override;

  hold_keys round_hold(std::string_view key, bool with_mark) const override;
  bool take_marks_to_drop() override;
  bool marks_may_stand() const override { return marks_may_stand_; }
  void mark_seen() override { marks_seen_ = marks_may_stand_ = true; }
  // A writer fences the lock's one counter, `{NAME}:fence`, which its grants and every reader
  // read; never one named after the writer's key. A reader's token is read, never written back.
  std::vector<fenced_key> fenced_keys() const override;

 private:
  std::string name_;
  side which_;
  std::string mark_id_;
  std::string writer_key_;
  std::string readers_key_;
  std::string mark_key_;
  std::string counter_key_;
  std::string queue_key_;
  std::chrono::milliseconds ttl_{0};
  // The current round's refusals: the PTTL of what refused, and whether it marked the node.
  holder_ttls holders_;
  std::vector<bool> marked_;
  // Set after learn while the last round's marks stand on a quorum: when they must be renewed.
  std::optional<steady_clock::time_point> renew_marks_by_;
  bool marks_to_drop_ = false;
  // Some answer of this acquire set a mark since its marks were last deleted.
  bool marks_seen_ = false;
  // A writer's round was sent since its marks were last deleted: a mark may stand.
  bool marks_may_stand_ = false;
};

}  // namespace redlock::detail

#endif
