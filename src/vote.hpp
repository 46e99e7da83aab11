#ifndef REDLOCK_VOTE_HPP
#define REDLOCK_VOTE_HPP

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/cancellation_type.hpp>
#include <boost/system/error_code.hpp>

#include "algo/quorum.hpp"
#include "client_impl.hpp"
#include "completion.hpp"
#include "redlock/error.hpp"

namespace redlock::detail {

// A caller's pending void(error_code) operation that the client can end: cancellation by the
// caller and client shutdown both complete it with operation_aborted. The work behind it (requests
// already queued on the nodes) goes on either way; only the caller stops waiting.
class user_operation : public abortable, public std::enable_shared_from_this<user_operation> {
 public:
  static constexpr auto any_cancellation = boost::asio::cancellation_type::terminal |
                                           boost::asio::cancellation_type::partial |
                                           boost::asio::cancellation_type::total;

  // `honoured`: the cancellation types that end the operation; others are ignored.
  user_operation(std::shared_ptr<client_impl> client, void_caller&& caller,
                 boost::asio::cancellation_type honoured = any_cancellation)
      : client_(std::move(client)),
        done_(std::move(caller.handler), client_->executor(), caller.on_client_executor),
        honoured_(honoured) {}
  virtual ~user_operation() = default;

  // Registers with the client and the caller's cancellation slot.
  void start() {
    client_->track(this);
    done_.on_cancel([weak = weak_from_this()](boost::asio::cancellation_type type) {
      auto self = weak.lock();
      if (self && (type & self->honoured_) != boost::asio::cancellation_type::none) {
        self->finish(boost::asio::error::operation_aborted);
      }
    });
  }

  void abort() override { finish(boost::asio::error::operation_aborted); }

  // The caller's handler is posted (see completion), so this may be called from anywhere.
  void finish(boost::system::error_code ec) {
    if (done_.done()) return;
    client_->untrack(this);
    done_.complete(ec);
    on_finished();
  }

  bool done() const noexcept { return done_.done(); }

 protected:
  const std::shared_ptr<client_impl>& client() const noexcept { return client_; }
  // Called once, right after the caller's handler has been handed over.
  virtual void on_finished() {}

 private:
  std::shared_ptr<client_impl> client_;
  completion<boost::system::error_code> done_;
  boost::asio::cancellation_type honoured_;
};

// A fan-out decided by a majority vote: every node's reply is classified as yes / no / failed, and
// decide() is asked after each reply whether the outcome is already certain. decided() runs once
// per ballot, at the earliest certain moment; later replies are still read (by the connections)
// but change nothing.
//
// The derived operation is the reply sink itself, so a fan-out allocates nothing for its votes.
// It must be owned by a shared_ptr: while any request may still answer, the vote keeps its owner
// alive through owner().
class vote : public reply_sink {
 public:
  void on_reply(std::size_t tag, boost::system::error_code ec, const resp::value& reply) final {
    const std::size_t nodes = answers_.size();
    if (tag / nodes != ballot_) return;  // a late answer to an earlier ballot
    record(tag % nodes, ec, reply);
  }

  void retain() noexcept final {
    if (pins_++ == 0) pinned_ = owner();
  }
  void release() noexcept final {
    if (--pins_ == 0) {
      const auto last = std::move(pinned_);  // may destroy *this when it goes
    }
  }

  const tally& votes() const noexcept { return votes_; }
  const node_answers& answers() const noexcept { return answers_; }

 protected:
  explicit vote(std::size_t nodes) : votes_(nodes), answers_(nodes) {}
  ~vote() = default;

  // Starts a new ballot and forgets the previous one, whose late replies are ignored. Returns the
  // tag of node 0 for client_impl::fan_out.
  std::size_t open_ballot() {
    ++ballot_;
    votes_ = tally(answers_.size());
    for (auto& answer : answers_) {
      answer.what = node_answer::kind::pending;
      answer.unsent = false;
      answer.failure = {};
      answer.detail.clear();
    }
    decided_ = false;
    return ballot_ * answers_.size();
  }

  virtual std::shared_ptr<void> owner() = 0;  // shared_from_this()
  virtual node_answer::kind classify(boost::system::error_code ec, const resp::value& reply,
                                     std::string& detail) = 0;
  virtual std::optional<boost::system::error_code> decide(const tally& votes) = 0;
  virtual void decided(boost::system::error_code outcome) = 0;
  // An answer of this ballot recorded after decided(): it changes nothing, but may be worth noting.
  virtual void answered_after_decision(std::size_t /*node*/) {}

 private:
  void record(std::size_t node, boost::system::error_code ec, const resp::value& reply) {
    node_answer& answer = answers_[node];
    answer.what = classify(ec, reply, answer.detail);
    // A connect that failed for good (connection::permanent_failure) fails its requests unsent.
    // Tested only for a failure: comparing with a condition costs virtual calls on every reply.
    answer.unsent = ec && (ec == error::not_connected || ec == error::node_unresponsive ||
                           ec == condition::node_failure || ec == error::invalid_argument);
    if (answer.what == node_answer::kind::failed) {
      // A NOPERM reply (the ACL user may not write this key) lasts like a refused login.
      answer.failure = ec ? ec
                       : reply.is_error() && reply.error_code_word() == "NOPERM"
                           ? make_error_code(error::permission_denied)
                           : make_error_code(error::server_error);
    }
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
    if (decided_) return answered_after_decision(node);
    if (auto outcome = decide(votes_)) {
      decided_ = true;
      decided(*outcome);
    }
  }

  tally votes_;
  node_answers answers_;
  std::size_t ballot_ = 0;
  bool decided_ = false;
  unsigned pins_ = 0;
  std::shared_ptr<void> pinned_;
};

// A user_operation settled by one vote.
class operation_vote : public user_operation, public vote {
 public:
  operation_vote(std::shared_ptr<client_impl> client, void_caller&& caller)
      : user_operation(std::move(client), std::move(caller)), vote(this->client()->size()) {}

 protected:
  std::shared_ptr<void> owner() final { return user_operation::shared_from_this(); }
};

// Classifies a script reply that is 1 for "done", 0 for "not our key".
node_answer::kind classify_script_reply(boost::system::error_code ec, const resp::value& reply,
                                        std::string& detail);

}  // namespace redlock::detail

#endif
