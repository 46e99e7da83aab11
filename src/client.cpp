#include "redlock/client.hpp"

#include "algo/acquire_round.hpp"
#include "algo/release_watch.hpp"
#include "algo/slot_watch.hpp"
#include "algo/validity.hpp"
#include "client_impl.hpp"
#include "options_check.hpp"
#include "redlock/semaphore.hpp"
#include "resp/encoder.hpp"
#include "test_hooks.hpp"
#include "text.hpp"
#include "token.hpp"
#include "vote.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/system/system_error.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace redlock::detail {

std::atomic<bool> skip_fence_write_back_for_tests{false};

namespace asio = boost::asio;
using boost::system::error_code;
using lock_request = client_impl::lock_request;

namespace {

// How a round asked for the key, which decides how its answers read. Each form accepts exactly
// the grants its request can answer: a reply of another shape is a failure, never a grant (a
// connection whose replies were matched to the wrong requests, as behind a broken proxy, must not
// turn another request's answer into a vote).
enum class set_form : std::uint8_t {
  plain,        // SET NX PX: OK, or nil
  asking_ttl,   // acquire_script: OK, or the holder's PTTL (or nil)
  fenced,       // fenced_acquire_script: {counter}, or the holder's PTTL (or nil)
  slot,         // semaphore_acquire_script: OK, or every slot's PTTL
  fenced_slot,  // the same with fencing: the counter, or every slot's PTTL
};

bool is_slot_form(set_form form) noexcept {
  return form == set_form::slot || form == set_form::fenced_slot;
}

// The fencing counter a grant carries, if any: {counter} from fenced_acquire_script, the counter
// itself from semaphore_acquire_script with fencing.
std::optional<std::uint64_t> granted_counter(const resp::value& reply, set_form form) {
  const resp::value* counter = &reply;
  if (form == set_form::fenced) {
    if (reply.kind != resp::type::array || reply.elements.size() != 1) return std::nullopt;
    counter = &reply.elements.front();
  } else if (form != set_form::fenced_slot) {
    return std::nullopt;
  }
  if (counter->kind != resp::type::integer || counter->integer < 1) return std::nullopt;
  return static_cast<std::uint64_t>(counter->integer);
}

// A semaphore round's refusal: the PTTL reply of every slot on that node, or empty when `reply`
// is not one (a grant, an error). The script sends them as one string, "ttl,ttl,...".
std::vector<long long> slot_ttls_of(const resp::value& reply) {
  std::vector<long long> ttls;
  if (!reply.is_string() || reply.kind == resp::type::simple_string) return ttls;
  const std::string_view text = reply.text;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    long long ttl = 0;
    const auto [stop, problem] = std::from_chars(text.data() + start, text.data() + end, ttl);
    if (problem != std::errc{} || stop != text.data() + end) return {};
    ttls.push_back(ttl);
    start = end + 1;
  }
  return ttls;
}

// The number of permits a node records for a semaphore whose record disagrees with the round's:
// the script's ["permits", N] answer; empty for any other reply.
std::optional<std::size_t> recorded_permits(const resp::value& reply) {
  if (reply.kind != resp::type::array || reply.elements.size() != 2 ||
      reply.elements[0].text != "permits") {
    return std::nullopt;
  }
  std::size_t permits = 0;
  const std::string_view text = reply.elements[1].text;
  const auto [stop, problem] = std::from_chars(text.data(), text.data() + text.size(), permits);
  if (problem != std::errc{} || stop != text.data() + text.size()) return std::nullopt;
  return permits;
}

