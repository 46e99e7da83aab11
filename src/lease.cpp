#include "redlock/lease.hpp"

#include "algo/validity.hpp"
#include "client_impl.hpp"
#include "text.hpp"
#include "vote.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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
  current = phase::held;
  acquired_at = round_start;
  valid_until = until;
  longest_ttl = options.ttl;
  client->track_lease(this);
  schedule_renewal();
  arm_timer();
}

void lease_state::arm_timer() {
  ++timer_generation;
  timer.expires_at(std::min(next_renewal, valid_until));
  timer.async_wait([weak = weak_from_this(), generation = timer_generation](error_code ec) {
    auto self = weak.lock();
    if (ec || !self || generation != self->timer_generation || self->current != phase::held) {
      return;
    }
    self->on_timer();
  });
}

void lease_state::on_timer() {
  const auto now = steady_clock::now();
  if (now >= valid_until) return lose(why_expired());
  if (now >= next_renewal) renew();
  arm_timer();
}

std::string lease_state::keys() const {
  if (companion_key.empty()) return quoted_keys({resource});
  return quoted_keys({resource, companion_key});
}

std::string lease_state::why_expired() const {
  if (renewal_stopped_by_max_hold) {
    // Renewal made its last extension, capped at max_hold, or had none left to make: the lease
    // was to end within a TTL anyway.
    if (unconfirmed_extensions.empty()) {
      return fmt::format("redlock: {} expired: max_hold of {} ms reached",
                         quoted_resource(resource), options.max_hold->count());
    }
    return fmt::format(
        "redlock: {} expired: its last extension before max_hold ({} ms) was not confirmed by a "
        "quorum in time",
        quoted_resource(resource), options.max_hold->count());
  }
  if (!options.auto_renew && unconfirmed_extensions.empty()) {
    return fmt::format("redlock: {} expired: its TTL ran out (auto_renew is off)",
                       quoted_resource(resource));
  }
  return fmt::format(
      "redlock: {} expired: its validity ran out before a quorum confirmed an extension",
      quoted_resource(resource));
}

void lease_state::schedule_renewal() {
  if (!options.auto_renew || renewal_in_flight || renewal_stopped_by_max_hold) {
    if (!renewal_in_flight) next_renewal = steady_clock::time_point::max();
    return;
  }
  // At acquire this is half of the TTL after the round started, less the round's duration and the
  // drift allowance; after a long user extension, half a TTL before that one runs out.
  next_renewal = valid_until - options.ttl / 2;
}

namespace {

// The TTL that, sent now, keeps a key until `until` after the drift allowance:
// ttl - (ttl * drift_factor + 2 ms) >= until - now.
std::chrono::milliseconds ttl_covering(steady_clock::time_point until, steady_clock::time_point now,
                                       double drift_factor) {
  const double needed_ms = std::chrono::duration<double, std::milli>(until - now).count() + 2.0;
  const auto ttl = std::chrono::milliseconds(
      static_cast<std::chrono::milliseconds::rep>(std::ceil(needed_ms / (1.0 - drift_factor))) + 1);
  return std::max(ttl, std::chrono::milliseconds(1));
}

}  // namespace

void lease_state::renew() {
  const auto now = steady_clock::now();
  // Never shorten what is claimed, or what an extension still in flight may give the key: the TTL
  // covers both, and is at least the lease's own TTL.
  auto claimed = valid_until;
  for (const auto& sent : unconfirmed_extensions)
    claimed = std::max(claimed, sent.cap);
  auto ttl = std::max(options.ttl, ttl_covering(claimed, now, client->options().drift_factor));
  if (options.max_hold) {
    // Never past acquired_at + max_hold: the extension that reaches it is the last one, and only
    // if it still lengthens the validity claimed now (after a user extension past max_hold it
    // would not). The lock then runs out, and the timer reports it lost.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        acquired_at + *options.max_hold - now);
    if (left <= ttl) {
      ttl = left;
      renewal_stopped_by_max_hold = true;
      if (ttl <= std::chrono::milliseconds(0) ||
          now + ttl - drift_allowance(ttl, client->options().drift_factor) <= valid_until) {
        next_renewal = steady_clock::time_point::max();
        return;
      }
    }
  }
  start_extend(ttl, true, nullptr);
}

void lease_state::release_on_nodes(const std::vector<bool>* only) {
  const auto how = client->release_of(*this);
  client->release_best_effort(resource, token, how.channel, longest_ttl, only,
                              how.next_waiter_competes);
}

