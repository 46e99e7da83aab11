#include "redlock/lease.hpp"

#include <fmt/format.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>

#include <algorithm>

#include "algo/validity.hpp"
#include "client_impl.hpp"
#include "vote.hpp"

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// After a failed renewal, try again this soon (while validity lasts): a tenth of the TTL, within
// [10 ms, 500 ms].
steady_clock::duration renewal_retry_delay(std::chrono::milliseconds ttl) {
  return std::clamp<steady_clock::duration>(ttl / 10, std::chrono::milliseconds(10),
                                            std::chrono::milliseconds(500));
}

}  // namespace

lease_state::lease_state(std::shared_ptr<client_impl> owner, std::string resource_name,
                         const lock_options& lock)
    : client(std::move(owner)),
      resource(std::move(resource_name)),
      options(lock),
      timer(client->executor()) {}

// A held state is released by ~lease before it can get here; the list hook unlinks itself.
lease_state::~lease_state() = default;

void lease_state::on_acquired(steady_clock::time_point round_start,
                              steady_clock::time_point until) {
  state = phase::held;
  acquired_at = round_start;
  last_extend_start = round_start;
  valid_until = until;
  client->track_lease(this);
  next_renewal =
      options.auto_renew ? round_start + options.ttl / 2 : steady_clock::time_point::max();
  arm_timer();
}

void lease_state::arm_timer() {
  ++timer_generation;
  timer.expires_at(std::min(next_renewal, valid_until));
  timer.async_wait([weak = weak_from_this(), generation = timer_generation](error_code ec) {
    auto self = weak.lock();
    if (ec || !self || generation != self->timer_generation || self->state != phase::held) return;
    self->on_timer();
  });
}

void lease_state::on_timer() {
  const auto now = steady_clock::now();
  if (now >= valid_until) {
    if (options.max_hold && now - acquired_at + options.ttl / 2 >= *options.max_hold) {
      return lose(fmt::format("redlock: \"{}\" expired: max_hold of {} ms reached", resource,
                              options.max_hold->count()));
    }
    return lose(
        fmt::format("redlock: \"{}\" expired: its validity ran out before a quorum "
                    "confirmed an extension",
                    resource));
  }
  if (now >= next_renewal) {
    next_renewal = steady_clock::time_point::max();  // until the extension answers
    renew();
  }
  arm_timer();
}

void lease_state::renew() {
  auto ttl = options.ttl;
  if (options.max_hold) {
    // Never extend past acquired_at + max_hold: the last extension only covers what is left, and
    // once too little is left the lock simply runs out (the timer then reports it lost).
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        acquired_at + *options.max_hold - steady_clock::now());
    if (left <= drift_allowance(left, client->options().drift_factor)) return;
    ttl = std::min(ttl, left);
  }
  start_extend(ttl, true, nullptr);
}

namespace {

// One extension of a held lease, for the renewal task (no caller) or for async_extend.
class extend_op final : public vote, public std::enable_shared_from_this<extend_op> {
 public:
  extend_op(std::shared_ptr<lease_state> state, std::chrono::milliseconds ttl, bool from_renewal,
            std::shared_ptr<user_operation> caller)
      : vote(state->client->size()),
        state_(std::move(state)),
        ttl_(ttl),
        from_renewal_(from_renewal),
        caller_(std::move(caller)) {}