// An acquire's answer from one node: granted, held by someone else, or failed.
node_answer::kind classify_set_reply(error_code ec, const resp::value& reply, set_form form,
                                     std::string& detail) {
  if (ec) {
    detail = reply.text;
    return node_answer::kind::failed;
  }
  const bool ok = reply.kind == resp::type::simple_string && reply.text == "OK";
  switch (form) {
    case set_form::plain:
      if (ok) return node_answer::kind::yes;
      if (reply.is_null()) return node_answer::kind::no;
      break;
    case set_form::asking_ttl:
    case set_form::fenced:
      if (form == set_form::asking_ttl ? ok : granted_counter(reply, form).has_value())
        return node_answer::kind::yes;
      // The holder's PTTL, or nil when it could not be read.
      if (reply.is_null() || reply.kind == resp::type::integer) return node_answer::kind::no;
      break;
    case set_form::slot:
    case set_form::fenced_slot:
      if (form == set_form::slot ? ok : granted_counter(reply, form).has_value())
        return node_answer::kind::yes;
      if (!slot_ttls_of(reply).empty()) return node_answer::kind::no;
      if (const auto recorded = recorded_permits(reply)) {
        detail = fmt::format("it records {} permits for this semaphore", *recorded);
        return node_answer::kind::failed;
      }
      break;
  }
  detail = unexpected_reply(reply);
  return node_answer::kind::failed;
}

}  // namespace

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

  fence_write_back(std::shared_ptr<client_impl> client, on_decided done)
      : ballot_sink(client->size()),
        client_(std::move(client)),
        done_(std::move(done)),
        answers_(client_->size()) {}

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
    client_->fan_out(payload_, *this, first_tag_,
                     client_->options_for(lock_request::fence_write_back), &targets);
  }

  // A node's answer to the round, after its decision: `counter` if it granted.
  void late_answer(std::size_t node, std::optional<std::uint64_t> counter) {
    if (decided_) return;
    --pending_;
    if (counter && needs_raising(node, *counter)) {
      std::vector<bool> only(answers_.size(), false);
      only[node] = true;
      client_->fan_out(payload_, *this, first_tag_,
                       client_->options_for(lock_request::fence_write_back), &only);
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
    const std::size_t quorum = client_->quorum();
    if (confirmed_ < quorum && confirmed_ + awaited_ + pending_ >= quorum) return false;
    decided_ = true;
    done_(confirmed_ >= quorum, answers_);
    return true;
  }

  std::shared_ptr<void> owner() override { return shared_from_this(); }

  void on_answer(std::size_t node, error_code ec, const resp::value& reply) override {
    std::string detail;
    const auto what = classify_script_reply(ec, reply, detail);
    answers_[node] = make_answer(what, ec, reply, std::move(detail));
    --awaited_;
    if (what == node_answer::kind::yes) ++confirmed_;
    decide();
  }

  std::shared_ptr<client_impl> client_;
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

// One async_acquire or async_try_acquire, from the local queue through rounds and waits to one
// completion. What a round's answers mean is acquire_round's, when the lock can be free
// release_watch's; this is the plumbing around them.
//
// Stages: queued (behind a local holder or waiter; nothing sent), in_round (SETs in flight),
// fencing (with lock_options::fencing: a held round's write-back in flight, see write_back_fence),
// subscribing (after the first refusal: until the release announcements are subscribed),
// sleeping (until the lock can be free), finished. Invariant: an op that is in its resource queue
// is not finished, and the queue's first op is the only one that may be in_round, subscribing or
// sleeping.
//
// How a waiting acquire learns that the lock is free (client_options::release_channel):
//  - From its first refusal on, the op holds an interest in release announcements, so the client
//    subscribes on every node. Its second round waits until that subscription is in place (or its
//    node known down): a release between the refusal and the subscription would be missed, and
//    the second round sees its effect instead. No lost wake-up.
//  - Every round after the first sets the key with acquire_script, which answers a refusal with
//    the key's PTTL, so a refused round knows when the holder's key expires at the latest.
//  - Sleeping, it wakes on an announcement that may free a quorum (after client_impl::wake_jitter),
//    or when a quorum can have expired (release_watch::free_by), or at its deadline. Its backoff
//    only matters when that is not enough: announcements off or a node not subscribed, or no
//    expiry known (a key without TTL, failing nodes).
//  - A subscription that comes back after a reconnect wakes it: announcements may have been lost.
//  - Such news that comes while its own round is in flight is kept until the round is lost
//    (heard_during_round); the next round then follows after a collision backoff
//    (wake_after_news_heard_in_round).
class acquire_op final : public abortable,
                         public ballot_sink,
                         public std::enable_shared_from_this<acquire_op> {
 public:
  acquire_op(std::shared_ptr<client_impl> client, std::string resource, const lock_options& options,
             bool single_round, caller_handler<acquire_signature>&& caller)
      : ballot_sink(client->size()),
        client_(std::move(client)),
        lease_(std::make_shared<lease_state>(client_, std::move(resource), options)),
        single_round_(single_round),
        done_(std::move(caller.handler), client_->executor(), caller.on_client_executor),
        retry_(options.retry) {}

  // A semaphore's acquire instead of a lock's: each round tries one of `permits` slot locks; see
  // permit_plan. Called before start().
  void for_semaphore(std::string name, std::size_t permits) {
    auto& plan = permits_.emplace();
    plan.name = std::move(name);
    plan.count = permits;
    plan.queue_key = permit_queue_key(plan.name);
    if (permits <= semaphore::max_permits) {
      plan.watch.reset_unknown(permits);
      plan.tried_in_this_try.assign(permits, false);
      for (std::size_t slot = 0; slot < permits; ++slot)
        plan.slot_keys.push_back(plan.queue_key + std::to_string(slot));
      plan.key_views.assign(plan.slot_keys.begin(), plan.slot_keys.end());
      plan.permits_text = std::to_string(permits);
    }
    lease_->resource = plan.queue_key + "0";  // each round sets the slot it tries
    // Extended with every slot lease, so that it lives as long as the permits are held.
    lease_->companion_key = semaphore_permits_key(plan.name);
    plan.key_views.push_back(lease_->companion_key);
  }

  void start() {
    if (client_->closed()) {
      lease_->diagnostics = "the client is shut down";
      return done_.complete(asio::error::operation_aborted, make_lease());
    }
    if (permits_) {
      if (auto problem = check_semaphore(); !problem.empty()) {
        lease_->diagnostics = fmt::format("redlock: cannot acquire a permit of semaphore {}: {}",
                                          quoted_resource(permits_->name), problem);
        return done_.complete(error::invalid_argument, make_lease());
      }
    }
    if (auto problem = check_lock_options(lease_->resource, lease_->options, client_->options());
        !problem.empty()) {
      lease_->diagnostics = fmt::format("redlock: cannot acquire {}: {}", subject(), problem);
      return done_.complete(error::invalid_argument, make_lease());
    }
    if (const auto& duplicates = client_->duplicate_nodes(); !duplicates.empty()) {
      lease_->diagnostics = fmt::format("redlock: cannot acquire {}: {}", subject(), duplicates);
      return done_.complete(error::invalid_argument, make_lease());
    }
    lease_->token = make_lock_token();
    encode_set(set_command_);
    if (lease_->options.wait) deadline_ = steady_clock::now() + *lease_->options.wait;

    const std::string& queue_key = permits_ ? permits_->queue_key : lease_->resource;
    if (single_round_) {
      const resource_queue* busy = client_->find_queue(queue_key);
      // A semaphore's own leases do not make it busy: a try skips the slots they hold.
      if (permits_ && busy != nullptr && busy->waiters.empty()) busy = nullptr;
      if (busy != nullptr && (busy->holder != nullptr || !busy->waiters.empty())) {
        lease_->diagnostics =
            permits_
                ? fmt::format("redlock: another acquire of this client waits for a permit of {}",
                              quoted_resource(permits_->name))
                : fmt::format("redlock: {} is held or awaited by another lease of this client",
                              subject());
        return done_.complete(error::contended, make_lease());
      }
    }

    client_->track(this);
    done_.on_cancel([weak = weak_from_this()](asio::cancellation_type type) {
      if (auto self = weak.lock()) self->cancel(type);
    });
    queue_ = &client_->queue_for(queue_key);
    if (permits_) {
      queue_->semaphore = true;
      if (queue_->slot_holders.size() < permits_->count)
        queue_->slot_holders.resize(permits_->count, nullptr);
    }
    queue_->waiters.push_back(shared_from_this());
    if (queue_->holder == nullptr && queue_->waiters.size() == 1) {
      begin_round();
    } else {
      stage_ = stage::queued;
      // Subscribed by the time a hand-off limit makes it compete with other processes.
      listen();
      arm_timer(deadline_);
    }
  }

  // The resource became free locally and this op is first in line: try at once.
  void wake() {
    if (stage_ == stage::queued) begin_round();
  }

  // The local holder released after its hand-off limit, announcing it: wait for that announcement
  // like a waiter in another process would. The key is gone by `key_gone_by` at the latest.
  void compete(steady_clock::time_point key_gone_by) {
    if (stage_ != stage::queued) return;
    const auto now = steady_clock::now();
    competing_ = true;
    watch_.reset_all_held(client_->size(), client_->quorum(), key_gone_by);
    sleep(now);
  }

  // `node` announced that `resource` (of a semaphore: slot `slot` of it) was released there, or
  // the holder's release found it gone there (client_impl::key_gone_on_node).
  void announced(std::size_t node, std::size_t slot = 0) {
    if (round_in_flight()) return heard_.release(slot, node);
    if (stage_ != stage::sleeping || woken_) return;
    forget_holder(slot, node);
    // The first announcement that may free a quorum wakes the op; the other copies of the same
    // release find it woken.
    if (may_be_free()) wake_soon();
  }

  // A semaphore's lease of this client released slot `slot`: its DEL is queued on every node
  // ahead of anything this op sends now, so the slot is free for our next round.
  void permit_released_here(std::size_t slot) {
    if (!permits_) return;
    for (std::size_t node = 0; node < client_->size(); ++node) {
      if (round_in_flight()) {
        heard_.release(slot, node);
      } else {
        forget_holder(slot, node);
      }
    }
    if (stage_ == stage::queued || stage_ == stage::sleeping || stage_ == stage::subscribing)
      begin_round();
  }

  // The subscription on `node` is now in place (`subscribed`) or not.
  void subscription_changed(bool subscribed) {
    if (stage_ == stage::subscribing) {
      if (client_->listener() == nullptr || client_->listener()->all_settled()) wake_soon();
      return;
    }
    if (round_in_flight()) {
      if (subscribed) heard_.resubscribed = true;
      return;
    }
    if (stage_ != stage::sleeping || woken_) return;
    // Back after a reconnect: whatever was announced meanwhile is lost, so look again.
    if (subscribed) return wake_soon();
    // Announcements from that node no longer arrive: the backoff matters again.
    plan_wake(steady_clock::now());
  }

  void abort() override { cancel(asio::cancellation_type::terminal); }

 private:
  enum class stage : std::uint8_t {
    idle,
    queued,
    in_round,
    fencing,  // a held round's fencing write-back in flight
    subscribing,
    sleeping,
    finished
  };

  struct holder_ttl {
    long long pttl_ms;
    steady_clock::time_point at;
  };

  // A semaphore acquire (for_semaphore): which slot the current round tries and what is known of
  // the others. A slot lease is a lock lease of the slot's key: the lease's resource is set to the
  // tried slot's key each round, with a fresh token, and everything after the acquire (renewal,
  // loss, release, fencing with the slot's own counter) is the lock's.
  struct permit_plan {
    std::string name;
    std::size_t count = 0;
    std::string queue_key;  // permit_queue_key(name); slot i's key is this + i
    slot_watch watch;
    std::size_t tried = 0;
    std::vector<slot_watch::slot_ttls> reports;  // the current round's refusals, by node
    std::vector<bool> tried_in_this_try;         // async_try_acquire tries each slot once at most
    std::vector<std::string> slot_keys;          // by slot, made once: every round names them all
    std::vector<std::string_view> key_views;     // of slot_keys and the permits record
    std::string permits_text;                    // `count` in decimal
    // A node whose permits record disagrees with `count`, and the number it records.
    std::optional<std::pair<std::size_t, std::size_t>> disagreement;
  };

  // What the diagnostics name: the lock's resource, or the semaphore and the slot last tried.
  std::string subject() const {
    if (!permits_) return quoted_resource(lease_->resource);
    return fmt::format("semaphore {} (slot {} of {})", quoted_resource(permits_->name),
                       permits_->tried, permits_->count);
  }

  // Why a semaphore cannot be used; empty when it can.
  std::string check_semaphore() const {
    if (permits_->name.empty()) return "its name is empty";
    if (permits_->count == 0 || permits_->count > semaphore::max_permits) {
      return fmt::format("permits must be between 1 and {}, not {}", semaphore::max_permits,
                         permits_->count);
    }
    // A refusal carries every slot's PTTL as text (semaphore_acquire_script).
    const std::size_t refusal_bytes = permits_->count * semaphore_refusal_bytes_per_permit + 256;
    if (refusal_bytes > client_->options().replies.max_reply_memory) {
      return fmt::format(
          "a refusal of {} permits takes up to {} bytes, more than "
          "client_options::replies.max_reply_memory ({})",
          permits_->count, refusal_bytes, client_->options().replies.max_reply_memory);
    }
    return {};
  }

  // The slots not to try: those this client's leases hold, and in a try those it has tried.
  std::vector<bool> held_here() const {
    std::vector<bool> held(permits_->count, false);
    for (std::size_t slot = 0; slot < held.size() && slot < queue_->slot_holders.size(); ++slot)
      held[slot] = queue_->slot_holders[slot] != nullptr || permits_->tried_in_this_try[slot];
    return held;
  }

  // Whether trying again may succeed now, as far as the last round and announcements tell.
  bool may_be_free() const {
    if (!permits_) return watch_.may_be_free();
    const auto held = held_here();
    for (std::size_t slot = 0; slot < held.size(); ++slot) {
      if (!held[slot] && permits_->watch.may_be_free(slot)) return true;
    }
    return false;
  }

  // When trying again succeeds at the latest unless holders extend; see release_watch::free_by.
  std::optional<steady_clock::time_point> free_by() const {
    return permits_ ? permits_->watch.free_by(held_here()) : watch_.free_by();
  }

  // After a semaphore round that was not held: what its refusals tell of every slot, then what
  // was heard while it was in flight. Returns whether the next round is due at once.
  bool learn_from_slot_round(steady_clock::time_point now) {
    auto& plan = *permits_;
    plan.watch.reset(plan.tried, round_->answers(), plan.reports, client_->quorum(), now,
                     client_->options().drift_factor);
    watch_round_ = rounds_;
    return apply_heard();
  }

  // Whether SETs of the current round are in flight, or its held outcome is being written back:
  // news of the lock then waits in heard_ until the round's own answers are applied.
  bool round_in_flight() const noexcept {
    return stage_ == stage::in_round || stage_ == stage::fencing;
  }

  // The holder of `slot` (0 for a lock) is gone from `node`.
  void forget_holder(std::size_t slot, std::size_t node) {
    if (permits_) {
      permits_->watch.released(slot, node);
    } else {
      watch_.released(node);
    }
  }

  // Applies what was heard during the round that was just decided without the lock; true when
  // it makes the next round due at once: a release that may free a quorum, or a subscription that
  // came back (whatever was announced while it was down is lost).
  bool apply_heard() {
    for (const auto& [slot, node] : heard_.releases)
      forget_holder(slot, node);
    const bool due = heard_.resubscribed || (!heard_.releases.empty() && may_be_free());
    heard_.clear();
    return due;
  }

  lease make_lease() { return client_impl::make_lease(lease_); }

  void encode_set(std::string& out) const {
    const std::string ttl = std::to_string(lease_->options.ttl.count());
    resp::encode_command(out, {"SET", lease_->resource, lease_->token, "NX", "PX", ttl});
  }

  // The same SET through acquire_script, which also answers a refusal with the holder's PTTL.
  std::string encode_set_asking_ttl() const {
    const std::string ttl = std::to_string(lease_->options.ttl.count());
    const std::string_view keys[] = {lease_->resource};
    const std::string_view args[] = {lease_->token, ttl};
    return encode_evalsha(acquire_script(), keys, args);
  }

  // acquire_script's fencing variant, which also increments the fencing counter where it grants.
  std::string encode_fenced_set() const {
    const std::string ttl = std::to_string(lease_->options.ttl.count());
    const std::string counter = fencing_counter_key(lease_->resource);
    const std::string_view keys[] = {lease_->resource, counter};
    const std::string_view args[] = {lease_->token, ttl};
    return encode_evalsha(fenced_acquire_script(), keys, args);
  }

  // Every round has a token of its own. A request of an earlier round can still run on a node
  // after this round's SET: a cleanup release that met NOSCRIPT is resent as EVAL behind the
  // requests issued meanwhile, and a SET can sit in a slow node's queue. Were the token shared,
  // such a stale release would delete this round's key after the node had granted it, and the
  // client would count a vote it no longer has. With distinct tokens a stale request can only
  // delete or set keys of rounds that are over.
  //
  // The first round sends set_command_, which the op owns; later rounds do not rewrite it (requests
  // of earlier rounds may still be queued with a view of it) but give their requests their own
  // copy.
  //
  // Rounds after the first set the key through acquire_script, whose refusal carries the holder's
  // PTTL: what a refusal needs to bound the wait, in one request per node. The first round of an
  // uncontended lock, or of a local hand-off, sends a plain SET (no script to run); that of an op
  // competing after a hand-off limit asks, and if every node was subscribed when it was sent, a
  // refusal needs no second look (see decided).
  void begin_round() {
    if (permits_) return begin_slot_round();
    stage_ = stage::in_round;
    woken_ = false;
    heard_.clear();
    // Only an op that listens can be covered, so an uncontended acquire never touches the
    // listener.
    if (competing_ && listening_) {
      const auto* listener = client_->listener();
      covered_round_ = listener != nullptr && listener->all_subscribed();
    } else {
      covered_round_ = false;
    }
    if (lease_->options.fencing) {
      // Every round, the first included: the counter must be incremented by the SET's own
      // script, where nothing can run between the grant and the increment.
      if (rounds_++ > 0) lease_->token = make_lock_token();
      open_round(set_form::fenced);
      holder_ttls_.assign(client_->size(), std::nullopt);
      fences_.assign(client_->size(), std::nullopt);
      client_->fan_out(std::make_shared<const std::string>(encode_fenced_set()), *this,
                       open_ballot(), client_->options_for(lock_request::fenced_set));
      return;
    }
    if (rounds_++ == 0 && !competing_) {
      open_round(set_form::plain);
      client_->fan_out(set_command_, *this, open_ballot(), client_->options_for(lock_request::set));
      return;
    }
    if (rounds_ > 1) lease_->token = make_lock_token();
    open_round(set_form::asking_ttl);
    holder_ttls_.assign(client_->size(), std::nullopt);
    client_->fan_out(std::make_shared<const std::string>(encode_set_asking_ttl()), *this,
                     open_ballot(), client_->options_for(lock_request::set_asking_ttl));
  }

  void open_round(set_form form) {
    round_.emplace(acquire_round::settings{.nodes = client_->size(),
                                           .ttl = lease_->options.ttl,
                                           .drift_factor = client_->options().drift_factor,
                                           .start = steady_clock::now()});
    form_ = form;
    holder_ttls_.clear();  // no allocation: most rounds ask no PTTL
  }

  // A semaphore round: semaphore_acquire_script on one slot that no lease of this client holds,
  // drawn as slot_watch::choose says (before the first refusal: any of those). When the last
  // refusals show every slot held, a random one is tried anyway: the wait before this round was
  // bounded by the backoff or the holders' TTLs, and a round is how to look again.
  void begin_slot_round() {
    auto& plan = *permits_;
    const auto held = held_here();
    auto slot = plan.watch.choose(held, client_->random());
    if (!slot) {
      slot_watch any;
      any.reset_unknown(plan.count);
      slot = any.choose(held, client_->random());
    }
    if (!slot) {
      // Every slot is held by this client (only one of its releases can help), or in a try was
      // tried already (not reached: a try goes on only while an untried slot may be free).
      if (single_round_) {
        lease_->diagnostics = fmt::format(
            "redlock: every one of the {} permits of semaphore {} is held by this client",
            plan.count, quoted_resource(plan.name));
        return finish(error::contended);
      }
      stage_ = stage::queued;
      return arm_timer(deadline_);
    }
    stage_ = stage::in_round;
    woken_ = false;
    heard_.clear();
    covered_round_ = false;
    plan.tried = *slot;
    if (single_round_) plan.tried_in_this_try[*slot] = true;
    lease_->resource = plan.slot_keys[*slot];
    if (rounds_++ > 0) lease_->token = make_lock_token();
    open_round(lease_->options.fencing ? set_form::fenced_slot : set_form::slot);
    plan.reports.assign(client_->size(), {});
    plan.disagreement.reset();
    if (lease_->options.fencing) fences_.assign(client_->size(), std::nullopt);

    // Every slot's key and the permits record, then with fencing the tried slot's counter (only
    // for this call).
    const std::string counter =
        lease_->options.fencing ? fencing_counter_key(lease_->resource) : "";
    if (lease_->options.fencing) plan.key_views.push_back(counter);
    const std::string tried = std::to_string(*slot + 1);
    const std::string ttl = std::to_string(lease_->options.ttl.count());
    std::vector<std::string_view> args = {tried, lease_->token, ttl, plan.permits_text};
    if (lease_->options.fencing) args.push_back("1");
    auto payload = std::make_shared<const std::string>(
        encode_evalsha(semaphore_acquire_script(), plan.key_views, args));
    if (lease_->options.fencing) plan.key_views.pop_back();
    client_->fan_out(payload, *this, open_ballot(), client_->options_for(lock_request::slot_set));
  }

  // A semaphore round's refusal that answers after the round was decided: taken into a sleeping
  // op's plan at once, as note_holder_ttl.
  void note_slot_report(std::size_t node, const slot_watch::slot_ttls& ttls,
                        steady_clock::time_point now) {
    if (stage_ != stage::sleeping || woken_ || watch_round_ != rounds_) return;
    permits_->watch.report(node, ttls, now, client_->options().drift_factor);
    if (may_be_free()) return wake_soon();
    plan_wake(now);
  }

  // A refusal that carries the holder's PTTL. One that answers after the round was decided is
  // taken into a sleeping op's plan at once.
  void note_holder_ttl(std::size_t node, long long pttl_ms, steady_clock::time_point now) {
    holder_ttls_[node] = holder_ttl{pttl_ms, now};
    if (stage_ != stage::sleeping || woken_ || watch_round_ != rounds_) return;
    watch_.holder_ttl(node, pttl_ms, now, client_->options().drift_factor);
    if (may_be_free()) return wake_soon();
    plan_wake(now);
  }

  std::shared_ptr<void> owner() override { return shared_from_this(); }

  void on_answer(std::size_t node, error_code ec, const resp::value& reply) override {
    std::string detail;
    const bool asked_ttl = !holder_ttls_.empty();
    const auto what = classify_set_reply(ec, reply, form_, detail);
    // Any answer may decide the round, and the decision reads what is known of the nodes then.
    if (!round_->decided()) {
      for (std::size_t i = 0; i < client_->size(); ++i)
        round_->set_failing_for_good(i, client_->connection_at(i).permanent_failure());
      if (!client_->duplicate_nodes().empty()) round_->set_nodes_not_independent();
    }
    const auto now = steady_clock::now();
    const bool carries_ttl = asked_ttl && !ec && reply.kind == resp::type::integer;
    if (carries_ttl && !round_->decided()) {
      holder_ttls_[node] = holder_ttl{reply.integer, now};
    }
    const bool carries_slots = is_slot_form(form_) && what == node_answer::kind::no;
    if (carries_slots && !round_->decided()) permits_->reports[node] = slot_ttls_of(reply);
    if (is_slot_form(form_) && !round_->decided() && !permits_->disagreement) {
      if (const auto recorded = recorded_permits(reply)) permits_->disagreement = {node, *recorded};
    }
    if (!fences_.empty() && !round_->decided() && what == node_answer::kind::yes) {
      fences_[node] = granted_counter(reply, form_);
    }
    switch (round_->answer(node, make_answer(what, ec, reply, std::move(detail)), now)) {
      case acquire_round::step::decided_now:
        return decided(now);
      case acquire_round::step::decided_before:
        if (carries_ttl) note_holder_ttl(node, reply.integer, now);
        if (carries_slots) note_slot_report(node, slot_ttls_of(reply), now);
        if (stage_ == stage::fencing && write_back_) {
          // A copy: late_answer may complete the acquire, which drops write_back_.
          const auto write_back = write_back_;
          write_back->late_answer(
              node, what == node_answer::kind::yes ? granted_counter(reply, form_) : std::nullopt);
        }
        return answered_after_decision(node);
      case acquire_round::step::undecided:
        return;
    }
  }

  // After a lock round that was not held: which nodes block the lock, and until when, then what
  // was heard while it was in flight. Returns whether the next round is due at once.
  bool learn_from_round() {
    watch_.reset(round_->answers(), client_->quorum());
    watch_round_ = rounds_;
    for (std::size_t i = 0; i < holder_ttls_.size(); ++i) {
      if (holder_ttls_[i] && round_->answers()[i].what == node_answer::kind::no) {
        watch_.holder_ttl(i, holder_ttls_[i]->pttl_ms, holder_ttls_[i]->at,
                          client_->options().drift_factor);
      }
    }
    return apply_heard();
  }

  void decided(steady_clock::time_point now) {
    if (stage_ != stage::in_round) return;  // cancelled meanwhile
    client_->note_round_trip(now - round_->start());
    const acquire_round::decision& round = round_->result();
    if (round.what == acquire_round::outcome::held) {
      if (lease_->options.fencing) return write_back_fence(round.valid_until);
      return succeed(round.valid_until);
    }
    clean_up_failed_round(round.clean);
    if (permits_ && permits_->disagreement) {
      const auto [node, recorded] = *permits_->disagreement;
      lease_->diagnostics = fmt::format(
          "redlock: cannot acquire a permit of semaphore {}: {} records {} permits for it while "
          "this acquire counts {}; every user of one semaphore must give the same number of "
          "permits (the record expires once no permit is held)",
          quoted_resource(permits_->name), client_->node(node).address(), recorded,
          permits_->count);
      client_->log(log_level::error, lease_->diagnostics);
      return finish(error::invalid_argument);
    }
    if (!round.retry) {
      // Misconfigured nodes (a wrong password, a missing permission, two names of one server)
      // make every later round fail the same way: say so now instead of retrying until `wait`.
      lease_->diagnostics = explain(round.code, now, true);
      client_->log(log_level::error, lease_->diagnostics);
      return finish(round.code);
    }
    lease_->diagnostics = explain(round.code, now);
    client_->log(log_level::debug, lease_->diagnostics);
    bool due_now = false;
    if (permits_) {
      due_now = learn_from_slot_round(now);
      // A try goes on while some slot it has not tried is not known to be held on a quorum (a
      // node that granted the tried slot said nothing of the others), so it makes `permits`
      // rounds at most, and `contended` means every slot was refused or seen held on a quorum.
      if (single_round_ && round.code == error::contended &&
          permits_->watch.choose(held_here(), client_->random())) {
        return begin_round();
      }
    }
    if (const auto code = acquire_ends(round, single_round_, deadline_, now)) return finish(*code);
    if (!permits_) due_now = learn_from_round();
    const bool first_look = rounds_ == 1 && !covered_round_;
    listen();
    if (first_look) {
      // Known neither when the key expires nor whether a release would be heard: once subscribed,
      // try again (asking PTTL this time).
      stage_ = stage::subscribing;
      const auto* listener = client_->listener();
      if (listener == nullptr || listener->all_settled()) return wake_soon();
      // The subscribers report within connect_timeout; this is only a backstop.
      return arm_timer(clamp_to_deadline(now + client_->options().connect_timeout));
    }
    sleep(now, due_now);
  }

  // A held round of a fenced acquire: the token is the highest counter of the nodes that granted
  // by the decision, and those of them below it are raised to it before the lease is handed out.
  // Why that makes tokens increase in lock order: on a quorum W the counter was at our token or
  // above while our key lived there (raised by the write-back, or by our grant's own increment).
  // A later lease's grants G are a quorum too, so some node of W is in G; there the later SET NX
  // succeeded only after our key was gone, and its increment starts from our token or more. Late
  // grants are not asked: a higher counter elsewhere does not matter, and their keys are released
  // with the lease.
  void write_back_fence(steady_clock::time_point valid_until) {
    std::uint64_t fence = 0;
    std::size_t pending = 0;
    std::vector<std::optional<std::uint64_t>> counters(client_->size());
    for (std::size_t i = 0; i < client_->size(); ++i) {
      const auto what = round_->answers()[i].what;
      if (what == node_answer::kind::pending) ++pending;
      if (what != node_answer::kind::yes) continue;
      counters[i] = fences_[i].value_or(0);  // a grant always carries its counter (>= 1)
      fence = std::max(fence, *counters[i]);
    }
    stage_ = stage::fencing;
    fence_ = fence;
    if (skip_fence_write_back_for_tests)
      return fence_written_back(true, {}, valid_until);  // unsafe
    write_back_ = std::make_shared<fence_write_back>(
        client_,
        [weak = weak_from_this(), valid_until](bool confirmed, const node_answers& answers) {
          if (const auto self = weak.lock())
            self->fence_written_back(confirmed, answers, valid_until);
        });
    // A copy: send() may complete the acquire, which drops write_back_.
    const auto write_back = write_back_;
    write_back->send(lease_->resource, lease_->token, fence, counters, pending);
  }

  void fence_written_back(bool confirmed, const node_answers& answers,
                          steady_clock::time_point valid_until) {
    if (stage_ != stage::fencing) return;  // cancelled meanwhile
    write_back_.reset();
    const auto now = steady_clock::now();
    if (confirmed && now < valid_until) {
      lease_->fencing_token = fence_;
      return succeed(valid_until);
    }
    // Like a failed round: release what this round may have set, then try again or end.
    release_where(round_->cleanup_targets(), lease_->resource, lease_->token);
    const error_code code =
        confirmed ? make_error_code(error::validity_expired) : make_error_code(error::no_quorum);
    lease_->diagnostics =
        confirmed
            ? fmt::format(
                  "redlock: {}: the fencing write-back was confirmed after the validity "
                  "ran out ({} ms after the round started)",
                  subject(),
                  std::chrono::duration_cast<std::chrono::milliseconds>(now - round_->start())
                      .count())
            : fmt::format(
                  "redlock: {}: the fencing write-back was confirmed by fewer than {} of "
                  "{} nodes: {}",
                  subject(), client_->quorum(), client_->size(),
                  client_->describe(
                      answers, "raised", "the key was no longer ours", nullptr,
                      quoted_keys({lease_->resource, fencing_counter_key(lease_->resource)})));
    client_->log(log_level::debug, lease_->diagnostics);
    if (single_round_) return finish(code);
    if (deadline_ && now >= *deadline_) return finish(error::wait_timeout);
    const bool due_now = permits_ ? learn_from_slot_round(now) : learn_from_round();
    listen();
    sleep(now, due_now);
  }

  // Waits, from `now`, for the lock to become free as watch_ describes it; with `due_now` only
  // for the wake-up jitter.
  void sleep(steady_clock::time_point now, bool due_now = false) {
    stage_ = stage::sleeping;
    woken_ = false;
    watch_round_ = rounds_;
    backoff_until_ = now + retry_.next(client_->random());
    if (due_now) return wake_after_news_heard_in_round();
    // A round lost without such news: no herd woke in step, so the collision window starts over.
    wakes_after_news_heard_in_round_ = 0;
    plan_wake(now);
  }

  // Arms the timer for the earliest moment the next round is worth it, see the class comment.
  void plan_wake(steady_clock::time_point now) {
    const auto bound = free_by();
    const auto* listener = client_->listener();
    const bool announcements_cover = listener != nullptr && listener->all_subscribed();
    steady_clock::time_point at = backoff_until_;
    if (bound && !may_be_free()) {
      at = announcements_cover ? *bound : std::min(*bound, backoff_until_);
    }
    arm_timer(clamp_to_deadline(std::max(at, now)));
  }

  // The next round after a short random delay (client_impl::wake_jitter). Rounds lost after the
  // first two (the refusal that made the op wait, and the one that followed its subscription) are
  // competitions lost to waiters elsewhere: each halves the delay, so that a waiter that keeps
  // losing goes first next time, whichever process it is in.
  void wake_soon() {
    woken_ = true;
    const unsigned lost = rounds_ > 2 ? rounds_ - 2 : 0;
    arm_timer(clamp_to_deadline(steady_clock::now() + client_->wake_jitter(lost)));
  }

  // The next round when news heard during the round just lost may have freed the lock
  // (apply_heard): after a random delay within a window that doubles with every such wake-up of
  // this op, from one round trip up to 32, and never beyond the retry policy's current ceiling. A
  // lone waiter goes again within a round trip or two. Under contention the news is mostly the
  // cleanup of a split round that every contender has just lost and all of them hear at once;
  // woken like wake_soon (whose delay shrinks with every loss) they would collide again and again
  // while the lock stays free. The widening window is the collision backoff that lets one through.
  void wake_after_news_heard_in_round() {
    woken_ = true;
    auto window = client_->collision_window(std::min(wakes_after_news_heard_in_round_++, 5u));
    if (retry_.ceiling() > std::chrono::milliseconds(0)) {
      window = std::min<steady_clock::duration>(window, retry_.ceiling());
    }
    std::uniform_int_distribution<steady_clock::duration::rep> pick(0, window.count());
    arm_timer(
        clamp_to_deadline(steady_clock::now() + steady_clock::duration(pick(client_->random()))));
  }

  steady_clock::time_point clamp_to_deadline(steady_clock::time_point at) const {
    return deadline_ ? std::min(at, *deadline_) : at;
  }

  // From the first refusal (or queueing) until the op ends, the client keeps its release
  // subscriptions open.
  void listen() {
    if (listening_ || single_round_) return;
    if (auto* listener = client_->listener()) {
      listening_ = true;
      listener->retain();
    }
  }

  void stop_listening() {
    if (!listening_) return;
    listening_ = false;
    if (auto* listener = client_->listener()) listener->release();
  }

  std::string explain(error_code ec, steady_clock::time_point now, bool lasting = false) const {
    const tally& t = round_->votes();
    if (lasting && ec == error::invalid_argument && !client_->duplicate_nodes().empty()) {
      return fmt::format("redlock: {} not acquired: {}", subject(), client_->duplicate_nodes());
    }
    const auto failing = lasting_failures();
    return fmt::format(
        "redlock: {} not acquired ({}): {} of {} nodes granted, quorum {}, round took {} ms{}: {}",
        subject(), ec.message(), t.yes_count(), t.nodes(), t.quorum(), to_ms(now - round_->start()),
        lasting ? "; not retried: the failing nodes cannot serve the lock until their "
                  "configuration is fixed"
                : "",
        client_->describe(round_->answers(), "granted", "held by another owner", &failing,
                          keys_of_round()));
  }

  // The keys the current round's request uses, quoted, for messages.
  std::string keys_of_round() const {
    if (!permits_) {
      if (!lease_->options.fencing) return quoted_keys({lease_->resource});
      return quoted_keys({lease_->resource, fencing_counter_key(lease_->resource)});
    }
    auto keys = fmt::format("{} .. {}", quoted_resource(permits_->slot_keys.front()),
                            quoted_resource(permits_->slot_keys.back()));
    keys += ", " + quoted_resource(lease_->companion_key);
    if (lease_->options.fencing)
      keys += ", " + quoted_resource(fencing_counter_key(lease_->resource));
    return keys;
  }

  // Nodes failing for good (connection::permanent_failure) whose answer in this round came after
  // the decision or not at all: shown as such, not as "not awaited".
  std::vector<std::string> lasting_failures() const {
    std::vector<std::string> texts(client_->size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const auto connection_failure = client_->connection_at(i).permanent_failure();
      if (connection_failure && round_->answers()[i].what == node_answer::kind::pending) {
        texts[i] = client_->connection_at(i).last_error();
      }
    }
    return texts;
  }

  // On each node the release runs after our SET: both travel on that node's one connection.
  // `key`: the round's (a semaphore's rounds try different slots).
  void release_where(const std::vector<bool>& targets, const std::string& key,
                     const std::string& token) {
    if (std::find(targets.begin(), targets.end(), true) == targets.end()) return;
    client_->release_best_effort(key, token, client_->release_channel(), lease_->options.ttl,
                                 &targets);
  }

  // A failed round's keys are released where the node granted or may have (it failed): at once
  // where it answered, and where its answer is still to come, once it comes, if it is not a
  // refusal. In a contended round the nodes that answer after the decision have almost always
  // refused, and a release sent to each of them would double the requests of a lost round. Those
  // answers reach answered_after_decision, or on_earlier_answer once a later round has opened its
  // ballot. Every request is answered in the end (a reply, an error, or the connection's failure),
  // so a deferral is settled or, at the latest, sent unconditionally when the op finishes or when
  // more than max_deferred_rounds rounds wait (a node that stopped answering for a while).
  void clean_up_failed_round(const std::vector<bool>& targets) {
    std::vector<bool> now = targets;
    deferred_cleanup later{ballot(), lease_->resource, lease_->token, form_,
                           std::vector<bool>(targets.size(), false)};
    bool any_later = false;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] && round_->answers()[i].what == node_answer::kind::pending) {
        now[i] = false;
        later.nodes[i] = true;
        any_later = true;
      }
    }
    release_where(now, lease_->resource, lease_->token);
    if (!any_later) return;
    if (deferred_.size() == max_deferred_rounds) {
      release_where(deferred_.front().nodes, deferred_.front().key, deferred_.front().token);
      deferred_.pop_front();
    }
    deferred_.push_back(std::move(later));
  }

  void on_earlier_answer(std::size_t of_ballot, std::size_t node, error_code ec,
                         const resp::value& reply) override {
    for (const auto& waiting : deferred_) {
      if (waiting.ballot != of_ballot) continue;
      std::string detail;
      const auto what = classify_set_reply(ec, reply, waiting.form, detail);
      return settle_deferred_cleanup(of_ballot, node,
                                     make_answer(what, ec, reply, std::move(detail)));
    }
  }

  // `node` answered `answer` to the failed round of ballot `of_ballot`.
  void settle_deferred_cleanup(std::size_t of_ballot, std::size_t node, const node_answer& answer) {
    const auto waiting =
        std::find_if(deferred_.begin(), deferred_.end(),
                     [&](const deferred_cleanup& d) { return d.ballot == of_ballot; });
    if (waiting == deferred_.end() || node >= waiting->nodes.size() || !waiting->nodes[node])
      return;
    waiting->nodes[node] = false;
    if (answer.what != node_answer::kind::no && !answer.unsent) {
      std::vector<bool> only(client_->size(), false);
      only[node] = true;
      release_where(only, waiting->key, waiting->token);
    }
    if (std::find(waiting->nodes.begin(), waiting->nodes.end(), true) == waiting->nodes.end()) {
      deferred_.erase(waiting);
    }
  }

  void send_deferred_cleanups() {
    for (const auto& waiting : deferred_)
      release_where(waiting.nodes, waiting.key, waiting.token);
    deferred_.clear();
  }

  void succeed(steady_clock::time_point valid_until) {
    const auto keep_alive = shared_from_this();  // leaving the queue may drop the last owner
    stage_ = stage::finished;
    if (timer_) timer_->cancel();
    client_->untrack(this);
    stop_listening();
    drop_from_waiters();
    resource_queue* const queue = std::exchange(queue_, nullptr);
    if (permits_) {
      queue->slot_holders[permits_->tried] = lease_.get();
    } else {
      queue->holder = lease_.get();
    }
    lease_->queue = queue;
    lease_->diagnostics.clear();
    lease_->granted_nodes = round_->votes().yes_count();
    acquired_ = true;
    lease_->on_acquired(round_->start(), valid_until);
    note_if_degraded();
    done_.complete(error_code{}, make_lease());
    // A semaphore's next waiter need not wait for this lease: it tries the other slots.
    if (permits_) client_->start_next_waiter(*queue);
  }

  // The SETs of a round that answer after the decision: grants still count for a successful
  // round, and a failed one's are released.
  void answered_after_decision(std::size_t node) {
    if (!acquired_) return settle_deferred_cleanup(ballot(), node, round_->answers()[node]);
    if (round_->answers()[node].what == node_answer::kind::yes) ++lease_->granted_nodes;
    note_if_degraded();
  }

  // Once every node has answered: a lock held by fewer than all nodes survives fewer failures.
  void note_if_degraded() {
    const tally& t = round_->votes();
    if (!t.complete() || t.yes_count() == t.nodes()) return;
    if (lease_->current != lease_state::phase::held) return;
    lease_->diagnostics =
        fmt::format("redlock: {} acquired on {} of {} nodes (quorum {}): {}", subject(),
                    t.yes_count(), t.nodes(), t.quorum(),
                    client_->describe(round_->answers(), "granted", "held by another owner"));
    client_->log(log_level::warning, lease_->diagnostics);
  }

  void finish(error_code ec) {
    const auto keep_alive = shared_from_this();  // leaving the queue may drop the last owner
    send_deferred_cleanups();
    stage_ = stage::finished;
    if (timer_) timer_->cancel();
    client_->untrack(this);
    stop_listening();
    leave_queue();
    done_.complete(ec, make_lease());
  }

  void drop_from_waiters() {
    std::erase_if(queue_->waiters, [this](const auto& waiter) { return waiter.get() == this; });
  }

  void leave_queue() {
    if (queue_ == nullptr) return;  // never queued
    const bool was_first = !queue_->waiters.empty() && queue_->waiters.front().get() == this;
    drop_from_waiters();
    if (was_first && queue_->holder == nullptr) client_->start_next_waiter(*queue_);
    queue_ = nullptr;
    client_->forget_queue_if_idle(permits_ ? permits_->queue_key : lease_->resource);
  }

  void cancel(asio::cancellation_type type) {
    using ct = asio::cancellation_type;
    switch (stage_) {
      case stage::queued:
      case stage::subscribing:
      case stage::sleeping:
        // Nothing of ours is on the nodes: a failed round was cleaned up before sleeping, but for
        // the cleanups that wait for their node's answer, which finish sends now.
        lease_->diagnostics = "redlock: acquire cancelled while waiting";
        return finish(asio::error::operation_aborted);
      case stage::in_round:
      case stage::fencing:
        if ((type & (ct::terminal | ct::partial)) == ct::none) return;
        release_where(round_->cleanup_targets(), lease_->resource, lease_->token);
        lease_->diagnostics = "redlock: acquire cancelled during a round; released what it set";
        return finish(asio::error::operation_aborted);
      case stage::idle:
      case stage::finished:
        return;
    }
  }

  // One timer serves the wait deadline while queued and the waits between rounds; a generation
  // number tells a stale expiry (already queued when the timer was re-armed) from the current one.
  void arm_timer(std::optional<steady_clock::time_point> at) {
    ++timer_generation_;
    if (!at) return;
    if (!timer_) timer_.emplace(client_->executor());
    timer_->expires_at(*at);
    timer_->async_wait([weak = weak_from_this(), generation = timer_generation_](error_code ec) {
      auto self = weak.lock();
      if (ec || !self || generation != self->timer_generation_) return;
      self->on_timer();
    });
  }

  void on_timer() {
    const bool timed_out = deadline_ && steady_clock::now() >= *deadline_;
    if (stage_ == stage::queued && timed_out) {
      lease_->diagnostics =
          permits_
              ? fmt::format(
                    "redlock: no permit of semaphore {} for this acquire after {} ms: "
                    "this client's other leases and acquires had them all",
                    quoted_resource(permits_->name), lease_->options.wait->count())
              : fmt::format("redlock: {} still held by another lease of this client after {} ms",
                            subject(), lease_->options.wait->count());
      finish(error::wait_timeout);
    } else if (stage_ == stage::sleeping || stage_ == stage::subscribing) {
      if (timed_out) return finish(error::wait_timeout);
      begin_round();
    }
  }

  std::shared_ptr<client_impl> client_;
  std::shared_ptr<lease_state> lease_;
  bool single_round_;
  completion<error_code, lease> done_;
  backoff retry_;
  std::optional<asio::steady_timer> timer_;  // only acquires that wait need one
  unsigned timer_generation_ = 0;
  std::optional<steady_clock::time_point> deadline_;
  stage stage_ = stage::idle;
  std::optional<acquire_round> round_;  // the current or last round
  set_form form_ = set_form::plain;     // the current round's
  std::optional<permit_plan> permits_;  // a semaphore's acquire
  resource_queue* queue_ = nullptr;     // set while this op is in it
  std::string set_command_;  // the first round's SET key token NX PX ttl; read by the connections
  // Fenced rounds: each granting node's counter, as its grant answered before the decision.
  std::vector<std::optional<std::uint64_t>> fences_;
  std::uint64_t fence_ = 0;  // the held round's fencing token, while it is written back
  std::shared_ptr<fence_write_back> write_back_;  // in stage fencing: the round's late grants join
  // Failed rounds whose cleanup waits for some nodes' answers, oldest first.
  struct deferred_cleanup {
    std::size_t ballot;
    std::string key;          // that round's
    std::string token;        // that round's
    set_form form;            // how to read its answers (classify_set_reply)
    std::vector<bool> nodes;  // still to answer
  };
  static constexpr std::size_t max_deferred_rounds = 32;
  std::deque<deferred_cleanup> deferred_;
  unsigned rounds_ = 0;
  bool acquired_ = false;  // the last round won
  // Waiting: where the lock is held and until when, as of round watch_round_.
  release_watch watch_;
  unsigned watch_round_ = 0;
  std::vector<std::optional<holder_ttl>> holder_ttls_;  // the current round's PTTL replies
  steady_clock::time_point backoff_until_{};
  // News of the lock that came while the current round was in flight (round_in_flight). Applied
  // once the round is decided without the lock: applied at once, the round's own answers would
  // overwrite it, and a release that ran on a node right after our refused SET would be lost (its
  // announcement can arrive before the refusal), leaving the op asleep until the holder's TTL.
  struct heard_during_round {
    std::vector<std::pair<std::size_t, std::size_t>> releases;  // (slot, node); slot 0: a lock
    bool resubscribed = false;

    void release(std::size_t slot, std::size_t node) {
      // Copies of one release are kept once: bounded by slots x nodes.
      const std::pair<std::size_t, std::size_t> entry{slot, node};
      if (std::find(releases.begin(), releases.end(), entry) == releases.end())
        releases.push_back(entry);
    }
    void clear() noexcept {
      releases.clear();
      resubscribed = false;
    }
  };
  heard_during_round heard_;
  unsigned wakes_after_news_heard_in_round_ = 0;  // see wake_after_news_heard_in_round
  bool woken_ = false;  // the next round is due after wake_jitter; later news changes nothing
  // The current round was sent while every node was subscribed for this op: a release after it is
  // heard.
  bool covered_round_ = false;
  bool competing_ = false;  // became first in line through compete(), not a hand-off
  bool listening_ = false;  // holds an interest in release announcements
};