bool lease_state::confirm_extension(std::uint64_t id, steady_clock::time_point now) {
  if (now >= valid_until) return false;  // the lease had run out: a late yes brings nothing back
  const auto confirmed = std::find_if(unconfirmed_extensions.begin(), unconfirmed_extensions.end(),
                                      [id](const sent_extension& sent) { return sent.id == id; });
  // Not found: a newer extension was confirmed first, and this older one ran before it.
  if (confirmed == unconfirmed_extensions.end()) return true;
  auto until = confirmed->cap;
  for (auto later = confirmed; later != unconfirmed_extensions.end(); ++later)
    until = std::min(until, later->cap);
  valid_until = std::max(valid_until, until);
  unconfirmed_extensions.erase(unconfirmed_extensions.begin(), confirmed + 1);
  return true;
}

namespace {

// One extension of a held lease, for the renewal task (no caller) or for async_extend.
class extend_op final : public vote, public std::enable_shared_from_this<extend_op> {
 public:
  extend_op(std::shared_ptr<lease_state> state, std::chrono::milliseconds ttl, std::uint64_t id,
            bool from_renewal, std::shared_ptr<user_operation> caller)
      : vote(state->client->size()),
        state_(std::move(state)),
        ttl_(ttl),
        id_(id),
        from_renewal_(from_renewal),
        caller_(std::move(caller)) {}

