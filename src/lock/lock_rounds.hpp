#ifndef REDLOCK_LOCK_LOCK_ROUNDS_HPP
#define REDLOCK_LOCK_LOCK_ROUNDS_HPP

#include "lock/holder_ttls.hpp"
#include "lock/key_names.hpp"
#include "lock/round_strategy.hpp"
#include "lock/scripts.hpp"

#include <string>
#include <vector>

namespace redlock::detail {

// A lock's rounds: SET of the resource's key on every node.
//
// The first round of an uncontended lock, or of a local hand-off, sends a plain SET (no script to
// run). Every later round, and the first of an acquire that competes after a hand-off limit, sets
// the key through acquire_script, whose refusal carries the holder's PTTL: what a refusal needs to
// bound the wait, in one request per node. With fencing, every round (the first included) sets it
// through fenced_acquire_script, which increments the fencing counter where it grants and also
// answers a refusal with the PTTL; nothing can run between the grant and the increment.
//
// What is known of the holders is a holder_ttls.
class lock_rounds final : public ttl_watching_rounds {
 public:
  // `resource` is the name of the acquire's lease (lease_state::resource), which outlives the
  // strategy: a lock's rounds keep no copy of their own.
  explicit lock_rounds(const std::string& resource) : resource_(resource) {}
  lock_rounds(std::string&&) = delete;  // a temporary would not outlive the strategy

  const std::string& queue_key() const override { return resource_; }
  const std::string& name() const override { return resource_; }
  std::string subject() const override;
  std::string problem(std::size_t) const override { return {}; }
  std::string contended_here(const resource_queue* queue, bool waiter_goes_first) const override;
  void join(resource_queue&) override {}
  std::string queued_too_long(std::chrono::milliseconds waited, bool held_here) const override;

  std::optional<round_request> next_round(const round_inputs& in,
                                          std::minstd_rand& random) override;
  std::string nothing_to_try() const override { return {}; }  // a lock always has its key to try
  std::string lasting_problem(const node_facts&) const override { return {}; }
  bool another_try_may_win(std::minstd_rand&) const override { return false; }
  std::string keys_of_round(bool fencing) const override;
  bool keys_in_one_slot(bool fencing) const override {
    return !fencing || keys_share_hash_slot(resource_);
  }
  bool hold(resource_queue& queue, lease_state& lease) override;
  std::vector<fenced_key> fenced_keys() const override {
    return {{resource_, fencing_counter_key(resource_)}};
  }

 private:
  const std::string& resource_;
  // The first round's SET key token NX PX ttl. Requests of later rounds may still be queued with a
  // view of it: it is written once. Its buffer is recycled like the strategy (block_cache.hpp).
  std::basic_string<char, std::char_traits<char>, cached_allocator<char>> plain_set_;
};

}  // namespace redlock::detail

#endif
