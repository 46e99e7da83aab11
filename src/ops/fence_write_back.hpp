#ifndef REDLOCK_OPS_FENCE_WRITE_BACK_HPP
#define REDLOCK_OPS_FENCE_WRITE_BACK_HPP

#include "algo/fence_quorum.hpp"
#include "algo/node_answer.hpp"
#include "lock_space.hpp"
#include "ops/vote.hpp"

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace redlock::detail {

// The fencing write-back of a held round: fence_write_back_script on the granting nodes whose
// counter is below the lease's fencing token, raising it to the token; which nodes, and when a
// quorum is at the token, is fence_quorum's. The round's grants that arrive after its decision
// join (late_answer). A sink of its own, kept alive by its requests and by the acquire.
class fence_write_back final : public fan_out_sink,
                               public std::enable_shared_from_this<fence_write_back> {
 public:
  // Called once, when the outcome is certain: whether a quorum of all nodes is at the token, and
  // every node's answer for diagnostics.
  using on_decided = std::function<void(bool confirmed, const node_answers& answers)>;

  fence_write_back(std::shared_ptr<lock_space> space, on_decided done);

  // Raises `write.counter` to `write.fence` where `write.key` still holds `token`
  // (round_strategy::fenced_key). `write.counters[i]`: node i's counter as its grant returned it;
  // unset where it did not grant (yet: `still_pending` nodes may grant later and are then given
  // to late_answer).
  void send(const fence_write& write, const std::string& token,
            const std::vector<bool>& still_pending);

  // A node's answer to the round, after its decision: `counter` if it granted.
  void late_answer(std::size_t node, std::optional<std::uint64_t> counter);

 private:
  std::shared_ptr<void> owner() override { return shared_from_this(); }
  void on_answer(std::size_t node, const boost::system::error_code& ec,
                 const resp::value& reply) override;

  // Sends the write-back to the nodes marked in `targets`.
  void write_to(const std::vector<bool>& targets);
  // The answer shown for `node` as its state in the quorum now is.
  void show_state(std::size_t node);
  void report_if_decided();

  std::shared_ptr<lock_space> space_;
  on_decided done_;
  fence_quorum quorum_;
  node_answers answers_;
  std::string payload_;  // read by the connections until every request is answered
  std::string key_;      // the lock key, which routes the requests
  std::size_t first_tag_ = 0;
  bool reported_ = false;
};

// The write-backs of one held round, one per fenced resource (acquire_machine::fence_plan).
class fence_write_backs {
 public:
  // Called once per resource (by index into the plan), when its write-back is decided.
  using on_decided =
      std::function<void(std::size_t resource, bool confirmed, const node_answers& answers)>;

  // Sends the write-back of each resource of `plan` with the round's `token`, `still_pending`
  // marking the nodes whose answer to the round was still to come at its decision, until
  // `wanted()` turns false (an outcome may end the acquire).
  void start(const std::shared_ptr<lock_space>& space, const std::vector<fence_write>& plan,
             const std::string& token, const std::vector<bool>& still_pending,
             const on_decided& done, const std::function<bool()>& wanted);

  // A grant of the round after its decision, with its counter by resource.
  void late_grant(const struct late_grant& grant);

 private:
  std::vector<std::shared_ptr<fence_write_back>> each_;
};

}  // namespace redlock::detail

#endif