// ---------------------------------------------------------------------------------------------
// client_impl

std::string client_impl::peer_registry::admit(std::size_t node, const std::string& peer) {
  if (peer.empty()) return {};
  for (std::size_t other = 0; other < peers.size(); ++other) {
    if (other == node || peers[other] != peer) continue;
    std::string why = fmt::format(
        "{} and {} reach one server ({}); Redlock needs independent nodes, so this client refuses "
        "to lock until one of them is removed",
        addresses[other], addresses[node], peer);
    if (refusal.empty()) refusal = why;
    return why;
  }
  peers[node] = peer;
  return {};
}

std::vector<std::shared_ptr<connection>> client_impl::open_connections(
    const asio::any_io_executor& executor, std::vector<node_config>& nodes,
    const client_options& options, const std::shared_ptr<peer_registry>& peers) {
  if (auto problem = check_client_options(nodes, options); !problem.empty()) {
    throw boost::system::system_error(make_error_code(error::invalid_argument),
                                      "redlock: " + problem);
  }
  std::vector<std::shared_ptr<connection>> connections;
  connections.reserve(nodes.size());
  auto connection_settings = connection_options::from(options);
  prepare_for_lock(connection_settings);
  peers->peers.resize(nodes.size());
  for (const auto& node : nodes)
    peers->addresses.push_back(node.address());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    // Names were compared as written; what they resolve to can only be compared once connected.
    connection_settings.admit_peer = [peers, i](const std::string& peer) {
      return peers->admit(i, peer);
    };
    connections.push_back(connection::create(executor, std::move(nodes[i]), connection_settings));
  }
  return connections;
}

