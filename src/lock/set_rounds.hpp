#ifndef REDLOCK_LOCK_SET_ROUNDS_HPP
#define REDLOCK_LOCK_SET_ROUNDS_HPP

#include "lock/holder_ttls.hpp"
#include "lock/round_strategy.hpp"

#include <span>
#include <string>
#include <vector>

namespace redlock::detail {

// The rounds of a set of locks (client::async_acquire_all): multi_acquire_script on every node,
// which sets every resource's lock key there or none. A refusal carries the longest PTTL of the
// keys that block the set on that node: when the whole set is free there at the latest, which is
// what the wait needs. So what is known of the holders is a holder_ttls, as for one lock, and an
// announced release of any resource of the set counts as the set's (it may have freed the set
// there; a round that finds otherwise learns the PTTLs again).
//
// The acquire waits in the local queue of every resource of the set (round_strategy::queue_keys);
// see local_queues for the order that gives.
class set_rounds final : public ttl_watching_rounds {
 public:
  // `resources` as the caller gave them: made canonical by normalize_set; an invalid set is the
  // acquire's problem().
  explicit set_rounds(std::vector<std::string> resources);

  // The set, canonical (empty when it is invalid).
  const std::vector<std::string>& resources() const noexcept { return resources_; }

  const std::string& queue_key() const override { return resources_.front(); }
  std::span<const std::string> queue_keys() const override { return resources_; }
  const std::string& name() const override { return name_; }
  std::string subject() const override;
  std::string problem(std::size_t) const override;
  std::string contended_here(const resource_queue* queue, bool waiter_goes_first) const override;
  void join(resource_queue&) override {}
  std::string queued_too_long(std::chrono::milliseconds waited, bool held_here) const override;

  std::optional<round_request> next_round(const round_inputs& in,
                                          std::minstd_rand& random) override;
  std::string nothing_to_try() const override { return {}; }
  std::string lasting_problem(const node_facts&) const override { return {}; }
  bool another_try_may_win(std::minstd_rand&) const override { return false; }
  std::string keys_of_round(bool fencing) const override;
  bool keys_in_one_slot(bool fencing) const override;
  std::string cross_slot_problem(bool fencing) const override;
  bool hold(resource_queue& queue, lease_state& lease) override;
  hold_keys round_hold(std::string_view key, bool with_mark) const override;
  std::vector<fenced_key> fenced_keys() const override;

 private:
  std::string problem_;  // normalize_set's; before resources_, which it is made with
  std::vector<std::string> resources_;
  std::string name_;  // the resources, comma-separated: what events name
};

// A set as async_acquire_all takes it, made canonical: sorted, duplicates merged. Empty with
// `problem` set (for an invalid_argument) when the set is empty or has more than max_set_size
// resources after merging.
std::vector<std::string> normalize_set(std::vector<std::string> resources, std::string& problem);

}  // namespace redlock::detail

#endif
