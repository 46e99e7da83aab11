#include "algo/replies.hpp"
#include "block_cache.hpp"
#include "lock/lease_state.hpp"
#include "lock/scripts.hpp"
#include "ops/lock_requests.hpp"
#include "ops/vote.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <string_view>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// async_release: token-checked DEL on every node.
class release_op final : public operation_vote {
 public:
  release_op(std::shared_ptr<lease_state> state, void_caller&& caller)
      : operation_vote(shared_space_of(*state), std::move(caller), vote_replies::token_script),
        state_(std::move(state)) {}

  // Queues the release on every node; returns how the next local waiter starts once the lease has
  // stopped holding.
  next_waiter_start run() {
    const auto how = state_->release_decision();
    report_gone_keys_ = how.next_waiter.competes;
    auto& nodes = space_of(*state_).nodes();
    encode_release_into(payload_, nodes, state_->held(), state_->token(), how.channel);
    sent_at_ = nodes.send(state_->resource(), payload_, *this, open_ballot(),
                          release_rules(state_->kind(), state_->validity().longest_ttl()), nullptr);
    return how.next_waiter;
  }

 private:
  void on_node_answer(std::size_t node, const node_answer& answer) override {
    // Deleted, or not ours: gone either way (local_queues::lease_release).
    if (report_gone_keys_ &&
        (answer.what == node_answer::kind::yes || answer.what == node_answer::kind::no)) {
      space_of(*state_).queues().key_gone_on_node(node, state_->held_resources());
    }
  }

  std::optional<error_code> decide(const tally& t) override { return release_outcome(t); }

  void decided(error_code ec) override {
    if (ec) {
      state_->diagnose(
          fmt::format("redlock: releasing {}: {}: {}", state_->subject(), ec.message(),
                      space_of(*state_).nodes().describe(answers(), "released", "not ours", nullptr,
                                                         quoted_keys({state_->resource()}))));
    }
    // The lease stopped being held here when its release was sent.
    state_->report(&observer::on_release, ec, sent_at_);
    finish(ec);
  }

  std::shared_ptr<lease_state> state_;
  payload_by_node_kind payload_;  // read by the connections until every node has answered
  bool report_gone_keys_ = false;
  steady_clock::time_point sent_at_{};
};

}  // namespace

void initiate_release(const std::shared_ptr<lease_state>& state, void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  auto op =
      std::allocate_shared<release_op>(cached_allocator<release_op>(), state, std::move(caller));
  const auto refuse = [&](error_code ec) {
    state->report(&observer::on_release, ec);
    op->finish(ec);
  };
  if (space_of(*state).closed()) return refuse(asio::error::operation_aborted);
  if (state->current() != lease_state::phase::held) {
    state->diagnose(fmt::format("redlock: {} is not held by this lease", state->subject()));
    return refuse(error::not_held);
  }
  op->start();
  // The release requests are queued first, and only then the resource is handed to the next local
  // waiter: on every node our DEL runs before its SET.
  const auto next_waiter = op->run();
  state->stop_holding(lease_state::phase::released, asio::error::operation_aborted, next_waiter);
}

}  // namespace redlock::detail
