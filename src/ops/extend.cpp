#include "ops/extend.hpp"

#include "algo/extension_validity.hpp"
#include "algo/replies.hpp"
#include "algo/validity.hpp"
#include "clock.hpp"
#include "lease_state.hpp"
#include "lock/scripts.hpp"
#include "ops/vote.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <string_view>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

void arm_lease_timer(lease_state& lease);
void on_lease_timer(lease_state& lease);
void renew(lease_state& lease);

// One extension of a held lease, for the renewal task (no caller) or for async_extend.
class extend_op final : public vote, public std::enable_shared_from_this<extend_op> {
 public:
  extend_op(std::shared_ptr<lease_state> state, std::chrono::milliseconds ttl, std::uint64_t id,
            bool from_renewal, std::shared_ptr<user_operation> caller)
      : vote(state->space()->nodes().size()),
        state_(std::move(state)),
        ttl_(ttl),
        id_(id),
        from_renewal_(from_renewal),
        caller_(std::move(caller)) {}

  void run() {
    const std::string ttl_text = std::to_string(ttl_.count());
    const std::string_view args[] = {state_->token(), ttl_text};
    if (state_->kind() == hold_kind::set) {
      // A set extends every key of the set, or none.
      const std::vector<std::string_view> keys(state_->resources().begin(),
                                               state_->resources().end());
      payload_ = encode_evalsha(multi_extend_script(), keys, args);
      return state_->space()->nodes().send(state_->resource(), payload_, *this, open_ballot(),
                                           lock_request::multi_extend);
    }
    const std::string_view keys[] = {state_->resource(), state_->companion_key()};
    const auto used_keys = std::span(keys, state_->companion_key().empty() ? 1 : 2);
    // A reader moves its own deadline in the readers' set; a lock or a writer extends its key.
    const bool reader = state_->kind() == hold_kind::reader;
    payload_ = encode_evalsha(reader ? rw_read_extend_script() : extend_script(), used_keys, args);
    state_->space()->nodes().send(state_->resource(), payload_, *this, open_ballot(),
                                  reader ? lock_request::read_extend : lock_request::extend);
  }

 private:
  std::shared_ptr<void> owner() override { return shared_from_this(); }

  node_answer::kind classify(error_code ec, const resp::value& reply,
                             std::string& detail) override {
    return classify_script_reply(ec, reply, detail);
  }

  std::optional<error_code> decide(const tally& t) override { return extension_outcome(t); }