  void run() {
    state_->client->fan_out_extend(state_->resource, state_->companion_key, state_->token, ttl_,
                                   payload_, *this, open_ballot());
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
    if (!ec && !self.confirm_extension(id_, now)) {
      ec = error::no_quorum;  // confirmed, but too late to count
    }
    if (ec == error::not_held) {
      self.lose(fmt::format(
          "redlock: {} is gone or owned by someone else on {} of {} nodes: {}",
          quoted_resource(self.resource), votes().no_count(), votes().nodes(),
          self.client->describe(answers(), "extended", "not ours", nullptr, self.keys())));
    } else if (ec) {
      self.diagnostics = fmt::format(
          "redlock: extending {} failed ({}): {}", quoted_resource(self.resource), ec.message(),
          self.client->describe(answers(), "extended", "not ours", nullptr, self.keys()));
      self.client->log(log_level::warning, self.diagnostics);
    } else {
      self.diagnostics.clear();
    }
    if (self.current == lease_state::phase::held) {
      if (from_renewal_ && ec) {
        // Try again soon while validity lasts; later than that is useless, the timer reports the
        // loss at valid_until.
        const auto retry = now + renewal_retry_delay(self.options.ttl);
        self.next_renewal = retry < self.valid_until ? retry : steady_clock::time_point::max();
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

void lease_state::start_extend(std::chrono::milliseconds ttl, bool from_renewal,
                               std::shared_ptr<user_operation> caller) {
  const auto start = steady_clock::now();
  const sent_extension sent{++extensions_sent,
                            start + ttl - drift_allowance(ttl, client->options().drift_factor)};
  // From now on the extension may run on any node, whatever its answer will be: it can only
  // shorten what we may claim until a quorum confirms it (see lease_state).
  valid_until = std::min(valid_until, sent.cap);
  unconfirmed_extensions.push_back(sent);
  longest_ttl = std::max(longest_ttl, ttl);
  if (from_renewal) {
    renewal_in_flight = true;
    next_renewal = steady_clock::time_point::max();  // until it is decided
  } else if (options.auto_renew && !renewal_in_flight && !renewal_stopped_by_max_hold) {
    // A shorter validity needs an earlier renewal; a longer one is planned when confirmed.
    next_renewal = std::min(next_renewal, valid_until - options.ttl / 2);
  }
  arm_timer();
  std::make_shared<extend_op>(shared_from_this(), ttl, sent.id, from_renewal, std::move(caller))
      ->run();
}

void lease_state::lose(std::string why) {
  diagnostics = std::move(why);
  client->log(log_level::warning, diagnostics);
  // Whatever is left of our key on a minority of nodes would only expire: delete it now, and
  // before the next local waiter's SET is queued, so that on every node our DEL runs first.
  release_on_nodes();
  stop_holding(phase::lost, make_error_code(error::lock_lost));
}

void lease_state::stop_holding(phase next, error_code waiters_get) {
  if (current != phase::held) return;
  current = next;
  ++timer_generation;
  timer.cancel();
  client->untrack_lease(this);
  auto waiters = std::move(lost_waiters);
  lost_waiters.clear();
  for (auto& waiter : waiters)
    waiter->finish(waiters_get);
  // Last: the next local waiter's SET is queued behind whatever this lease sent before.
  client->holder_gone(*this);
}

namespace {

// Ends a held lease whose handle is going away: stop renewing, release best effort.
void abandon(const std::shared_ptr<lease_state>& state) {
  if (state->current != lease_state::phase::held) return;
  if (!state->client->closed()) state->release_on_nodes();
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

// async_release: token-checked DEL on every node.
class release_op final : public operation_vote {
 public:
  release_op(std::shared_ptr<lease_state> state, void_caller&& caller)
      : operation_vote(state->client, std::move(caller)), state_(std::move(state)) {}

  void run() {
    const auto how = state_->client->release_of(*state_);
    report_gone_keys_ = how.next_waiter_competes;
    state_->client->fan_out_release(state_->resource, state_->token, how.channel,
                                    state_->longest_ttl, payload_, *this, open_ballot());
  }

 private:
  node_answer::kind classify(error_code ec, const resp::value& reply,
                             std::string& detail) override {
    return classify_script_reply(ec, reply, detail);
  }

  void on_node_answer(std::size_t node, const node_answer& answer) override {
    // Deleted, or not ours: gone either way (client_impl::lease_release).
    if (report_gone_keys_ &&
        (answer.what == node_answer::kind::yes || answer.what == node_answer::kind::no)) {
      state_->client->key_gone_on_node(node, state_->resource);
    }
  }

  std::optional<error_code> decide(const tally& t) override {
    if (t.no_quorum()) return make_error_code(error::not_held);
    if (t.too_many_failed()) return make_error_code(error::no_quorum);
    if (t.no_quorum_impossible() && t.too_many_failed_impossible()) return error_code{};
    return std::nullopt;
  }

  void decided(error_code ec) override {
    if (ec) {
      state_->diagnostics = fmt::format(
          "redlock: releasing {}: {}: {}", quoted_resource(state_->resource), ec.message(),
          state_->client->describe(answers(), "released", "not ours", nullptr,
                                   quoted_keys({state_->resource})));
    }
    finish(ec);
  }

  std::shared_ptr<lease_state> state_;
  std::string payload_;  // read by the connections until every node has answered
  bool report_gone_keys_ = false;
};

// async_wait_lost: kept in the lease's list while it waits, and out of it as soon as it is done
// (cancelled, or the client shut down), so that a watchdog that waits and gives up again and again
// costs nothing that grows.
class lost_waiter final : public user_operation {
 public:
  lost_waiter(const std::shared_ptr<lease_state>& state, void_caller&& caller)
      : user_operation(state->client, std::move(caller)), state_(state) {}

 private:
  void on_finished() override {
    if (auto state = state_.lock()) {
      const auto keep_alive = shared_from_this();  // the list may hold the last reference
      std::erase_if(state->lost_waiters,
                    [this](const auto& waiter) { return waiter.get() == this; });
    }
  }

  std::weak_ptr<lease_state> state_;
};

}  // namespace

void initiate_release(const std::shared_ptr<lease_state>& state, void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  auto op = std::make_shared<release_op>(state, std::move(caller));
  if (state->client->closed()) return op->finish(asio::error::operation_aborted);
  if (state->current != lease_state::phase::held) {
    state->diagnostics =
        fmt::format("redlock: {} is not held by this lease", quoted_resource(state->resource));
    return op->finish(error::not_held);
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
  // Total cancellation is not honoured: once sent, the extension may apply whatever the caller
  // does, so it cannot be undone, only stopped being waited for (terminal, partial).
  auto op = std::make_shared<user_operation>(
      state->client, std::move(caller),
      asio::cancellation_type::terminal | asio::cancellation_type::partial);
  if (state->client->closed()) return op->finish(asio::error::operation_aborted);
  if (!state->is_held()) return op->finish(error::not_held);
  const auto drift = drift_allowance(ttl, state->client->options().drift_factor);
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

void initiate_wait_lost(const std::shared_ptr<lease_state>& state, void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  auto op = std::make_shared<lost_waiter>(state, std::move(caller));
  switch (state->current) {
    case lease_state::phase::lost:
      return op->finish(error::lock_lost);
    case lease_state::phase::never_held:
      return op->finish(error::not_held);
    case lease_state::phase::released:
      return op->finish(asio::error::operation_aborted);
    case lease_state::phase::held:
      break;
  }
  if (state->client->closed()) return op->finish(asio::error::operation_aborted);
  state->lost_waiters.push_back(op);
  op->start();
}

const std::shared_ptr<lease_state>& client_impl::state_of(const lease& handle) noexcept {
  return handle.state_;
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
  // Any thread may get here. Only the phase is read before the hop to the client's executor (an
  // atomic, and one that never returns to `held`); the client and its executor are fixed at
  // construction. Then inline when already on the executor (the usual case), else posted.
  if (!state_ ||
      state_->current.load(std::memory_order_acquire) != detail::lease_state::phase::held) {
    return;
  }
  try {
    const auto& executor = state_->client->executor();
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
  return state_ && state_->current != detail::lease_state::phase::never_held ? state_->token : none;
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

std::optional<std::uint64_t> lease::fencing_token() const noexcept {
  if (!state_ || state_->current == detail::lease_state::phase::never_held) return std::nullopt;
  return state_->fencing_token;
}

std::size_t lease::granted_nodes() const noexcept {
  return state_ ? state_->granted_nodes.load() : 0;
}

}  // namespace redlock
