#ifndef REDLOCK_LOCK_ACQUIRE_MACHINE_HPP
#define REDLOCK_LOCK_ACQUIRE_MACHINE_HPP

#include "algo/acquire_round.hpp"
#include "algo/cleanup_plan.hpp"
#include "algo/fence_quorum.hpp"
#include "algo/replies.hpp"
#include "algo/wait_plan.hpp"
#include "backoff.hpp"
#include "lock/lease_state.hpp"
#include "lock/local_queues.hpp"
#include "lock/lock_home.hpp"
#include "lock/round_strategy.hpp"
#include "redlock/observer.hpp"

#include <boost/asio/cancellation_type.hpp>
#include <boost/container/small_vector.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

// One thing an acquire asks its driver to do (acquire_driver). The machine decides; the driver only
// carries out, in the order asked.
struct acquire_action {
  enum class kind : std::uint8_t {
    // Register for shutdown (operation_registry) and the caller's cancellation.
    watch,
    // Send the current round (acquire_machine::round_request) to every node, as ballot `ballot`.
    send_round,
    // Wake the machine (acquire_machine::timer) at `at`; without `at`, never (a pending wait is
    // stale from now on).
    arm_timer,
    // A token-checked release (acquire_machine::release_of).
    release,
    // The held round's fencing write-back, one per fenced resource (acquire_machine::fence_plan);
    // each reports to acquire_machine::fence_written_back.
    write_back_fence,
    // A grant of the held round after its decision, for the write-backs
    // (acquire_machine::late_grant_of).
    late_grant_to_write_backs,
    // Hold (or drop) an interest in release announcements (of acquire_machine::listened).
    listen,
    stop_listening,
    // Tell acquire_machine::subscription_state whether the subscriptions for the lease's
    // resource are settled, once every earlier action is carried out.
    check_subscription,
    // Leave the local queues; the acquires this one kept out may start.
    leave_queues,
    // The first waiter of `queue` may start (the machine holds in it now).
    start_next_waiter,
    // The caller's operation completes with `code` (success: the lease holds, renewal starts).
    complete,
  };

  kind what = kind::complete;
  // send_round: the ballot; release, late_grant_to_write_backs: which one.
  std::size_t index = 0;
  std::optional<steady_clock::time_point> at{};  // arm_timer
  resource_queue* queue = nullptr;               // start_next_waiter
  boost::system::error_code code{};              // complete
};

// What a release action releases: `key` (set to `token`) on the nodes in `targets` (all when
// empty); `with_mark`: a waiting writer's, which also deletes its mark.
struct acquire_release {
  std::string key;
  std::string token;
  std::vector<bool> targets{};
  bool with_mark = false;
};

// What an acquire machine reads of the client's release subscriptions (release_announcements),
// given by its driver: reading changes nothing.
class announcement_facts {
 public:
  // Every node is subscribed for `resource`: a release of it anywhere would be heard.
  virtual bool announcements_cover(std::string_view resource) const = 0;

 protected:
  ~announcement_facts() = default;
};

// The decisions of one async_acquire or async_try_acquire (of a lock, a set, a semaphore's
// permit, a read-write lock's side), from the local queue through rounds and waits to one
// completion, with no I/O and no clock: every input says what time it is, and every effect is an
// acquire_action that the driver takes with next_action(). What a round sends and what its answers
// teach of the holders is the round strategy's; whether the round won is acquire_round's; when to
// try again is wait_plan's; a failed round's cleanup is cleanup_plan's.
//
// Stages: queued (behind a local holder or waiter; nothing sent), in_round (SETs in flight),
// fencing (with lock_options::fencing: a held round's write-back in flight), subscribing (after
// the first refusal: until the release announcements are subscribed), sleeping (until the lock
// can be free), finished. Invariant: a machine that is in its resource queue is not finished, and
// the queue's first acquire is the only one that may be in_round, subscribing or sleeping.
//
// How a waiting acquire learns that the lock is free (client_options::release_channel):
//  - From its first refusal on, it holds an interest in release announcements, so the client
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
//
// Reentrancy: an input may arrive while the driver carries out an earlier action (a node that
// fails a request at once answers inside send_round; the local queues start this acquire inside
// leave_queues of another). Every input changes the state first and queues its actions after the
// ones still waiting, so actions run in the order they were decided.
class acquire_machine {
 public:
  // `lease`: the lease to be, new (lease_state::make); its key is set by each round to the one the
  // strategy names. `strategy` may refer to the lease's resource: the machine destroys it first.
  // `self`: the driver, as the local queues know it, and what it tells of the subscriptions.
  // `home`: the lease's, which keeps it alive.
  acquire_machine(lock_home& home, std::unique_ptr<round_strategy> strategy,
                  std::shared_ptr<lease_state> lease, const lock_options& options,
                  bool single_round, queued_acquire& self, const announcement_facts& announcements);