client_impl::client_impl(asio::any_io_executor executor, std::vector<node_config> nodes,
                         client_options options)
    : executor_(std::move(executor)),
      options_(std::move(options)),
      peers_(std::make_shared<peer_registry>()),
      connections_(open_connections(executor_, nodes, options_, peers_)),
      random_(std::random_device{}()) {
  spare_queues_.reserve(1024);
}

lease client_impl::make_lease(std::shared_ptr<lease_state> state) {
  return lease(std::move(state));
}

void client_impl::shutdown(std::shared_ptr<user_operation> waiter) {
  if (closed_) {
    if (!waiter) return;
    if (auto progress = shutdown_in_progress_.lock()) {
      waiter->start();
      progress->waiters.push_back(std::move(waiter));
    } else {
      waiter->finish(shutdown_outcome_);
    }
    return;
  }
  // Copies: ending an operation or a lease removes it from these sets.
  const auto operations = active_.snapshot<abortable>();
  for (auto* op : operations)
    op->abort();
  // Started only now, or the loop above would have aborted it too.
  auto progress = std::make_shared<shutdown_progress>();
  progress->client = weak_from_this();
  shutdown_in_progress_ = progress;
  if (waiter) {
    waiter->start();
    progress->waiters.push_back(std::move(waiter));
  }
  const auto leases = held_.snapshot<lease_state>();
  for (auto* state : leases) {
    if (state->current != lease_state::phase::held) continue;
    if (progress->waiters.empty()) {
      state->release_on_nodes();
      state->stop_holding(lease_state::phase::released, asio::error::operation_aborted);
      continue;
    }
    // Before closed_ is set, which would fail the release at once. Its handler runs posted on
    // this executor, so the count cannot reach zero inside this loop.
    ++progress->releases_pending;
    initiate_release(
        state->shared_from_this(),
        void_caller{void_handler([progress](error_code ec) { progress->release_answered(ec); }),
                    true});
  }
  closed_ = true;
  if (listener_) listener_->close();
  // The releases just queued still go out, also those kept for a node whose link broke (which
  // takes a reconnect); then each connection closes. One that never wrote a request closes at
  // once: nothing of ours can be on that node.
  for (auto& conn : connections_)
    conn->close_when_idle(2 * options_.node_timeout + options_.connect_timeout);
  if (progress->releases_pending == 0) progress->finish_waiters();
}