  void run() {
    start_ = steady_clock::now();
    const std::string ttl_text = std::to_string(ttl_.count());
    const std::string_view args[] = {state_->token, ttl_text};
    state_->client->fan_out_script(extend_script(), state_->resource, args, payload_, *this,
                                   open_ballot(), client_impl::to_unresponsive::skip);
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
    if (self.state != lease_state::phase::held) {
      if (caller_) caller_->finish(error::not_held);
      return;
    }
    if (!ec) {
      const auto left = validity(ttl_, self.client->options().drift_factor, start_, now);
      if (now >= self.valid_until || left <= steady_clock::duration::zero()) {
        ec = error::no_quorum;  // confirmed, but too late to count
      } else if (start_ >= self.last_extend_start) {
        self.last_extend_start = start_;
        self.valid_until = now + left;
      }
    }
    if (ec == error::not_held) {
      self.lose(
          fmt::format("redlock: \"{}\" is gone or owned by someone else on {} of {} nodes: {}",
                      self.resource, votes().no_count(), votes().nodes(),
                      self.client->describe(answers(), "extended", "not ours")));
    } else if (ec) {
      self.diagnostics =
          fmt::format("redlock: extending \"{}\" failed ({}): {}", self.resource, ec.message(),
                      self.client->describe(answers(), "extended", "not ours"));
      self.client->log(log_level::warning, self.diagnostics);
    } else {
      self.diagnostics.clear();
    }
    if (self.state == lease_state::phase::held) {
      if (from_renewal_) {
        const auto next = ec ? now + renewal_retry_delay(self.options.ttl) : start_ + ttl_ / 2;
        // A retry later than the validity is useless: the timer reports the loss at valid_until.
        self.next_renewal = next < self.valid_until ? next : steady_clock::time_point::max();
      }
      self.arm_timer();  // valid_until or next_renewal may have moved
    }
    if (caller_) caller_->finish(ec);
  }

  std::shared_ptr<lease_state> state_;
  std::chrono::milliseconds ttl_;
  bool from_renewal_;
  std::shared_ptr<user_operation> caller_;
  steady_clock::time_point start_{};
  std::string payload_;
};

}  // namespace

void lease_state::start_extend(std::chrono::milliseconds ttl, bool from_renewal,
                               std::shared_ptr<user_operation> caller) {
  std::make_shared<extend_op>(shared_from_this(), ttl, from_renewal, std::move(caller))->run();
}

void lease_state::lose(std::string why) {
  diagnostics = std::move(why);
  client->log(log_level::warning, diagnostics);
  stop_holding(phase::lost, make_error_code(error::lock_lost));
  // Whatever is left of our key on a minority of nodes would only expire; delete it now.
  client->release_best_effort(resource, token);
}

void lease_state::stop_holding(phase next, error_code waiters_get) {
  if (state != phase::held) return;
  state = next;
  ++timer_generation;
  timer.cancel();
  client->untrack_lease(this);
  auto waiters = std::move(lost_waiters);
  lost_waiters.clear();
  // Posted: this may run inside another operation's initiating function (async_release).
  for (auto& waiter : waiters)
    waiter->finish(waiters_get, true);
  // Last: the next local waiter's SET is queued behind whatever this lease sent before.
  client->holder_gone(*this);
}

namespace {

// Ends a held lease whose handle is going away: stop renewing, release best effort.
void abandon(const std::shared_ptr<lease_state>& state) {
  if (state->state != lease_state::phase::held) return;
  if (!state->client->closed()) state->client->release_best_effort(state->resource, state->token);
  state->stop_holding(lease_state::phase::released, asio::error::operation_aborted);
}

// Completes `handler` with `ec` when there is no lease state to run on.
void complete_without_state(void_handler handler, error_code ec) {
  // A default-constructed lease knows no I/O executor: hop through the system executor into the
  // handler's own, so that the handler never runs inside the initiating function.
  auto executor = asio::get_associated_executor(handler);
  asio::post(asio::system_executor(),
             asio::bind_executor(executor, [handler = void_handler(std::move(handler)),
                                            ec]() mutable { std::move(handler)(ec); }));
}

}  // namespace

namespace {

// async_release: token-checked DEL on every node.
class release_op final : public operation_vote {
 public:
  release_op(std::shared_ptr<lease_state> state, void_caller&& caller)
      : operation_vote(state->client, std::move(caller)), state_(std::move(state)) {}

  void run() {
    const std::string_view args[] = {state_->token};
    state_->client->fan_out_script(release_script(), state_->resource, args, payload_, *this,
                                   open_ballot(), client_impl::to_unresponsive::send);
  }

 private:
  node_answer::kind classify(error_code ec, const resp::value& reply,
                             std::string& detail) override {
    return classify_script_reply(ec, reply, detail);
  }

  std::optional<error_code> decide(const tally& t) override {
    if (t.no_quorum()) return make_error_code(error::not_held);
    if (t.too_many_failed()) return make_error_code(error::no_quorum);
    if (t.no_quorum_impossible() && t.too_many_failed_impossible()) return error_code{};
    return std::nullopt;
  }