  const std::shared_ptr<lease_state>& lease() const noexcept { return lease_; }
  const round_strategy& strategy() const noexcept { return *strategy_; }
  const lock_options& options() const noexcept { return options_; }

  // The next action to carry out, if any. Inline: the driver asks after every input, and most
  // inputs (a node's answer that decides nothing) ask for none.
  std::optional<acquire_action> next_action() {
    if (head_ < actions_.size()) return actions_[head_++];
    if (head_ != 0) forget_taken_actions();
    return std::nullopt;
  }

  // ---- Inputs. ----
  // `self` as the queues keep it (the driver's shared owner).
  void start(steady_clock::time_point now, const std::shared_ptr<queued_acquire>& self);
  // From the local queues (queued_acquire).
  void wake(steady_clock::time_point now);
  void compete(steady_clock::time_point key_gone_by, steady_clock::time_point now);
  void announced(std::size_t node, std::size_t slot, steady_clock::time_point now);
  void permit_released_here(std::size_t slot, steady_clock::time_point now);
  // `settled`: no node's subscription for the lease's resource is still in its first attempt.
  void subscription_changed(bool subscribed, bool settled, steady_clock::time_point now);
  void claims_until(steady_clock::time_point until);
  // The answer to check_subscription.
  void subscription_state(bool settled, steady_clock::time_point now);
  // A reply of the current round's request to `node`.
  void answer(std::size_t node, const boost::system::error_code& ec, const resp::value& reply,
              steady_clock::time_point now) {
    // Nearly every reply: a plain SET's OK. It is read here, without the answer that
    // read_set_reply would make for any form.
    if (!ec && form_ == set_form::plain && fences_.empty() && stage_ != stage::fencing &&
        is_ok(reply))
      return plain_grant(node, now);
    answer_in_full(node, ec, reply, now);
  }
  // A reply of `node` to the request of an earlier round (`ballot`).
  void earlier_answer(std::size_t ballot, std::size_t node, const boost::system::error_code& ec,
                      const resp::value& reply);
  // The write-back of resource `resource` (by index into fence_plan) of round number `round`
  // decided: `confirmed` by a quorum, and every node's answer for diagnostics.
  void fence_written_back(unsigned round, std::size_t resource, bool confirmed,
                          const node_answers& answers, steady_clock::time_point now);
  // The timer armed last (arm_timer) is due.
  void timer(steady_clock::time_point now);
  void cancel(boost::asio::cancellation_type type);

  // ---- What the actions refer to. ----
  // The current round's request (valid from its send_round until the next round opens).
  const round_strategy::round_request& round_request() const noexcept { return *request_; }
  // The held round's write-backs (valid from write_back_fence until the acquire ends).
  const std::vector<fence_write>& fence_plan() const noexcept { return fence_plan_; }
  // Which nodes had not answered the held round when it was decided (their grants come later).
  const std::vector<bool>& fence_pending() const noexcept { return fence_pending_; }
  // The number of the current round (the first is 1).
  unsigned rounds() const noexcept { return rounds_; }
  // What release action `release` releases, until every action asked so far was taken; the
  // keys it deletes (the views point into `what` and the strategy).
  const acquire_release& release_of(const acquire_action& release) const {
    return releases_[release.index];
  }
  hold_keys hold_of(const acquire_release& what) const {
    return strategy_->round_hold(what.key, what.with_mark);
  }
  const late_grant& late_grant_of(const acquire_action& late) const {
    return late_grants_[late.index];
  }
  // The resource of the interest in announcements that listen and stop_listening are about.
  const std::string& listened() const noexcept { return listened_; }
  // Tells `watcher` (client_options::observer) of the acquire that completed with `ec`, decided
  // at `now`. Out of line, so that everything the observer costs the acquire is in this call.
  void report_to(observer& watcher, boost::system::error_code ec,
                 steady_clock::time_point now) const;
  bool finished() const noexcept { return stage_ == stage::finished; }
  // Whether the write-backs of round number `round` are still awaited.
  bool writing_back(unsigned round) const noexcept {
    return stage_ == stage::fencing && rounds_ == round;
  }

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