void client_impl::shutdown_progress::release_answered(error_code ec) {
  // A key that is no longer ours on a quorum (it expired) is as gone as a released one.
  if (ec && ec != error::not_held && !outcome) outcome = ec;
  if (--releases_pending == 0) finish_waiters();
}

void client_impl::shutdown_progress::finish_waiters() {
  if (auto owner = client.lock()) owner->shutdown_outcome_ = outcome;
  auto done = std::move(waiters);
  waiters.clear();
  for (auto& waiter : done)
    waiter->finish(outcome);
}

request_options client_impl::options_for(lock_request kind,
                                         std::chrono::milliseconds key_lifetime) const noexcept {
  request_options per_node;
  per_node.timeout = options_.node_timeout;
  switch (kind) {
    case lock_request::set:
    case lock_request::ping:
      per_node.skip_if_unresponsive = true;
      break;
    case lock_request::set_asking_ttl:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &acquire_script();
      // Not resent as EVAL: a SET that ran after its round's cleanup release would leave a key
      // behind. The node's vote is lost for this round, and the script is loaded again.
      per_node.noscript_is_final = true;
      break;
    case lock_request::fenced_set:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &fenced_acquire_script();
      per_node.noscript_is_final = true;  // as set_asking_ttl
      break;
    case lock_request::slot_set:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &semaphore_acquire_script();
      per_node.noscript_is_final = true;  // as set_asking_ttl
      break;
    case lock_request::fence_write_back:
      // Token-checked, so running late does no harm; but its answer is wanted within the
      // validity, and the acquire fails (and releases) when a quorum does not confirm in time.
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &fence_write_back_script();
      break;
    case lock_request::extend:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &extend_script();
      per_node.noscript_is_final = true;
      break;
    case lock_request::release:
      per_node.eval_fallback = &release_script();
      // Zero would make it an ordinary request: a key always lives at least a millisecond.
      per_node.deliver_for = std::max(key_lifetime, std::chrono::milliseconds(1));
      break;
  }
  return per_node;
}

