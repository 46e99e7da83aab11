#ifndef REDLOCK_LOCK_ROUND_STRATEGY_HPP
#define REDLOCK_LOCK_ROUND_STRATEGY_HPP

#include "algo/node_answer.hpp"
#include "algo/replies.hpp"
#include "block_cache.hpp"
#include "lock/hold_keys.hpp"
#include "lock/lock_request.hpp"
#include "lock/node_facts.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

using std::chrono::steady_clock;

class lease_state;
struct resource_queue;

// What the rounds of one acquire send and what their answers teach about when to try again: a
// lock's rounds (lock_rounds.hpp) or a semaphore permit's (slot_rounds.hpp). The acquire machine
// owns everything else, the same for both: the local queue, the ballot and its decision, fencing,
// cleanups, sleeping and cancellation. A strategy does no I/O and reads no clock.
//
// Call order: next_round opens a round; record takes each answer that comes before the round's
// decision; after a decision without the lock, learn replaces what is known with what that round
// taught, and late_refusal adds the refusals that answer after it. forget_holder applies
// announcements (a holder's key deleted on a node); may_be_free and free_by read the result.
class round_strategy {
 public:
  virtual ~round_strategy() = default;

  // A strategy lives for one acquire: its memory is recycled (block_cache.hpp). The virtual
  // destructor gives the sized delete the size of the kind that was made.
  static void* operator new(std::size_t bytes) { return cached_allocate(bytes); }
  static void operator delete(void* block, std::size_t bytes) noexcept {
    cached_deallocate(block, bytes);
  }

  // The local queue (local_queues) the acquire waits in.
  virtual const std::string& queue_key() const = 0;

  // Every local queue the acquire waits in: queue_key() alone, but for a set of locks, which
  // waits in the queue of each of its resources (the first being queue_key()).
  virtual std::span<const std::string> queue_keys() const { return {&queue_key(), 1}; }

  // What observer events name: the lock's resource, or the semaphore's name.
  virtual const std::string& name() const = 0;

  // What diagnostics name: the lock's resource, or the semaphore and the slot last tried.
  virtual std::string subject() const = 0;

  // Why the acquire cannot start, as its diagnostics say it; empty when it can. Replies of up to
  // `max_reply_memory` bytes are read (client_options::replies).
  virtual std::string problem(std::size_t max_reply_memory) const = 0;

  // A try (single round) that finds `queue`, the acquire's local queue, as it is: why it is
  // contended here without asking the nodes; empty when it may go on. `waiter_goes_first`: an
  // acquire waiting in it would go before the try (local_queues::waiter_goes_first).
  virtual std::string contended_here(const resource_queue* queue, bool waiter_goes_first) const = 0;

  // The acquire entered `queue`; it stays there until it holds or ends.
  virtual void join(resource_queue& queue) = 0;

  // Why a queued acquire met its deadline there: this client's other leases and acquires kept it
  // from the nodes for `waited`; `held_here`: a lease of this client holds what it waits for.
  virtual std::string queued_too_long(std::chrono::milliseconds waited, bool held_here) const = 0;

  struct round_inputs {
    std::size_t nodes = 0;
    std::string_view token;  // the round's own (every round has one)
    std::chrono::milliseconds ttl;
    bool fencing = false;
    bool first = false;      // the acquire's first round
    bool competing = false;  // first in line after a hand-off limit (queued_acquire::compete)
    bool single_round = false;
  };

  // What a round sends to every node.
  struct round_request {
    set_form form = set_form::plain;
    lock_request kind = lock_request::set;
    // The key the round sets: the lease's resource from now on.
    std::string_view key{};
    // The request's bytes: `shared`, or when that is null `owned`, which the strategy keeps for as
    // long as it lives (the acquire, and with it the strategy, outlives its requests).
    shared_request_bytes shared{};
    std::string_view owned{};
  };

  // Opens a round: what it sends. Empty when nothing can be tried now (every slot is held by this
  // client, see nothing_to_try); the acquire then waits in its queue.
  virtual std::optional<round_request> next_round(const round_inputs& in,
                                                  std::minstd_rand& random) = 0;

  // Why next_round had nothing to try, for a try that ends on it.
  virtual std::string nothing_to_try() const = 0;

