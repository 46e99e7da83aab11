#ifndef REDLOCK_VOTE_HPP
#define REDLOCK_VOTE_HPP

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/cancellation_type.hpp>
#include <boost/system/error_code.hpp>

#include "algo/quorum.hpp"
#include "client_impl.hpp"
#include "completion.hpp"

namespace redlock::detail {

// A caller's pending void(error_code) operation that the client can end: cancellation by the
// caller and client shutdown both complete it with operation_aborted. The work behind it (requests
// already queued on the nodes) goes on either way; only the caller stops waiting.
class user_operation final : public abortable, public std::enable_shared_from_this<user_operation> {
 public:
  user_operation(std::shared_ptr<client_impl> client, void_handler&& handler)
      : client_(std::move(client)), done_(std::move(handler), client_->executor()) {}

  // Registers with the client and the caller's cancellation slot.
  void start() {
    client_->track(this);
    done_.on_cancel([weak = weak_from_this()](boost::asio::cancellation_type) {
      if (auto self = weak.lock()) self->finish(boost::asio::error::operation_aborted, true);
    });
  }

  void abort() override { finish(boost::asio::error::operation_aborted, true); }

  // `posted`: from an initiating function or a cancellation handler (see completion).
  void finish(boost::system::error_code ec, bool posted = false) {
    if (done_.done()) return;
    client_->untrack(this);
    if (posted) {
      done_.complete_posted(ec);
    } else {
      done_.complete(ec);
    }
  }

  bool done() const noexcept { return done_.done(); }

 private:
  std::shared_ptr<client_impl> client_;
  completion<boost::system::error_code> done_;
};

// One fan-out decided by a majority vote: every node's reply is classified as yes / no / failed,
// and `decide` is asked after each reply whether the outcome is already certain. `on_decided` runs
// once, at the earliest certain moment; later replies are still read (by the connections) but
// change nothing.
class vote final : public reply_sink {
 public:
  using classify_fn = std::function<node_answer::kind(boost::system::error_code, const resp::value&,
                                                      std::string& detail)>;
  using decide_fn = std::function<std::optional<boost::system::error_code>(const tally&)>;
  using decided_fn = std::function<void(boost::system::error_code, const vote&)>;

  vote(std::size_t nodes, classify_fn classify, decide_fn decide, decided_fn on_decided)
      : votes_(nodes),
        answers_(nodes),
        classify_(std::move(classify)),
        decide_(std::move(decide)),
        on_decided_(std::move(on_decided)) {}

  void on_reply(std::size_t node, boost::system::error_code ec, resp::value reply) override {
    record(node, ec, reply);
  }

  const tally& votes() const noexcept { return votes_; }
  const std::vector<node_answer>& answers() const noexcept { return answers_; }

 private:
  void record(std::size_t node, boost::system::error_code ec, const resp::value& reply) {
    node_answer& answer = answers_[node];
    answer.what = classify_(ec, reply, answer.detail);
    switch (answer.what) {
      case node_answer::kind::yes:
        votes_.yes();
        break;
      case node_answer::kind::no:
        votes_.no();
        break;
      default:
        votes_.failed();
        break;
    }
    if (decided_) return;
    if (auto outcome = decide_(votes_)) {
      decided_ = true;
      auto on_decided = std::move(on_decided_);
      on_decided(*outcome, *this);
    }
  }

  tally votes_;
  std::vector<node_answer> answers_;
  classify_fn classify_;
  decide_fn decide_;
  decided_fn on_decided_;
  bool decided_ = false;
};

// Classifies a script reply that is 1 for "done", 0 for "not our key".
node_answer::kind classify_script_reply(boost::system::error_code ec, const resp::value& reply,
                                        std::string& detail);

}  // namespace redlock::detail

#endif