  const node_facts& nodes() const noexcept { return nodes_; }
  std::string subject() const { return strategy_->subject(); }
  bool may_be_free() const { return strategy_->may_be_free(); }
  // Whether the current round's SETs are in flight, or its held outcome is being written back:
  // news of the lock then waits in heard_ until the round's own answers are applied.
  bool round_in_flight() const noexcept {
    return stage_ == stage::in_round || stage_ == stage::fencing;
  }
  void forget_holder(std::size_t slot, std::size_t node) { strategy_->forget_holder(slot, node); }
  // Applies what was heard during the round that was just decided without the lock; true when
  // it makes the next round due at once: a release that may free a quorum, or a subscription that
  // came back (whatever was announced while it was down is lost).
  bool apply_heard();

  void ask(acquire_action action) { actions_.push_back(std::move(action)); }
  // Every action asked for was taken: empties actions_ and what they referred to.
  [[gnu::noinline]] void forget_taken_actions();
  void ask(acquire_action::kind what) { ask(acquire_action{.what = what}); }
  // Arms the driver's timer at `at`, or disarms it; a disarm of a timer that is not armed is not
  // asked for (an uncontended acquire never arms one).
  void arm_timer(std::optional<steady_clock::time_point> at) {
    if (!at && !timer_armed_) return;
    timer_armed_ = at.has_value();
    ask({.what = acquire_action::kind::arm_timer, .at = at});
  }

  // Every round has a token of its own. A request of an earlier round can still run on a node
  // after this round's SET: a cleanup release that met NOSCRIPT is resent as EVAL behind the
  // requests issued meanwhile, and a SET can sit in a slow node's queue. Were the token shared,
  // such a stale release would delete this round's key after the node had granted it, and the
  // client would count a vote it no longer has. With distinct tokens a stale request can only
  // delete or set keys of rounds that are over.
  void begin_round(steady_clock::time_point now);

  static bool is_ok(const resp::value& reply) noexcept {
    // Compared by hand: std::string's == with a literal measures it and calls memcmp.
    return reply.kind == resp::type::simple_string && reply.text.size() == 2 &&
           reply.text[0] == 'O' && reply.text[1] == 'K';
  }
  // answer() for a plain SET's OK: what answer_in_full does with what read_set_reply makes of it.
  void plain_grant(std::size_t node, steady_clock::time_point now);
  void answer_in_full(std::size_t node, const boost::system::error_code& ec,
                      const resp::value& reply, steady_clock::time_point now);

  // A refusal of the current round that answers after its decision: taken into a sleeping
  // acquire's plan at once.
  void note_late_refusal(std::size_t node, const set_answer& answer, steady_clock::time_point now);

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
  void write_back_fence(steady_clock::time_point valid_until, steady_clock::time_point now);

  // Keeps the counters of `node`'s grant (one per resource of a set).
  void note_fences(std::size_t node, const set_answer& answer);

  // Waits, from `now`, for the lock to become free as the strategy knows it; with `due_now` only
  // for the wake-up jitter.
  void sleep(steady_clock::time_point now, bool due_now = false);

  // Arms the timer for the earliest moment the next round is worth it, see the class comment.
  void plan_wake(steady_clock::time_point now);

  // The next round after a short random delay (wake_jitter), which shrinks with every competition
  // lost, so that a waiter that keeps losing goes first next time, whichever process it is in.
  void wake_soon(steady_clock::time_point now);

  // The next round when news heard during the round just lost may have freed the lock
  // (apply_heard): after a collision backoff (collision_delay), whose window widens with every
  // such wake-up in a row.
  void wake_after_news_heard_in_round(steady_clock::time_point now);

  // From the first refusal (or queueing) until the acquire ends, the client keeps its release
  // subscriptions open.
  void listen();
  void stop_listening();

  std::string explain(boost::system::error_code ec, steady_clock::time_point now,
                      bool lasting = false) const;

  // Nodes failing for good (connection::permanent_failure) whose answer in this round came after
  // the decision or not at all: shown as such, not as "not awaited".
  std::vector<std::string> lasting_failures() const;

  // On each node the release runs after our SET: both travel on that node's one connection.
  // `key`: the round's (a semaphore's rounds try different slots).
  void release_where(std::vector<bool> targets, std::string key, std::string token);

  // Releases a failed round's keys as cleanup_plan says: at once where the node answered, later
  // where its answer is still to come. Those answers reach answered_after_decision, or
  // earlier_answer once a later round has opened its ballot.
  void clean_up_failed_round(const std::vector<bool>& targets);

  // Deletes the marks this acquire may have left on the nodes (a waiting writer's), on every
  // node or only on `node`; announced, since readers queued behind them may go now.
  void drop_marks(std::optional<std::size_t> node = std::nullopt);

