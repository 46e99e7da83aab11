#ifndef REDLOCK_OPS_ACQUIRE_OP_HPP
#define REDLOCK_OPS_ACQUIRE_OP_HPP

#include "algo/acquire_round.hpp"
#include "algo/cleanup_plan.hpp"
#include "algo/replies.hpp"
#include "algo/wait_plan.hpp"
#include "backoff.hpp"
#include "clock.hpp"
#include "completion.hpp"
#include "lease_state.hpp"
#include "lock/local_queues.hpp"
#include "lock_space.hpp"
#include "ops/fence_write_back.hpp"
#include "ops/round_strategy.hpp"
#include "ops/vote.hpp"
#include "redlock/detail/initiate.hpp"
#include "redlock/lease.hpp"
#include "redlock/options.hpp"

#include <boost/asio/cancellation_type.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

// One async_acquire or async_try_acquire (of a lock, or of a semaphore's permit), from the local
// queue through rounds and waits to one completion. What a round sends and what its answers teach
// of the holders is the round strategy's (lock_rounds, slot_rounds); whether the round won is
// acquire_round's; when to try again is wait_plan's. This is the plumbing around them.
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
//  - Every round after the first asks for the holders' PTTLs with its refusals (see the
//    strategies), so a refused round knows when the holder's key expires at the latest.
//  - Sleeping, it wakes on an announcement that may free a quorum (after wake_jitter), or when a
//    quorum can have expired (round_strategy::free_by), or at its deadline (wake_at; both in
//    algo/wait_plan.hpp). Its backoff only matters when that is not enough: announcements off or a
//    node not subscribed, or no expiry known (a key without TTL, failing nodes).
//  - A subscription that comes back after a reconnect wakes it: announcements may have been lost.
//  - Such news that comes while its own round is in flight is kept until the round is lost
//    (heard_, a round_news); the next round then follows after a collision backoff
//    (wake_after_news_heard_in_round).
class acquire_op final : public abortable,
                         public ballot_sink,
                         public queued_acquire,
                         public std::enable_shared_from_this<acquire_op> {
 public:
  // `resource`: the lease's key until the first round sets the one the strategy names.
  acquire_op(std::shared_ptr<lock_space> space, std::unique_ptr<round_strategy> strategy,
             std::string resource, const lock_options& options, bool single_round,
             caller_handler<acquire_signature>&& caller)
      : ballot_sink(space->nodes().size()),
        space_(std::move(space)),
        strategy_(std::move(strategy)),
        lease_(std::make_shared<lease_state>(space_, std::move(resource), options)),
        single_round_(single_round),
        done_(std::move(caller.handler), space_->executor(), caller.on_client_executor),
        retry_(options.retry) {
    // Measured only for an observer: without one, an acquire reads no clock for it.
    if (space_->watcher() != nullptr) started_ = lock_clock::now();
  }

  // A key that the lease extends with its own (lease_state::companion_key). Called before start().
  void extend_along(std::string key) { lease_->extend_along(std::move(key)); }

  // The lease holds a set of locks, `resources` (canonical, as set_rounds has them; empty for an
  // invalid set, which start() refuses). Called before start().
  void hold_set(std::vector<std::string> resources) { lease_->hold_set(std::move(resources)); }

  void start();

  // The resource became free locally and this op is first in line: try at once.
  void wake() override;

  // The local holder released after its hand-off limit, announcing it: wait for that announcement
  // like a waiter in another process would. The key is gone by `key_gone_by` at the latest.
  void compete(steady_clock::time_point key_gone_by) override;

  // `node` announced that `resource` (of a semaphore: slot `slot` of it) was released there, or
  // the holder's release found it gone there (local_queues::key_gone_on_node).
  void announced(std::size_t node, std::size_t slot) override;

  // A semaphore's lease of this client released slot `slot`: its DEL is queued on every node
  // ahead of anything this op sends now, so the slot is free for our next round.
  void permit_released_here(std::size_t slot) override;

  // The subscription on `node` is now in place (`subscribed`) or not.
  void subscription_changed(bool subscribed) override;

  // A set that claims its queues until `until` (local_queues): the timer ends the claim then.
  void claims_until(steady_clock::time_point until) override;

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

  std::string subject() const { return strategy_->subject(); }

  // Whether trying again may succeed now, as far as the last round and announcements tell.
  bool may_be_free() const { return strategy_->may_be_free(); }

  // Whether SETs of the current round are in flight, or its held outcome is being written back:
  // news of the lock then waits in heard_ until the round's own answers are applied.
  bool round_in_flight() const noexcept;

  // The holder of `slot` (0 for a lock) is gone from `node`.
  void forget_holder(std::size_t slot, std::size_t node) { strategy_->forget_holder(slot, node); }

  // Applies what was heard during the round that was just decided without the lock; true when
  // it makes the next round due at once: a release that may free a quorum, or a subscription that
  // came back (whatever was announced while it was down is lost).
  bool apply_heard();

  lease make_lease() { return lease_access::make(lease_); }
  node_set& nodes() const noexcept { return space_->nodes(); }

  // Every round has a token of its own. A request of an earlier round can still run on a node
  // after this round's SET: a cleanup release that met NOSCRIPT is resent as EVAL behind the
  // requests issued meanwhile, and a SET can sit in a slow node's queue. Were the token shared,
  // such a stale release would delete this round's key after the node had granted it, and the
  // client would count a vote it no longer has. With distinct tokens a stale request can only
  // delete or set keys of rounds that are over.
  //
  // What a round sends is the strategy's. The first round of a lock competing after a hand-off
  // limit asks for the holder's PTTL; if every node was subscribed when it was sent, a refusal
  // needs no second look (see decided).
  void begin_round();

  void open_round(set_form form);

  // A refusal of the current round that answers after its decision: taken into a sleeping op's
  // plan at once.
  void note_late_refusal(std::size_t node, const set_answer& answer, steady_clock::time_point now);

  std::shared_ptr<void> owner() override { return shared_from_this(); }

  void on_answer(std::size_t node, error_code ec, const resp::value& reply) override;

  // After a round that was not held: where the lock (or each slot) is held, and until when, then
  // what was heard while it was in flight. Returns whether the next round is due at once.
  bool learn_from_round(steady_clock::time_point now);

  void decided(steady_clock::time_point now);

  // A held round of a fenced acquire: the token is the highest counter of the nodes that granted
  // by the decision, and those of them below it are raised to it before the lease is handed out.
  // Why that makes tokens increase in lock order: on a quorum W the counter was at our token or
  // above while our key lived there (raised by the write-back, or by our grant's own increment).
  // A later lease's grants G are a quorum too, so some node of W is in G; there the later SET NX
  // succeeded only after our key was gone, and its increment starts from our token or more. Late
  // grants are not asked: a higher counter elsewhere does not matter, and their keys are released
  // with the lease.
  void write_back_fence(steady_clock::time_point valid_until);

  // The write-back of `resource` (by index into fenced_keys_) in round number `round` decided.
  // The acquire holds once every resource's is confirmed, and fails with the first that is not.
  void fence_written_back(unsigned round, std::size_t resource, bool confirmed,
                          const node_answers& answers, steady_clock::time_point valid_until);

  // Keeps the counters of `node`'s grant (one per resource of a set).
  void note_fences(std::size_t node, const set_answer& answer);

  // Waits, from `now`, for the lock to become free as the strategy knows it; with `due_now` only
  // for the wake-up jitter.
  void sleep(steady_clock::time_point now, bool due_now = false);

  // Arms the timer for the earliest moment the next round is worth it, see the class comment.
  void plan_wake(steady_clock::time_point now);

  // The next round after a short random delay (wake_jitter), which shrinks with every competition
  // lost, so that a waiter that keeps losing goes first next time, whichever process it is in.
  void wake_soon();

  // The next round when news heard during the round just lost may have freed the lock
  // (apply_heard): after a collision backoff (collision_delay), whose window widens with every
  // such wake-up in a row.
  void wake_after_news_heard_in_round();

  // From the first refusal (or queueing) until the op ends, the client keeps its release
  // subscriptions open.
  void listen();

  void stop_listening();

  std::string explain(error_code ec, steady_clock::time_point now, bool lasting = false) const;

  // Nodes failing for good (connection::permanent_failure) whose answer in this round came after
  // the decision or not at all: shown as such, not as "not awaited".
  std::vector<std::string> lasting_failures() const;

  // On each node the release runs after our SET: both travel on that node's one connection.
  // `key`: the round's (a semaphore's rounds try different slots).
  void release_where(const std::vector<bool>& targets, const std::string& key,
                     const std::string& token);

  // Releases a failed round's keys as cleanup_plan says: at once where the node answered, later
  // where its answer is still to come. Those answers reach answered_after_decision, or
  // on_earlier_answer once a later round has opened its ballot.
  void clean_up_failed_round(const std::vector<bool>& targets);

  // Deletes the marks this acquire may have left on the nodes (a waiting writer's), on every
  // node or on those in `only`; announced, since readers queued behind them may go now.
  void drop_marks(const std::vector<bool>* only = nullptr);

  // An answer of any round of this acquire from `node` set a mark. Before the acquire ends the
  // strategy keeps it in mind; once it has ended without the lock (its marks already dropped, or
  // none known then), the mark is deleted on that node at once: the deletion follows the answer's
  // request there. A writer that holds deletes its marks with its release.
  void note_mark(std::size_t node);

  void on_earlier_answer(std::size_t of_ballot, std::size_t node, error_code ec,
                         const resp::value& reply) override;

  // `node` answered `answer` to the failed round of ballot `of_ballot`.
  void settle_deferred_cleanup(std::size_t of_ballot, std::size_t node, const node_answer& answer);

  void send_deferred_cleanups();

  void succeed(steady_clock::time_point valid_until);

  // The SETs of a round that answer after the decision: grants still count for a successful
  // round, and a failed one's are released.
  void answered_after_decision(std::size_t node);

  // Once every node has answered: a lock held by fewer than all nodes survives fewer failures.
  void note_if_degraded();

  void finish(error_code ec);

  // Tells the observer, if any, then completes the caller's operation.
  void complete(error_code ec);

  // The queue of the acquire's own key (its first, for a set), while it is queued.
  resource_queue* queue_of_own() const noexcept { return queues().front(); }

  // Whether a lease of this client holds what the queued acquire waits for (rather than an
  // earlier acquire waiting for it), as its diagnostics say.
  bool held_here() const;

  void leave_queue();

  void cancel(asio::cancellation_type type);

  // One timer serves the wait deadline while queued and the waits between rounds; a generation
  // number tells a stale expiry (already queued when the timer was re-armed) from the current one.
  void arm_timer(std::optional<steady_clock::time_point> at);

  void on_timer();

  std::shared_ptr<lock_space> space_;
  // What the rounds send and learn: a lock's or a semaphore permit's.
  std::unique_ptr<round_strategy> strategy_;
  std::shared_ptr<lease_state> lease_;
  bool single_round_;
  completion<error_code, lease> done_;
  backoff retry_;
  std::optional<lock_timer> timer_;  // only acquires that wait need one
  unsigned timer_generation_ = 0;
  std::optional<steady_clock::time_point> deadline_;
  stage stage_ = stage::idle;
  std::optional<acquire_round> round_;  // the current or last round
  set_form form_ = set_form::plain;     // the current round's
  // A set, while queued: when its claim on its queues ends (local_queues).
  std::optional<steady_clock::time_point> claim_ends_;
  // Fenced rounds: what the current round fences (round_strategy::fenced_keys), and by resource
  // (a lock has one, a set one per resource) each granting node's counter as its grant answered
  // before the decision.
  std::vector<round_strategy::fenced_key> fenced_keys_;
  std::vector<std::vector<std::optional<std::uint64_t>>> fences_;
  // The held round's fencing tokens by resource, while they are written back.
  std::vector<std::uint64_t> fence_tokens_;
  // In stage fencing, one per resource: the round's late grants join them.
  std::vector<std::shared_ptr<fence_write_back>> write_backs_;
  std::size_t write_backs_undecided_ = 0;  // those of write_backs_ not confirmed yet
  // Failed rounds whose cleanup waits for some nodes' answers.
  cleanup_plan<set_form> cleanups_;
  unsigned rounds_ = 0;
  steady_clock::time_point started_{};  // when there is an observer
  bool acquired_ = false;               // the last round won
  // Waiting: the strategy knows where the lock is held and until when, as of round watch_round_.
  unsigned watch_round_ = 0;
  steady_clock::time_point backoff_until_{};
  // News of the lock that came while the current round was in flight (round_in_flight), applied
  // once the round is decided without the lock.
  round_news heard_;
  unsigned wakes_after_news_heard_in_round_ = 0;  // see wake_after_news_heard_in_round
  bool woken_ = false;  // the next round is due after wake_jitter; later news changes nothing
  // The current round was sent while every node was subscribed for this op: a release after it is
  // heard.
  bool covered_round_ = false;
  bool competing_ = false;  // became first in line through compete(), not a hand-off
  bool listening_ = false;  // holds an interest in release announcements
  // The resource named by that interest: a key of the resource's hash slot (a semaphore's rounds
  // try keys of one slot).
  std::string listened_;
};

}  // namespace redlock::detail

#endif