  void decided(error_code ec) override {
    const auto now = lock_clock::now();
    lease_state& self = *state_;
    if (from_renewal_) self.renewal_in_flight = false;
    if (self.current() != lease_state::phase::held) {
      self.report(&observer::on_extend, error::not_held);
      if (caller_) caller_->finish(error::not_held);
      return;
    }
    if (!ec && !self.validity.confirm(id_, now)) {
      ec = error::no_quorum;  // confirmed, but too late to count
    }
    self.report(&observer::on_extend, ec);  // before a loss it may cause
    if (ec == error::not_held) {
      self.lose(fmt::format(
          "redlock: {} is gone or owned by someone else on {} of {} nodes: {}", self.subject(),
          votes().no_count(), votes().nodes(),
          self.space()->nodes().describe(answers(), "extended", "not ours", nullptr, self.keys())));
    } else if (ec) {
      self.diagnose(fmt::format(
          "redlock: extending {} failed ({}): {}", self.subject(), ec.message(),
          self.space()->nodes().describe(answers(), "extended", "not ours", nullptr, self.keys())));
      self.space()->log(log_level::warning, self.diagnostics());
    } else {
      self.diagnose({});
    }
    if (self.current() == lease_state::phase::held) {
      if (from_renewal_ && ec) {
        // Try again soon while validity lasts; later than that is useless, the timer reports the
        // loss at valid_until.
        self.next_renewal = renewal_retry_at(now, self.options().ttl, self.validity.valid_until())
                                .value_or(steady_clock::time_point::max());
      } else if (from_renewal_ || !ec) {
        schedule_renewal(self);
      }
      arm_lease_timer(self);  // the validity or next_renewal may have moved
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

void arm_lease_timer(lease_state& lease) {
  ++lease.timer_generation;
  lease.timer.expires_at(std::min(lease.next_renewal, lease.validity.valid_until()));
  lease.timer.async_wait(
      [weak = lease.weak_from_this(), generation = lease.timer_generation](error_code ec) {
        auto self = weak.lock();
        if (ec || !self || generation != self->timer_generation ||
            self->current() != lease_state::phase::held) {
          return;
        }
        on_lease_timer(*self);
      });
}

void on_lease_timer(lease_state& lease) {
  const auto now = lock_clock::now();
  if (now >= lease.validity.valid_until()) return lease.lose(lease.why_expired());
  if (now >= lease.next_renewal) renew(lease);
  arm_lease_timer(lease);
}

void renew(lease_state& lease) {
  // Never shorter than what is claimed or what an extension in flight may give the key, never
  // past acquired_at + max_hold: the extension that reaches max_hold is the last one (the lock
  // then runs out, and the timer reports it lost), if it still lengthens the validity at all.
  const auto& options = lease.options();
  std::optional<steady_clock::time_point> max_hold_end;
  if (options.max_hold) max_hold_end = lease.acquired_at() + *options.max_hold;
  const auto plan = plan_renewal(lease.validity, lock_clock::now(), options.ttl, max_hold_end,
                                 lease.space()->options().drift_factor);
  if (plan.last) lease.renewal_stopped_by_max_hold = true;
  if (plan.none) {
    if (!lease.renewal_in_flight) lease.next_renewal = steady_clock::time_point::max();
    return;
  }
  // Beside a renewal in flight (renew_at_once), as an extension of its own: the renewal's
  // outcome keeps deciding when the next one is due.
  send_extension(lease, plan.ttl, !lease.renewal_in_flight, nullptr);
}

}  // namespace

void schedule_renewal(lease_state& lease) {
  const auto& options = lease.options();
  if (!options.auto_renew || lease.renewal_in_flight || lease.renewal_stopped_by_max_hold) {
    if (!lease.renewal_in_flight) lease.next_renewal = steady_clock::time_point::max();
    return;
  }
  // At acquire this is half of the TTL after the round started, less the round's duration and the
  // drift allowance; after a long user extension, half a TTL before that one runs out.
  lease.next_renewal = renewal_due(lease.validity.valid_until(), options.ttl);
}

void renew_at_once(lease_state& lease) {
  if (!lease.is_held() || !lease.options().auto_renew || lease.renewal_stopped_by_max_hold) return;
  renew(lease);
  arm_lease_timer(lease);
}

void start_renewal(lease_state& lease) {
  schedule_renewal(lease);
  arm_lease_timer(lease);
}

void send_extension(lease_state& lease, std::chrono::milliseconds ttl, bool from_renewal,
                    std::shared_ptr<user_operation> caller) {
  // From now on the extension may run on any node, whatever its answer will be: it can only
  // shorten what we may claim until a quorum confirms it.
  const sent_extension sent =
      lease.validity.send(lock_clock::now(), ttl, lease.space()->options().drift_factor);
  const auto& options = lease.options();
  if (from_renewal) {
    lease.renewal_in_flight = true;
    lease.next_renewal = steady_clock::time_point::max();  // until it is decided
  } else if (options.auto_renew && !lease.renewal_in_flight && !lease.renewal_stopped_by_max_hold) {
    // A shorter validity needs an earlier renewal; a longer one is planned when confirmed.
    lease.next_renewal =
        std::min(lease.next_renewal, renewal_due(lease.validity.valid_until(), options.ttl));
  }
  arm_lease_timer(lease);
  std::make_shared<extend_op>(lease.shared_from_this(), ttl, sent.id, from_renewal,
                              std::move(caller))
      ->run();
}

void initiate_extend(const std::shared_ptr<lease_state>& state, std::chrono::milliseconds ttl,
                     void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  // Total cancellation is not honoured: once sent, the extension may apply whatever the caller
  // does, so it cannot be undone, only stopped being waited for (terminal, partial).
  auto op = std::make_shared<user_operation>(
      state->space(), state->space()->executor(), std::move(caller),
      asio::cancellation_type::terminal | asio::cancellation_type::partial);
  const auto refuse = [&](error_code ec) {
    state->report(&observer::on_extend, ec);
    op->finish(ec);
  };
  if (state->space()->closed()) return refuse(asio::error::operation_aborted);
  if (!state->is_held()) return refuse(error::not_held);
  const auto drift = drift_allowance(ttl, state->space()->options().drift_factor);
  if (ttl <= drift) {
    state->diagnose(
        fmt::format("redlock: cannot extend {} by {} ms: not longer than "
                    "the drift allowance of {} ms",
                    state->subject(), ttl.count(), to_ms(drift)));
    return refuse(error::invalid_argument);
  }
  op->start();
  send_extension(*state, ttl, false, op);
}

}  // namespace redlock::detail
