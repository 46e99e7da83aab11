#include "ops/extend.hpp"

#include "algo/extension_validity.hpp"
#include "algo/replies.hpp"
#include "algo/validity.hpp"
#include "lease_state.hpp"
#include "ops/vote.hpp"
#include "scripts.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <string_view>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// One extension of a held lease, for the renewal task (no caller) or for async_extend.
class extend_op final : public vote, public std::enable_shared_from_this<extend_op> {
 public:
  extend_op(std::shared_ptr<lease_state> state, std::chrono::milliseconds ttl, std::uint64_t id,
            bool from_renewal, std::shared_ptr<user_operation> caller)
      : vote(state->space->nodes().size()),
        state_(std::move(state)),
        ttl_(ttl),
        id_(id),
        from_renewal_(from_renewal),
        caller_(std::move(caller)) {}

  void run() {
    const std::string ttl_text = std::to_string(ttl_.count());
    const std::string_view keys[] = {state_->resource, state_->companion_key};
    const std::string_view args[] = {state_->token, ttl_text};
    const auto used_keys = std::span(keys, state_->companion_key.empty() ? 1 : 2);
    payload_ = encode_evalsha(extend_script(), used_keys, args);
    state_->space->nodes().send(payload_, *this, open_ballot(), lock_request::extend);
  }

 private:
  std::shared_ptr<void> owner() override { return shared_from_this(); }

  node_answer::kind classify(error_code ec, const resp::value& reply,
                             std::string& detail) override {
    return classify_script_reply(ec, reply, detail);
  }

  std::optional<error_code> decide(const tally& t) override {
    if (t.yes_quorum()) return error_code{};
    if (t.no_quorum()) return make_error_code(error::not_held);
    if (t.yes_quorum_impossible()) return make_error_code(error::no_quorum);
    return std::nullopt;
  }

  void decided(error_code ec) override {
    const auto now = steady_clock::now();
    lease_state& self = *state_;
    if (from_renewal_) self.renewal_in_flight = false;
    if (self.current != lease_state::phase::held) {
      if (caller_) caller_->finish(error::not_held);
      return;
    }
    if (!ec && !self.validity.confirm(id_, now)) {
      ec = error::no_quorum;  // confirmed, but too late to count
    }
    if (ec == error::not_held) {
      self.lose(fmt::format(
          "redlock: {} is gone or owned by someone else on {} of {} nodes: {}",
          quoted_resource(self.resource), votes().no_count(), votes().nodes(),
          self.space->nodes().describe(answers(), "extended", "not ours", nullptr, self.keys())));
    } else if (ec) {
      self.diagnostics = fmt::format(
          "redlock: extending {} failed ({}): {}", quoted_resource(self.resource), ec.message(),
          self.space->nodes().describe(answers(), "extended", "not ours", nullptr, self.keys()));
      self.space->log(log_level::warning, self.diagnostics);
    } else {
      self.diagnostics.clear();
    }
    if (self.current == lease_state::phase::held) {
      if (from_renewal_ && ec) {
        // Try again soon while validity lasts; later than that is useless, the timer reports the
        // loss at valid_until.
        self.next_renewal = renewal_retry_at(now, self.options.ttl, self.validity.valid_until())
                                .value_or(steady_clock::time_point::max());
      } else if (from_renewal_ || !ec) {
        self.schedule_renewal();
      }
      self.arm_timer();  // valid_until or next_renewal may have moved
    }
    if (caller_) caller_->finish(ec);
  }

  std::shared_ptr<lease_state> state_;
  std::chrono::milliseconds ttl_;
  std::uint64_t id_;
  bool from_renewal_;
  std::shared_ptr<user_operation> caller_;
  std::string payload_;
};

}  // namespace

void start_extension(std::shared_ptr<lease_state> state, std::chrono::milliseconds ttl,
                     std::uint64_t id, bool from_renewal, std::shared_ptr<user_operation> caller) {
  std::make_shared<extend_op>(std::move(state), ttl, id, from_renewal, std::move(caller))->run();
}

void run_extend(const std::shared_ptr<lease_state>& state, std::chrono::milliseconds ttl,
                void_caller caller) {
  // Total cancellation is not honoured: once sent, the extension may apply whatever the caller
  // does, so it cannot be undone, only stopped being waited for (terminal, partial).
  auto op = std::make_shared<user_operation>(
      state->space, std::move(caller),
      asio::cancellation_type::terminal | asio::cancellation_type::partial);
  if (state->space->closed()) return op->finish(asio::error::operation_aborted);
  if (!state->is_held()) return op->finish(error::not_held);
  const auto drift = drift_allowance(ttl, state->space->options().drift_factor);
  if (ttl <= drift) {
    state->diagnostics = fmt::format(
        "redlock: cannot extend {} by {} ms: not longer than "
        "the drift allowance of {} ms",
        quoted_resource(state->resource), ttl.count(), to_ms(drift));
    return op->finish(error::invalid_argument);
  }
  op->start();
  state->start_extend(ttl, false, op);
}

}  // namespace redlock::detail