void client_impl::fan_out(std::string_view payload, reply_sink& sink, std::size_t first_tag,
                          const request_options& per_node, const std::vector<bool>* only) {
  const auto now = steady_clock::now();
  for (std::size_t i = 0; i < connections_.size(); ++i) {
    if (!only || (*only)[i])
      connections_[i]->exec_direct(payload, per_node, sink, first_tag + i, now);
  }
}

void client_impl::fan_out(const shared_payload& payload, reply_sink& sink, std::size_t first_tag,
                          const request_options& per_node, const std::vector<bool>* only) {
  const auto now = steady_clock::now();
  for (std::size_t i = 0; i < connections_.size(); ++i) {
    if (!only || (*only)[i])
      connections_[i]->exec_direct(payload, per_node, sink, first_tag + i, now);
  }
}

void client_impl::fan_out_extend(std::string_view key, std::string_view companion,
                                 std::string_view token, std::chrono::milliseconds ttl,
                                 std::string& payload, reply_sink& sink, std::size_t first_tag) {
  const std::string ttl_text = std::to_string(ttl.count());
  const std::string_view keys[] = {key, companion};
  const std::string_view args[] = {token, ttl_text};
  payload = encode_evalsha(extend_script(), std::span(keys, companion.empty() ? 1 : 2), args);
  fan_out(payload, sink, first_tag, options_for(lock_request::extend));
}