  // An answer of any round of this acquire from `node` set a mark. Before the acquire ends the
  // strategy keeps it in mind; once it has ended without the lock (its marks already dropped, or
  // none known then), the mark is deleted on that node at once: the deletion follows the answer's
  // request there. A writer that holds deletes its marks with its release.
  void note_mark(std::size_t node);

  // `node` answered `answer` to the failed round of ballot `of_ballot`.
  void settle_deferred_cleanup(std::size_t of_ballot, std::size_t node, const node_answer& answer);
  void send_deferred_cleanups();

  void succeed(steady_clock::time_point valid_until);

  // The SETs of a round that answer after the decision: grants still count for a successful
  // round, and a failed one's are released.
  void answered_after_decision(std::size_t node);

  // Once every node has answered: a lock held by fewer than all nodes survives fewer failures.
  void note_if_degraded();

  void finish(boost::system::error_code ec);
  void complete(boost::system::error_code ec);

  // The queue of the acquire's own key (its first, for a set), while it is queued.
  resource_queue* queue_of_own() const noexcept { return self_.queues().front(); }

  // Whether a lease of this client holds what the queued acquire waits for (rather than an
  // earlier acquire waiting for it), as its diagnostics say.
  bool held_here() const;

  lock_home& home_;          // kept alive by the lease
  const node_facts& nodes_;  // home_'s
  // Scratch for node_facts::permanent_failures, read when an answer other than a grant decides a
  // round. Sized then: nearly every acquire never reads it.
  boost::container::small_vector<boost::system::error_code, 7> lasting_now_;
  std::shared_ptr<lease_state> lease_;
  // What the rounds send and learn: a lock's, a set's, a semaphore permit's, a read-write lock's.
  // Declared after lease_, so destroyed before it: a lock's strategy names the lease's resource.
  std::unique_ptr<round_strategy> strategy_;
  queued_acquire& self_;
  const announcement_facts& announcements_;
  const lock_options options_;  // the acquire's; the lease keeps only what its release needs
  bool single_round_;
  backoff retry_;
  // Asked for and not yet taken by the driver, oldest first from head_; what the release and
  // late-grant actions among them refer to. All three are emptied once every action is taken.
  boost::container::small_vector<acquire_action, 4> actions_;
  std::size_t head_ = 0;
  std::vector<acquire_release> releases_;
  std::vector<late_grant> late_grants_;
  std::optional<steady_clock::time_point> deadline_;
  stage stage_ = stage::idle;
  std::optional<round_strategy::round_request> request_;  // the current round's
  std::optional<acquire_round> round_;                    // the current or last round
  set_form form_ = set_form::plain;                       // the current round's
  std::size_t ballot_ = 0;  // the current round's ballot (the driver's reply tags)
  // A set, while queued: when its claim on its queues ends (local_queues).
  std::optional<steady_clock::time_point> claim_ends_;
  // Fenced rounds: what the current round fences (round_strategy::fenced_keys), and by resource
  // (a lock has one, a set one per resource) each granting node's counter as its grant answered
  // before the decision.
  std::vector<round_strategy::fenced_key> fenced_keys_;
  std::vector<std::vector<std::optional<std::uint64_t>>> fences_;
  // In stage fencing: the write-backs asked for, those not confirmed yet, and until when the
  // held round is valid.
  std::vector<fence_write> fence_plan_;
  std::vector<bool> fence_pending_;
  std::size_t write_backs_undecided_ = 0;
  steady_clock::time_point fenced_valid_until_{};
  // Failed rounds whose cleanup waits for some nodes' answers.
  cleanup_plan<set_form> cleanups_;
  unsigned rounds_ = 0;
  steady_clock::time_point started_{};
  bool acquired_ = false;  // the last round won
  // Waiting: the strategy knows where the lock is held and until when, as of round watch_round_.
  unsigned watch_round_ = 0;
  steady_clock::time_point backoff_until_{};
  // News of the lock that came while the current round was in flight (round_in_flight), applied
  // once the round is decided without the lock.
  round_news heard_;
  unsigned wakes_after_news_heard_in_round_ = 0;  // see wake_after_news_heard_in_round
  bool woken_ = false;  // the next round is due after wake_jitter; later news changes nothing
  // The current round was sent while every node was subscribed for this acquire: a release after
  // it is heard.
  bool covered_round_ = false;
  bool competing_ = false;    // became first in line through compete(), not a hand-off
  bool listening_ = false;    // holds an interest in release announcements
  bool timer_armed_ = false;  // the last arm_timer asked armed it, and it has not fired since
  // The resource named by that interest: a key of the resource's hash slot (a semaphore's rounds
  // try keys of one slot).
  std::string listened_;
};

}  // namespace redlock::detail

#endif
