#include "ops/extend.hpp"

#include "algo/extension_validity.hpp"
#include "algo/replies.hpp"
#include "algo/validity.hpp"
#include "block_cache.hpp"
#include "clock.hpp"
#include "lock/lease_state.hpp"
#include "lock/scripts.hpp"
#include "ops/lease_end.hpp"
#include "ops/lock_requests.hpp"
#include "ops/vote.hpp"
#include "text.hpp"

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <string_view>
#include <vector>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Carries out what the lease's machine asks; a user's extension (`caller`) goes with the one
// extension it asks for that is not the renewal's.
void carry_out(lease_state& lease, std::shared_ptr<user_operation> caller = nullptr);

// One extension of a held lease, for the renewal task (no caller) or for async_extend.
class extend_op final : public vote, public std::enable_shared_from_this<extend_op> {
 public:
  extend_op(std::shared_ptr<lease_state> state, std::chrono::milliseconds ttl, std::uint64_t id,
            bool from_renewal, std::shared_ptr<user_operation> caller)
      : vote(space_of(*state).nodes().size(), vote_replies::token_script),
        state_(std::move(state)),
        ttl_(ttl),
        id_(id),
        from_renewal_(from_renewal),
        caller_(std::move(caller)) {}

  // The key, token and TTL this extension sends, for a batch (extension_batch).
  const std::string& key() const noexcept { return state_->resource(); }
  const std::string& token() const noexcept { return state_->token(); }
  std::chrono::milliseconds ttl() const noexcept { return ttl_; }
  // Whether its lease still holds: a batch does not send the extensions of leases released or
  // lost while it gathered.
  bool still_wanted() const noexcept { return state_->current() == lease_state::phase::held; }
  // Joins a batch: the batch hands it each node's answer for its key as on_reply(tag + node).
  std::size_t join_batch() { return open_ballot(); }

  // How long each node's answer is waited for beyond node_timeout (request_rules::wait_at_least).
  // A renewal waits while its lease is valid: a confirmation counts until then
  // (extension_validity::confirm), and its validity counts from when it was sent, so a late answer
  // is as safe as a prompt one. On a loaded machine or server, answers that take longer than
  // node_timeout would otherwise fail renewal after renewal (each retry queues behind the same
  // backlog) until leases that every node still holds are lost. A user's extension keeps
  // node_timeout: its caller hears of a node that does not answer as soon as it did before.
  std::chrono::milliseconds wait_at_least() const {
    if (!from_renewal_) return std::chrono::milliseconds(0);
    const auto left = state_->renewal().validity().valid_until() - lock_clock::now();
    return std::chrono::ceil<std::chrono::milliseconds>(
        std::max(left, lock_clock::duration::zero()));
  }

  void run() {
    const std::string ttl_text = std::to_string(ttl_.count());
    const std::string_view args[] = {state_->token(), ttl_text};
    auto& nodes = space_of(*state_).nodes();
    const auto slot = resource_slot_for(nodes, *state_);
    if (state_->kind() == hold_kind::set) {
      // A set extends every key of the set, or none.
      const std::vector<std::string_view> keys(state_->resources().begin(),
                                               state_->resources().end());
      payload_ = encode_evalsha(multi_extend_script(), keys, args);
      nodes.send(state_->resource(), payload_, *this, open_ballot(),
                 waiting(rules_of(lock_request::multi_extend)), nullptr, slot);
      return;
    }
    const std::string_view keys[] = {state_->resource(), state_->companion_key()};
    const auto used_keys = std::span(keys, state_->companion_key().empty() ? 1 : 2);
    // A reader moves its own deadline in the readers' set; a lock or a writer extends its key.
    const bool reader = state_->kind() == hold_kind::reader;
    payload_ = encode_evalsha(reader ? rw_read_extend_script() : extend_script(), used_keys, args);
    nodes.send(state_->resource(), payload_, *this, open_ballot(),
               waiting(rules_of(reader ? lock_request::read_extend : lock_request::extend)),
               nullptr, slot);
  }

 private:
  std::shared_ptr<void> owner() override { return shared_from_this(); }

  request_rules waiting(request_rules rules) const {
    rules.wait_at_least = wait_at_least();
    return rules;
  }

  std::optional<error_code> decide(const tally& t) override { return extension_outcome(t); }