void client_impl::fan_out_release(std::string_view key, std::string_view token,
                                  std::string_view channel, std::chrono::milliseconds key_lifetime,
                                  std::string& payload, reply_sink& sink, std::size_t first_tag) {
  const std::string_view keys[] = {key};
  const std::string_view args[] = {token, channel};
  payload = encode_evalsha(release_script(), keys, args);
  fan_out(payload, sink, first_tag, options_for(lock_request::release, key_lifetime));
}

namespace {

// The sink of releases whose replies nobody needs; the connections still read and match them.
// Stateless, so one serves every such release and counting references is not needed.
class ignored_replies final : public reply_sink {
 public:
  void on_reply(std::size_t, error_code, const resp::value&) override {}
  void add_ref() noexcept override {}
  void drop_ref() noexcept override {}
};

ignored_replies& ignore_replies() {
  static ignored_replies sink;
  return sink;
}

// The sink of a best-effort release whose answers a competing waiter needs
// (client_impl::lease_release): a node that deleted our key, or found it no longer ours, is
// reported with key_gone_on_node. Owned by the requests: freed with the last reference.
class gone_key_reporter final : public reply_sink {
 public:
  gone_key_reporter(std::weak_ptr<client_impl> client, std::string resource)
      : client_(std::move(client)), resource_(std::move(resource)) {}

  void on_reply(std::size_t node, error_code ec, const resp::value& reply) override {
    // The release script answers 1 (deleted) or 0 (not ours); anything else tells nothing.
    if (ec || reply.kind != resp::type::integer) return;
    if (const auto client = client_.lock()) client->key_gone_on_node(node, resource_);
  }
  void add_ref() noexcept override { ++refs_; }
  void drop_ref() noexcept override {
    if (--refs_ == 0) delete this;
  }

 private:
  std::weak_ptr<client_impl> client_;
  std::string resource_;
  unsigned refs_ = 0;
};

}  // namespace

void client_impl::release_best_effort(const std::string& resource, const std::string& token,
                                      std::string_view channel,
                                      std::chrono::milliseconds key_lifetime,
                                      const std::vector<bool>* only, bool report_gone_keys) {
  const std::string_view keys[] = {resource};
  const std::string_view args[] = {token, channel};
  // Shared by the requests: nobody else owns these bytes.
  const auto payload =
      std::make_shared<const std::string>(encode_evalsha(release_script(), keys, args));
  const auto per_node = options_for(lock_request::release, key_lifetime);
  if (!report_gone_keys) return fan_out(payload, ignore_replies(), 0, per_node, only);
  // Held across the fan-out, so that it is freed also when no request was sent.
  sink_ref reporter(new gone_key_reporter(weak_from_this(), resource));
  fan_out(payload, *reporter.get(), 0, per_node, only);
}

client_impl::lease_release client_impl::release_of(lease_state& state) {
  resource_queue* queue = state.queue;
  if (queue == nullptr || queue->holder != &state) return {options_.release_channel};
  if (queue->waiters.empty()) {
    queue->handoffs_in_a_row = 0;
    return {options_.release_channel};
  }
  if (queue->handoffs_in_a_row < state.options.local_handoffs) {
    ++queue->handoffs_in_a_row;
    queue->next_competes = false;
    return {};
  }
  queue->handoffs_in_a_row = 0;
  queue->next_competes = true;
  // Every request of the lease was sent before now and gave the key longest_ttl at most, by the
  // server's clock.
  const auto longest = std::chrono::duration<double, std::milli>(
      static_cast<double>(state.longest_ttl.count()) * (1.0 + options_.drift_factor) + 1.0);
  queue->released_key_gone_by =
      steady_clock::now() + std::chrono::duration_cast<steady_clock::duration>(longest);
  return {options_.release_channel, true};
}

void client_impl::key_gone_on_node(std::size_t node, const std::string& resource) {
  auto* queue = find_queue(resource);
  if (queue == nullptr || queue->semaphore || queue->waiters.empty()) return;
  auto head = queue->waiters.front();  // keeps it alive while it reacts
  head->announced(node);
}

void client_impl::holder_gone(lease_state& state) {
  resource_queue* queue = std::exchange(state.queue, nullptr);
  if (queue != nullptr && queue->semaphore) return permit_holder_gone(*queue, state);
  if (queue == nullptr || queue->holder != &state) return;
  queue->holder = nullptr;
  start_next_waiter(*queue);
  forget_queue_if_idle(state.resource);
}

void client_impl::permit_holder_gone(resource_queue& queue, lease_state& state) {
  const auto held = std::find(queue.slot_holders.begin(), queue.slot_holders.end(), &state);
  if (held == queue.slot_holders.end()) return;
  *held = nullptr;
  const auto slot = static_cast<std::size_t>(held - queue.slot_holders.begin());
  if (!queue.waiters.empty()) {
    auto head = queue.waiters.front();  // keeps it alive while it reacts
    head->permit_released_here(slot);
  }
  if (const auto key = split_slot_key(state.resource))
    forget_queue_if_idle(std::string(key->first));
}

void client_impl::start_next_waiter(resource_queue& queue) {
  const bool competes = std::exchange(queue.next_competes, false);
  if (queue.waiters.empty()) return;
  auto next = queue.waiters.front();  // keeps it alive while it starts
  if (competes) {
    next->compete(queue.released_key_gone_by);
  } else {
    next->wake();
  }
}

