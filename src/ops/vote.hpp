#ifndef REDLOCK_OPS_VOTE_HPP
#define REDLOCK_OPS_VOTE_HPP

#include "algo/node_answer.hpp"
#include "algo/quorum.hpp"
#include "algo/replies.hpp"
#include "lock_space.hpp"
#include "redlock/error.hpp"
#include "user_operation.hpp"

#include <boost/asio/cancellation_type.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace redlock::detail {

// The sink of one fan-out at a time: each fan-out opens a ballot, whose requests are tagged
// ballot * width + slot * nodes + node (width = nodes * slots), so that a late reply to an earlier
// ballot is told apart and dropped. Slot 0 is the vote itself; a sink may send further requests per
// node in the same ballot (slot 1, ...), whose replies go to on_other_answer.
//
// The derived operation is the reply sink itself, so a fan-out allocates nothing for its replies.
// It must be owned by a shared_ptr: while any request may still answer, the sink keeps its owner
// alive through owner().
class fan_out_sink : public reply_sink {
 public:
  void on_reply(std::size_t tag, const boost::system::error_code& ec,
                const resp::value& reply) final {
    const std::size_t width = nodes_ * slots_;
    const std::size_t within = tag % width;
    const std::size_t of_ballot = tag / width;
    if (of_ballot != ballot_) {  // a late answer to an earlier ballot
      if (within < nodes_) on_earlier_answer(of_ballot, within, ec, reply);
      return;
    }
    if (within < nodes_) return on_answer(within, ec, reply);
    on_other_answer(within / nodes_, within % nodes_, ec, reply);
  }

 protected:
  explicit fan_out_sink(std::size_t nodes, std::size_t slots = 1) : nodes_(nodes), slots_(slots) {}
  ~fan_out_sink() = default;

  // Starts a new ballot; replies of earlier ones go to on_earlier_answer from now on. Returns the
  // tag of node 0 in slot 0 for node_set::send; slot k's node 0 is that + k * nodes.
  std::size_t open_ballot() { return ++ballot_ * nodes_ * slots_; }
  // The current ballot's number (0 before the first).
  std::size_t ballot() const noexcept { return ballot_; }

  virtual std::shared_ptr<void> owner() = 0;  // shared_from_this()
  // A reply of the current ballot from `node`.
  virtual void on_answer(std::size_t node, const boost::system::error_code& ec,
                         const resp::value& reply) = 0;
  // A slot-0 reply from `node` to the earlier ballot `ballot`, which arrived after a later ballot
  // was opened. Most sinks ignore these.
  virtual void on_earlier_answer(std::size_t /*ballot*/, std::size_t /*node*/,
                                 const boost::system::error_code& /*ec*/,
                                 const resp::value& /*reply*/) {}
  // A reply of the current ballot to a request in slot `slot` (>= 1) from `node`.
  virtual void on_other_answer(std::size_t /*slot*/, std::size_t /*node*/,
                               const boost::system::error_code& /*ec*/,
                               const resp::value& /*reply*/) {}

 private:
  // While requests may still answer, they keep the owner alive.
  void first_reference_taken() noexcept final { pinned_ = owner(); }
  void last_reference_dropped() noexcept final {
    const auto last = std::move(pinned_);  // may destroy *this when it goes
  }

  std::size_t nodes_;
  std::size_t slots_;
  std::size_t ballot_ = 0;
  std::shared_ptr<void> pinned_;
};

// A fan-out decided by a majority vote: every node's reply is classified as yes / no / failed, and
// decide() is asked after each reply whether the outcome is already certain. decided() runs once
// per ballot, at the earliest certain moment; later replies are still read (by the connections)
// but change nothing.
//
// How the replies are read: `token_script`, every request runs a token-checked script, whose reply
// classify_script_reply reads (1 yes, 0 no, anything else a failure); `own`, the derived class's
// classify() reads them.
enum class vote_replies : std::uint8_t { token_script, own };

class vote : public fan_out_sink {
 public:
  const tally& votes() const noexcept { return votes_; }
  const node_answers& answers() const noexcept { return answers_; }

 protected:
  vote(std::size_t nodes, vote_replies replies)
      : fan_out_sink(nodes), votes_(nodes), answers_(nodes), replies_(replies) {}
  ~vote() = default;

  // Starts a new ballot and forgets the previous one's answers.
  std::size_t open_ballot() {
    // Before the first ballot everything is as constructed (most votes, a release's and a
    // renewal's among them, hold one ballot). After it, reset in place: keeps each detail's
    // storage.
    if (fan_out_sink::ballot() != 0) {
      votes_ = tally(answers_.size());
      for (auto& answer : answers_) {
        answer.what = node_answer::kind::pending;
        answer.unsent = false;
        answer.failure = {};
        answer.detail.clear();
      }
      decided_ = false;
    }
    return fan_out_sink::open_ballot();
  }

  // Reads a reply: by default as a token script's (vote_replies::token_script, whose commonest
  // replies on_answer reads itself); a vote of vote_replies::own says how.
  virtual node_answer::kind classify(const boost::system::error_code& ec, const resp::value& reply,
                                     std::string& detail) {
    return classify_script_reply(ec, reply, detail);
  }
  virtual std::optional<boost::system::error_code> decide(const tally& votes) = 0;
  virtual void decided(boost::system::error_code outcome) = 0;
  // Every answer of the current ballot as it comes, also after the decision.
  virtual void on_node_answer(std::size_t /*node*/, const node_answer& /*answer*/) {}

 private:
  void on_answer(std::size_t node, const boost::system::error_code& ec,
                 const resp::value& reply) final {
    node_answer& answer = answers_[node];
    if (replies_ == vote_replies::token_script && !ec && reply.kind == resp::type::integer &&
        answer.detail.empty()) {
      // Nearly every reply of a token script: 1 or 0, nothing to explain. What
      // classify_script_reply and fill_answer make of it, with no text to build.
      answer.what = reply.integer == 1 ? node_answer::kind::yes : node_answer::kind::no;
      answer.unsent = false;
      answer.failure = {};
    } else {
      std::string detail;
      const auto what = classify(ec, reply, detail);
      fill_answer(answer, what, ec, reply, std::move(detail));
    }
    on_node_answer(node, answer);
    count(votes_, answer.what);
    if (decided_) return;
    if (auto outcome = decide(votes_)) {
      decided_ = true;
      decided(*outcome);
    }
  }

  tally votes_;
  node_answers answers_;
  vote_replies replies_;
  bool decided_ = false;
};

// A user_operation settled by one vote.
class operation_vote : public user_operation, public vote {
 public:
  operation_vote(std::shared_ptr<lock_space> space, void_caller&& caller, vote_replies replies)
      : user_operation(space, space->executor(), std::move(caller)),
        vote(space->nodes().size(), replies),
        space_(std::move(space)) {}

 protected:
  std::shared_ptr<void> owner() final { return user_operation::shared_from_this(); }
  const std::shared_ptr<lock_space>& space() const noexcept { return space_; }

 private:
  std::shared_ptr<lock_space> space_;
};

}  // namespace redlock::detail

#endif