  void decided(error_code ec) override {
    if (ec) {
      state_->diagnostics =
          fmt::format("redlock: releasing \"{}\": {}: {}", state_->resource, ec.message(),
                      state_->client->describe(answers(), "released", "not ours"));
    }
    finish(ec);
  }

  std::shared_ptr<lease_state> state_;
  std::string payload_;
};

}  // namespace

void initiate_release(const std::shared_ptr<lease_state>& state, void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  auto op = std::make_shared<release_op>(state, std::move(caller));
  if (state->client->closed()) return op->finish(asio::error::operation_aborted, true);
  if (state->state != lease_state::phase::held) {
    state->diagnostics = fmt::format("redlock: \"{}\" is not held by this lease", state->resource);
    return op->finish(error::not_held, true);
  }
  op->start();
  // The release requests are queued first, and only then the resource is handed to the next local
  // waiter: on every node our DEL runs before its SET.
  op->run();
  state->stop_holding(lease_state::phase::released, asio::error::operation_aborted);
}

void initiate_extend(const std::shared_ptr<lease_state>& state, std::chrono::milliseconds ttl,
                     void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  auto op = std::make_shared<user_operation>(state->client, std::move(caller));
  if (state->client->closed()) return op->finish(asio::error::operation_aborted, true);
  if (!state->is_held()) return op->finish(error::not_held, true);
  const auto drift = drift_allowance(ttl, state->client->options().drift_factor);
  if (ttl <= drift) {
    state->diagnostics = fmt::format(
        "redlock: cannot extend \"{}\" by {} ms: not longer than "
        "the drift allowance of {} ms",
        state->resource, ttl.count(), to_ms(drift));
    return op->finish(error::invalid_argument, true);
  }
  op->start();
  state->start_extend(ttl, false, op);
}

void initiate_wait_lost(const std::shared_ptr<lease_state>& state, void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  auto op = std::make_shared<user_operation>(state->client, std::move(caller));
  switch (state->state) {
    case lease_state::phase::lost:
      return op->finish(error::lock_lost, true);
    case lease_state::phase::never_held:
      return op->finish(error::not_held, true);
    case lease_state::phase::released:
      return op->finish(asio::error::operation_aborted, true);
    case lease_state::phase::held:
      break;
  }
  if (state->client->closed()) return op->finish(asio::error::operation_aborted, true);
  op->start();
  // Finished waiters stay in the list until the lease ends; finish() on them is a no-op.
  state->lost_waiters.push_back(std::move(op));
}

const asio::any_io_executor& executor_of(const lease_state* state) noexcept {
  static const asio::any_io_executor none;
  return state ? state->client->executor() : none;
}

}  // namespace redlock::detail

namespace redlock {

lease& lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    lease old(std::move(*this));
    state_ = std::move(other.state_);
  }
  return *this;
}

lease::~lease() {
  if (!state_ || state_->state != detail::lease_state::phase::held) return;
  // On the client's executor: inline when already there (the usual case), else posted.
  try {
    auto executor = state_->client->executor();
    boost::asio::dispatch(executor, [state = std::move(state_)] { detail::abandon(state); });
  } catch (...) {
    // Allocation failure: the lock expires with its TTL instead.
  }
}

lease::executor_type lease::get_executor() const noexcept {
  return state_ ? state_->client->executor() : executor_type();
}

const std::string& lease::resource() const noexcept {
  static const std::string none;
  return state_ ? state_->resource : none;
}

const std::string& lease::token() const noexcept {
  static const std::string none;
  return state_ && state_->state != detail::lease_state::phase::never_held ? state_->token : none;
}

std::chrono::steady_clock::time_point lease::valid_until() const noexcept {
  return state_ ? state_->valid_until : std::chrono::steady_clock::time_point{};
}

bool lease::held() const noexcept {
  return state_ && state_->is_held();
}

const std::string& lease::diagnostics() const noexcept {
  static const std::string none;
  return state_ ? state_->diagnostics : none;
}

}  // namespace redlock