  void decided(error_code ec) override {
    lease_state& self = *state_;
    const bool held = self.current() == lease_state::phase::held;
    // One reading for the outcome and the plan after it: a clock read per renewal fewer.
    const auto now = lock_clock::now();
    ec = self.renewal().extension_decided(id_, from_renewal_, ec, now);
    if (!held) {
      self.report(&observer::on_extend, error::not_held);
      if (caller_) caller_->finish(error::not_held);
      return;
    }
    self.report(&observer::on_extend, ec);  // before a loss it may cause
    if (ec == error::not_held) {
      lose(self, fmt::format("redlock: {} is gone or owned by someone else on {} of {} nodes: {}",
                             self.subject(), votes().no_count(), votes().nodes(),
                             space_of(self).nodes().describe(answers(), "extended", "not ours",
                                                             nullptr, self.keys())));
    } else if (ec) {
      self.diagnose(fmt::format("redlock: extending {} failed ({}): {}", self.subject(),
                                ec.message(),
                                space_of(self).nodes().describe(answers(), "extended", "not ours",
                                                                nullptr, self.keys())));
      space_of(self).log(log_level::warning, self.diagnostics());
    } else {
      self.diagnose({});
    }
    if (self.current() == lease_state::phase::held) {
      self.renewal().plan_after_extension(from_renewal_, bool(ec), now);
      carry_out(self);
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

// The renewals of many leases, gathered in one turn of the executor and sent as one
// batch_extend_script request per node. Each lease keeps its own extend_op, which decides from its
// own key's answers exactly as from a request of its own: a node's answer for the whole batch
// (a timeout, a reset, NOSCRIPT, READONLY) is every member's answer.
//
// Only renewals of plain locks on nodes that are no cluster go in a batch: a cluster's keys live
// in different hash slots, which one script cannot span. A lone renewal goes as a batch of one:
// every renewal of a plain lock runs the one script, which the simulation then checks as often.
//
// Safety is the single extension's: the script compares each key with its token, and each
// extension's validity counts from when its lease asked for it, which is no later than when the
// batch is sent.
class extension_batch final : public fan_out_sink,
                              public std::enable_shared_from_this<extension_batch> {
 public:
  // Past this many keys the batch is sent at once and a new one gathers: a script blocks its
  // server while it runs, and 256 keys keep that to a few hundred microseconds.
  static constexpr std::size_t most_keys = 256;

  explicit extension_batch(lock_space& space)
      : fan_out_sink(space.nodes().size()), gathered_by_(space.weak_from_this()) {}

  // Adds `op` to the batch the space gathers now, which is sent at the end of this turn of the
  // executor or once it is full.
  static void gather(lock_space& space, std::shared_ptr<extend_op> op) {
    auto& gathering = space.gathering_renewals;
    if (!gathering) {
      gathering = std::make_shared<extension_batch>(space);
      asio::post(space.executor(), [batch = gathering] { batch->send(); });
    }
    const std::size_t tag = op->join_batch();
    gathering->members_.push_back({std::move(op), tag});
    if (gathering->members_.size() == most_keys) gathering->send();
  }

  // Sends the batch the space gathers now, if any. Called before any other extension goes out:
  // a lease's machine counts on its extensions applying on each node in the order it asked for
  // them (the last one applied sets the key's TTL), and a renewal gathered earlier in this turn
  // would otherwise reach the nodes after a user's extension asked for later, and shorten it.
  static void send_gathered(lock_space& space) {
    if (const auto gathering = space.gathering_renewals) gathering->send();
  }

 private:
  struct member {
    std::shared_ptr<extend_op> op;
    std::size_t tag;  // the tag of its node 0 in its own ballot
  };

  void send() {
    if (sent_) return;
    sent_ = true;
    // The space keeps the batch while it gathers, and the batch the space only once sent: a
    // client destroyed before the batch is sent does not leave the two holding each other.
    space_ = gathered_by_.lock();
    if (!space_) return;
    if (space_->gathering_renewals.get() == this) space_->gathering_renewals.reset();
    std::erase_if(members_, [](const member& m) { return !m.op->still_wanted(); });
    if (members_.empty()) return;
    std::vector<std::string_view> keys;
    std::vector<std::string> ttl_texts;
    std::vector<std::string_view> args;
    keys.reserve(members_.size());
    ttl_texts.reserve(members_.size());
    args.reserve(2 * members_.size());
    // The batch waits as long as its longest-lived member would alone: a member whose lease runs
    // out sooner is lost by its own timer, and its late answer changes nothing.
    auto rules = rules_of(lock_request::batch_extend);
    for (const member& m : members_) {
      keys.push_back(m.op->key());
      ttl_texts.push_back(std::to_string(m.op->ttl().count()));
      args.push_back(m.op->token());
      args.push_back(ttl_texts.back());
      rules.wait_at_least = std::max(rules.wait_at_least, m.op->wait_at_least());
    }
    payload_ = encode_evalsha(batch_extend_script(), keys, args);
    space_->nodes().send(keys.front(), payload_, *this, open_ballot(), rules);
  }

  std::shared_ptr<void> owner() override { return shared_from_this(); }

  void on_answer(std::size_t node, const error_code& ec, const resp::value& reply) override {
    // One answer per key, in the members' order; anything else is every member's answer.
    const bool per_key =
        !ec && reply.kind == resp::type::array && reply.elements.size() == members_.size();
    for (std::size_t i = 0; i < members_.size(); ++i) {
      members_[i].op->on_reply(members_[i].tag + node, ec, per_key ? reply.elements[i] : reply);
    }
  }

  std::weak_ptr<lock_space> gathered_by_;
  std::shared_ptr<lock_space> space_;  // from when it is sent
  std::vector<member> members_;
  std::string payload_;
  bool sent_ = false;
};

namespace {

// Whether a renewal of `lease` may go in a batch (extension_batch).
bool batches(const lease_state& lease) {
  return lease.kind() == hold_kind::lock && lease.companion_key().empty() &&
         !space_of(lease).nodes().has_cluster_node();
}

void renewal_timer_due(lease_state& lease) {
  if (lease.current() != lease_state::phase::held) return;
  lease.renewal().timer(lock_clock::now());
  carry_out(lease);
}

void carry_out(lease_state& lease, std::shared_ptr<user_operation> caller) {
  while (const auto action = lease.renewal().next_action()) {
    switch (action->what) {
      case lease_action::kind::arm_timer:
        lease.renewal_timer().arm(action->at, &renewal_timer_due);
        break;
      case lease_action::kind::send_extension: {
        // One per renewal of every lease: its memory is recycled (block_cache.hpp).
        auto op = std::allocate_shared<extend_op>(
            cached_allocator<extend_op>(), lease.shared_from_this(), action->ttl, action->id,
            action->from_renewal, action->from_renewal ? nullptr : std::move(caller));
        if (action->from_renewal && batches(lease)) {
          extension_batch::gather(space_of(lease), std::move(op));
        } else {
          extension_batch::send_gathered(space_of(lease));
          op->run();
        }
        break;
      }
      case lease_action::kind::expire:
        lose(lease, lease.why_expired());
        break;
    }
  }
}

}  // namespace

void renew_at_once(lease_state& lease) {
  if (!lease.is_held()) return;
  lease.renewal().renew_now(lock_clock::now());
  carry_out(lease);
}

void start_renewal(lease_state& lease) {
  carry_out(lease);
}

void initiate_extend(const std::shared_ptr<lease_state>& state, std::chrono::milliseconds ttl,
                     void_caller caller) {
  if (!state) return complete_without_state(std::move(caller.handler), error::not_held);
  // Total cancellation is not honoured: once sent, the extension may apply whatever the caller
  // does, so it cannot be undone, only stopped being waited for (terminal, partial).
  auto op = std::make_shared<user_operation>(
      shared_space_of(*state), state->home()->executor(), std::move(caller),
      asio::cancellation_type::terminal | asio::cancellation_type::partial);
  const auto refuse = [&](error_code ec) {
    state->report(&observer::on_extend, ec);
    op->finish(ec);
  };
  if (space_of(*state).closed()) return refuse(asio::error::operation_aborted);
  if (!state->is_held()) return refuse(error::not_held);
  const auto drift = drift_allowance(ttl, space_of(*state).options().drift_factor);
  if (ttl <= drift) {
    state->diagnose(
        fmt::format("redlock: cannot extend {} by {} ms: not longer than "
                    "the drift allowance of {} ms",
                    state->subject(), ttl.count(), to_ms(drift)));
    return refuse(error::invalid_argument);
  }
  op->start();
  state->renewal().extend(ttl, lock_clock::now());
  carry_out(*state, std::move(op));
}

}  // namespace redlock::detail
