#ifndef REDLOCK_OPS_FENCE_WRITE_BACK_HPP
#define REDLOCK_OPS_FENCE_WRITE_BACK_HPP

#include "algo/node_answer.hpp"
#include "algo/replies.hpp"
#include "lock_space.hpp"
#include "ops/vote.hpp"
#include "scripts.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace redlock::detail {

// The fencing write-back of a held round: fence_write_back_script on the granting nodes whose
// counter is below the lease's fencing token, raising it to the token. A granting node whose own
// increment already reached the token needs none (its counter was the token while our key lived
// there, and counters never go down): it counts as confirmed from the start, so when every grant
// returned the same counter, as on an uncontended resource, nothing is sent at all. The round's
// grants that arrive after its decision join in the same way (late_answer), so that a quorum can
// be made of the first to confirm among all granting nodes, not only of those that decided the
// round. Confirmed once a quorum of all the client's nodes is; failed as soon as too few nodes are
// left to make one. A sink of its own, kept alive by its requests and by the acquire.
class fence_write_back final : public ballot_sink,
                               public std::enable_shared_from_this<fence_write_back> {
 public:
  using on_decided = std::function<void(bool confirmed, const node_answers& answers)>;

  fence_write_back(std::shared_ptr<lock_space> space, on_decided done)
      : ballot_sink(space->nodes().size()),
        space_(std::move(space)),
        done_(std::move(done)),
        answers_(space_->nodes().size()) {}

  // `counters[i]`: node i's counter as its grant returned it; unset where it did not grant (yet:
  // `still_pending` nodes may grant later and are then given to late_answer).
  void send(const std::string& resource, const std::string& token, std::uint64_t fence,
            const std::vector<std::optional<std::uint64_t>>& counters, std::size_t still_pending) {
    fence_ = fence;
    pending_ = still_pending;
    const std::string counter = fencing_counter_key(resource);
    const std::string fence_text = std::to_string(fence);
    const std::string_view keys[] = {resource, counter};
    const std::string_view args[] = {token, fence_text};
    payload_ = encode_evalsha(fence_write_back_script(), keys, args);
    first_tag_ = open_ballot();
    std::vector<bool> targets(counters.size(), false);
    for (std::size_t i = 0; i < counters.size(); ++i) {
      answers_[i] = not_asked("it did not grant");
      if (counters[i]) targets[i] = needs_raising(i, *counters[i]);
    }
    if (decide() || awaited_ == 0) return;
    space_->nodes().send(payload_, *this, first_tag_, lock_request::fence_write_back, &targets);
  }

  // A node's answer to the round, after its decision: `counter` if it granted.
  void late_answer(std::size_t node, std::optional<std::uint64_t> counter) {
    if (decided_) return;
    --pending_;
    if (counter && needs_raising(node, *counter)) {
      std::vector<bool> only(answers_.size(), false);
      only[node] = true;
      space_->nodes().send(payload_, *this, first_tag_, lock_request::fence_write_back, &only);
    }
    decide();
  }

 private:
  static node_answer not_asked(const char* why) {
    node_answer answer;
    answer.what = node_answer::kind::failed;
    answer.unsent = true;
    answer.detail = fmt::format("not asked: {}", why);
    return answer;
  }

  // For a granting node: counts it as confirmed if its counter is at the token, else as awaited
  // and returns true (a request is to be sent to it).
  bool needs_raising(std::size_t node, std::uint64_t counter) {
    if (counter >= fence_) {
      answers_[node].what = node_answer::kind::yes;
      answers_[node].detail = "its grant's increment reached the token";
      ++confirmed_;
      return false;
    }
    answers_[node] = node_answer{};  // pending
    ++awaited_;
    return true;
  }

  // Calls done_ once the outcome is certain; true once it has been.
  bool decide() {
    if (decided_) return true;
    const std::size_t quorum = space_->nodes().quorum();
    if (confirmed_ < quorum && confirmed_ + awaited_ + pending_ >= quorum) return false;
    decided_ = true;
    done_(confirmed_ >= quorum, answers_);
    return true;
  }

  std::shared_ptr<void> owner() override { return shared_from_this(); }

  void on_answer(std::size_t node, boost::system::error_code ec,
                 const resp::value& reply) override {
    std::string detail;
    const auto what = classify_script_reply(ec, reply, detail);
    answers_[node] = make_answer(what, ec, reply, std::move(detail));
    --awaited_;
    if (what == node_answer::kind::yes) ++confirmed_;
    decide();
  }

  std::shared_ptr<lock_space> space_;
  on_decided done_;
  node_answers answers_;
  std::string payload_;  // read by the connections until every request is answered
  std::size_t first_tag_ = 0;
  std::uint64_t fence_ = 0;
  std::size_t awaited_ = 0;    // write-backs sent and not answered
  std::size_t pending_ = 0;    // nodes whose answer to the round has not arrived
  std::size_t confirmed_ = 0;  // at the token: by their grant, or by the write-back
  bool decided_ = false;
};

}  // namespace redlock::detail

#endif