release_listener* client_impl::listener() {
  if (options_.release_channel.empty() || closed_) return nullptr;
  if (!listener_) {
    std::vector<node_config> nodes;
    nodes.reserve(connections_.size());
    for (const auto& conn : connections_)
      nodes.push_back(conn->node());
    std::weak_ptr<client_impl> weak = weak_from_this();
    release_listener::events on;
    on.released = [weak](std::size_t node, std::string_view resource) {
      if (auto self = weak.lock()) self->on_release_announced(node, resource);
    };
    on.link_changed = [weak](std::size_t node, bool subscribed) {
      if (auto self = weak.lock()) self->on_subscription_changed(node, subscribed);
    };
    on.wanted = [weak](std::string_view resource) {
      const auto self = weak.lock();
      return self && self->queue_waiting_for(resource) != nullptr;
    };
    listener_ =
        release_listener::create(executor_, std::move(nodes), connection_options::from(options_),
                                 options_.release_channel, std::move(on));
  }
  return listener_.get();
}

resource_queue* client_impl::queue_waiting_for(std::string_view resource) {
  auto* queue = find_queue(std::string(resource));
  if (queue == nullptr || queue->semaphore) {
    // A semaphore's slot key: its queue is under the slots' common prefix.
    const auto slot_key = split_slot_key(resource);
    queue = slot_key ? find_queue(std::string(slot_key->first)) : nullptr;
    if (queue != nullptr && !queue->semaphore) queue = nullptr;
  }
  return queue != nullptr && !queue->waiters.empty() ? queue : nullptr;
}

void client_impl::on_release_announced(std::size_t node, std::string_view resource) {
  auto* queue = queue_waiting_for(resource);
  if (queue == nullptr) return;
  auto head = queue->waiters.front();  // keeps it alive while it reacts
  if (!queue->semaphore) return head->announced(node);
  head->announced(node, split_slot_key(resource)->second);
}

void client_impl::on_subscription_changed(std::size_t /*node*/, bool subscribed) {
  std::vector<std::shared_ptr<acquire_op>> heads;
  for (auto& [resource, queue] : queues_) {
    if (!queue.waiters.empty()) heads.push_back(queue.waiters.front());
  }
  for (auto& head : heads)
    head->subscription_changed(subscribed);
}

void client_impl::note_round_trip(steady_clock::duration took) noexcept {
  // The first round replaces the guess; later ones move the average by an eighth.
  round_trip_ = round_trip_known_ ? (round_trip_ * 7 + took) / 8 : took;
  round_trip_known_ = true;
}

steady_clock::duration client_impl::bounded_round_trip() const noexcept {
  return std::clamp<steady_clock::duration>(round_trip_, std::chrono::microseconds(50),
                                            std::chrono::milliseconds(20));
}

steady_clock::duration client_impl::collision_window(unsigned doublings) const noexcept {
  return bounded_round_trip() * (1 << std::min(doublings, 16u));
}

steady_clock::duration client_impl::wake_jitter(unsigned competitions_lost) {
  const auto ceiling = bounded_round_trip() / (1 << std::min(competitions_lost, 6u));
  std::uniform_int_distribution<steady_clock::duration::rep> pick(0, ceiling.count());
  return steady_clock::duration(pick(random_));
}

resource_queue* client_impl::find_queue(const std::string& resource) {
  auto found = queues_.find(resource);
  return found == queues_.end() ? nullptr : &found->second;
}

resource_queue& client_impl::queue_for(const std::string& resource) {
  if (auto* existing = find_queue(resource)) return *existing;
  if (spare_queues_.empty()) return queues_.try_emplace(resource).first->second;
  auto node = std::move(spare_queues_.back());
  spare_queues_.pop_back();
  node.key() = resource;
  // A fresh queue but for the vectors' storage: nothing of the resource it served before (its
  // hand-offs in a row above all) may carry over.
  resource_queue& queue = node.mapped();
  auto slot_holders = std::move(queue.slot_holders);
  auto waiters = std::move(queue.waiters);
  slot_holders.clear();
  waiters.clear();
  queue = resource_queue{};
  queue.slot_holders = std::move(slot_holders);
  queue.waiters = std::move(waiters);
  return queues_.insert(std::move(node)).position->second;
}

void client_impl::forget_queue_if_idle(const std::string& resource) {
  auto found = queues_.find(resource);
  if (found == queues_.end() || !found->second.idle()) return;
  auto node = queues_.extract(found);
  if (spare_queues_.size() < spare_queues_.capacity()) spare_queues_.push_back(std::move(node));
}

namespace {

// A connection's failure text starts with the node's address, which the caller has just written.
std::string_view without_address(std::string_view text, std::string_view address) {
  if (text.starts_with(address) && text.substr(address.size()).starts_with(": ")) {
    text.remove_prefix(address.size() + 2);
  }
  return text;
}

}  // namespace

std::string client_impl::describe(const node_answers& answers, std::string_view yes,
                                  std::string_view no,
                                  const std::vector<std::string>* pending_texts,
                                  std::string_view keys) const {
  std::string out;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (i != 0) out += "; ";
    const std::string address = connections_[i]->node().address();
    out += address;
    switch (answers[i].what) {
      case node_answer::kind::yes:
        out += fmt::format(" {}", yes);
        break;
      case node_answer::kind::no:
        out += fmt::format(" {}", no);
        break;
      case node_answer::kind::failed:
        // Sent and refused by the server (a connect refused for good fails requests unsent).
        if (answers[i].failure == error::permission_denied && !answers[i].unsent && !keys.empty()) {
          // A key pattern of the node's ACL user left out a key of this request: say which user
          // and which keys, or the user is left guessing (the server names neither).
          const auto& user = connections_[i]->node().username;
          out += fmt::format(" failed (ACL user \"{}\" may not use every key of {}: {})",
                             user.empty() ? "default" : user, keys,
                             without_address(answers[i].detail, address));
          break;
        }
        out += fmt::format(" failed ({})", without_address(answers[i].detail, address));
        break;
      case node_answer::kind::pending:
        if (pending_texts != nullptr && !(*pending_texts)[i].empty()) {
          out += fmt::format(" failing ({})", without_address((*pending_texts)[i], address));
        } else {
          out += " not awaited (the outcome was certain without it)";
        }
        break;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Entry points

void initiate_acquire(const std::shared_ptr<client_impl>& client, std::string resource,
                      const lock_options& options, bool single_round,
                      caller_handler<acquire_signature> caller) {
  std::make_shared<acquire_op>(client, std::move(resource), options, single_round,
                               std::move(caller))
      ->start();
}

void initiate_acquire_permit(const std::shared_ptr<client_impl>& client, std::string name,
                             std::size_t permits, const lock_options& options, bool single_round,
                             caller_handler<acquire_signature> caller) {
  auto op =
      std::make_shared<acquire_op>(client, std::string(), options, single_round, std::move(caller));
  op->for_semaphore(std::move(name), permits);
  op->start();
}

namespace {

// PING on every node; succeeds when a quorum answers PONG.
class ping_op final : public operation_vote {
 public:
  using operation_vote::operation_vote;

  void run() {
    static const std::string ping = [] {
      std::string command;
      resp::encode_command(command, {"PING"});
      return command;
    }();
    // Each node has node_timeout to answer, like every request, whatever its connection is
    // doing: opening it counts (a slow first connect fails the ping, and the connect goes on for
    // the next one), and a node in reconnect backoff fails at once.
    const auto first_tag = open_ballot();
    client()->fan_out(ping, *this, first_tag, client()->options_for(lock_request::ping));
  }

 private:
  node_answer::kind classify(error_code ec, const resp::value& reply,
                             std::string& detail) override {
    if (!ec && reply.text == "PONG") return node_answer::kind::yes;
    detail = reply.text;
    return node_answer::kind::failed;
  }

  std::optional<error_code> decide(const tally& t) override {
    if (t.yes_quorum()) return error_code{};
    if (t.yes_quorum_impossible()) return make_error_code(error::no_quorum);
    return std::nullopt;
  }

  void decided(error_code ec) override { finish(ec); }
};

}  // namespace

void initiate_ping(const std::shared_ptr<client_impl>& client, void_caller caller) {
  auto op = std::make_shared<ping_op>(client, std::move(caller));
  if (client->closed()) return op->finish(asio::error::operation_aborted);
  op->start();
  op->run();
}

void initiate_shutdown(const std::shared_ptr<client_impl>& client, void_caller caller) {
  // Cancelling stops the waiting, not the shutdown.
  client->shutdown(std::make_shared<user_operation>(
      client, std::move(caller),
      asio::cancellation_type::terminal | asio::cancellation_type::partial));
}

const asio::any_io_executor& executor_of(const client_impl& client) noexcept {
  return client.executor();
}

}  // namespace redlock::detail

namespace redlock {

client::client(detail::asio_configuration /*library_configuration*/, executor_type executor,
               std::vector<node_config> nodes, client_options options)
    : impl_(std::make_shared<detail::client_impl>(std::move(executor), std::move(nodes),
                                                  std::move(options))) {}

client::~client() {
  if (impl_) impl_->shutdown();
}

client::executor_type client::get_executor() const noexcept {
  return impl_->executor();
}
std::size_t client::size() const noexcept {
  return impl_->size();
}
std::size_t client::quorum() const noexcept {
  return impl_->quorum();
}

}  // namespace redlock