  // An answer of the current round that came before its decision.
  virtual void record(std::size_t node, const set_answer& answer, steady_clock::time_point now) = 0;

  // After a decision without the lock: a mistake of the caller's that no later round can fix (a
  // semaphore whose nodes record another number of permits), explained; empty when there is none.
  virtual std::string lasting_problem(const node_facts& nodes) const = 0;

  // After a decision without the lock in a try: whether another round of the same try may still
  // win (a semaphore slot it has not tried that is not known to be held on a quorum).
  virtual bool another_try_may_win(std::minstd_rand& random) const = 0;

  // After a decision without the lock: what the round taught replaces what was known.
  virtual void learn(const node_answers& answers, std::size_t quorum, steady_clock::time_point now,
                     double drift_factor) = 0;

  // A refusal of the current round that came after its decision. `watching`: the acquire waits on
  // what this round taught, so the refusal is applied to it now. Returns whether it was.
  virtual bool late_refusal(std::size_t node, const set_answer& answer,
                            steady_clock::time_point now, double drift_factor, bool watching) = 0;

  // A holder (of slot `slot`; a lock has only slot 0) is gone from `node`.
  virtual void forget_holder(std::size_t slot, std::size_t node) = 0;

  // The local holder released after its hand-off limit: every node is held until `key_gone_by`.
  virtual void held_until(std::size_t nodes, std::size_t quorum,
                          steady_clock::time_point key_gone_by) = 0;

  // Whether trying again may succeed now, as far as the last round and announcements tell.
  virtual bool may_be_free() const = 0;

  // When trying again succeeds at the latest unless holders extend; see release_watch::free_by.
  virtual std::optional<steady_clock::time_point> free_by() const = 0;

  // The keys the current round's request uses, quoted, for messages.
  virtual std::string keys_of_round(bool fencing) const = 0;

  // Whether every key a round uses is in one hash slot, as a Redis Cluster node needs (a name with
  // a '}' and no hash tag spreads a fence counter or a semaphore's slots over several).
  virtual bool keys_in_one_slot(bool fencing) const = 0;

  // Why the acquire cannot run on a Redis Cluster node (keys_in_one_slot is false), as its
  // diagnostics say it; empty when it can.
  virtual std::string cross_slot_problem(bool fencing) const;

  // The round won: `lease` holds what it set, as `queue`'s holder. Returns whether the queue's
  // next waiter may start at once (a semaphore's: it tries the other slots; a read-write lock's
  // after a reader).
  virtual bool hold(resource_queue& queue, lease_state& lease) = 0;

  // What a round that set `key` holds, as its cleanup releases it. With `with_mark`, a waiting
  // writer's release also deletes its mark (a read-write lock's; see rw_rounds).
  virtual hold_keys round_hold(std::string_view key, bool /*with_mark*/) const {
    return hold_keys::lock_key(key);
  }

  // After learn: whether the marks this acquire has set must now go from every node (a writer
  // whose marks stand on fewer than a quorum); true once per such round, and then forgotten.
  virtual bool take_marks_to_drop() { return false; }

  // Whether marks of this acquire may stand on some node: an acquire that ends without the lock
  // deletes them.
  virtual bool marks_may_stand() const { return false; }

  // An answer that no round counts any more (one of an earlier round, after the next one opened)
  // set a mark of this acquire: it may stand, and goes when the acquire ends.
  virtual void mark_seen() {}

  // What a fenced round fences: per resource (a set's, in the order of its grants' counters; one
  // for any other lock), the key the round set to its token, which the write-back checks, and the
  // counter its grants incremented, which the write-back raises. The two must name the counter of
  // the same resource: a write-back to another key would leave the grants' counter behind, and a
  // later holder granted by other nodes would get a smaller token.
  // A held fenced round's token is always written back (fence_write_back) before the lease is
  // handed out, a reader's too: a reader's token is the highest counter its grants read, which a
  // round that failed may have raised past every writer's; written back, it is below the token of
  // every later writer, whose quorum meets the reader's.
  struct fenced_key {
    std::string key;
    std::string counter;
    bool token_is_member = false;  // fence_write::token_is_member
  };
  virtual std::vector<fenced_key> fenced_keys() const = 0;
};

}  // namespace redlock::detail

#endif
