#ifndef REDLOCK_LOCAL_QUEUES_HPP
#define REDLOCK_LOCAL_QUEUES_HPP

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace redlock::detail {

using std::chrono::steady_clock;

struct resource_queue;
class local_queues;

// A lease of this client as the local queues know it while it holds: the queues it holds in. Part
// of the lease (lease_state::local_hold); local_queues alone changes it, but for the acquire that
// wins, which enters it in its queues (round_strategy::hold, local_queues::hold_in).
class queue_holder {
 public:
  // Its own queue while it holds; null before and after.
  resource_queue* queue() const noexcept { return queue_; }

 private:
  friend class local_queues;
  resource_queue* queue_ = nullptr;
  std::vector<resource_queue*> more_queues_;  // a set's: those of its other resources
};

// What the local queues ask of an acquire waiting in one (ops/start_acquire.hpp has the rules), and
// what they keep of it: the queues it waits in and whether it has started. Those fields are
// local_queues' alone (join, start, leave), so every rule of who goes first is in one place.
class queued_acquire {
 public:
  // The local queues started this acquire (it is first in each of its queues now): try at once.
  virtual void wake() = 0;
  // The local queues started this acquire after a holder released past its hand-off limit,
  // announcing it: compete like a waiter in another process would. The key is gone by
  // `key_gone_by` at the latest.
  virtual void compete(steady_clock::time_point key_gone_by) = 0;
  // `node` announced that the resource (of a semaphore: slot `slot` of it) was released there, or
  // the holder's release found it gone there.
  virtual void announced(std::size_t node, std::size_t slot) = 0;
  // A lease of this client released what kept this acquire out: a semaphore's slot `slot`, or a
  // read-write lock's last local reader (slot 0). Its release is queued on every node ahead of
  // anything the acquire sends from now on.
  virtual void permit_released_here(std::size_t slot) = 0;
  // A release subscription came up (`subscribed`) or went down.
  virtual void subscription_changed(bool subscribed) = 0;
  // A set that cannot start was overtaken set_overtakes_before_claim times and now keeps later
  // acquires of its resources behind it until `until` (local_queues): it calls
  // local_queues::claim_expired then, unless it started or ended before.
  virtual void claims_until(steady_clock::time_point until) = 0;

  // The queues it waits in, its own first; several for a set of locks. Empty before it joins and
  // after it leaves.
  std::span<resource_queue* const> queues() const noexcept { return queues_; }
  bool waits_for_several() const noexcept { return queues_.size() > 1; }
  // Started: it went to the nodes (or is about to). It is then first in each of its queues until
  // it leaves them, and nothing behind it starts.
  bool started() const noexcept { return started_; }

 protected:
  ~queued_acquire() = default;

 private:
  friend class local_queues;
  // One queue but for a set: held in place, so that an acquire allocates nothing for it.
  boost::container::small_vector<resource_queue*, 1> queues_;
  bool started_ = false;
  // A set's: how long it keeps its queues once it claims them (its TTL), how many acquires went
  // ahead of it since it last claimed, and until when it claims.
  std::chrono::milliseconds claim_for_{0};
  unsigned overtaken_ = 0;
  std::optional<steady_clock::time_point> claim_until_;
  // local_queues::may_start's memo, valid for the evaluation numbered evaluated_in_.
  mutable unsigned evaluated_in_ = 0;
  mutable bool may_start_ = false;
};

// How the first waiter of a queue starts once the resource is free locally
// (local_queues::start_next_waiter). By default it wakes and tries at once; after a release that
// announced itself instead of handing the resource on (local_queues::release_of), it competes.
struct next_waiter_start {
  bool competes = false;  // queued_acquire::compete instead of queued_acquire::wake
  // With `competes`: the released key is gone on every node by then at the latest.
  steady_clock::time_point key_gone_by{};
};

// Per resource: the lease of this client holding it (if any) and the acquires waiting, oldest
// first but for those that went ahead of a set (below). Only a started acquire sends anything to
// the nodes; it is first in each of its queues, and only starts while no local lease holds any of
// them (local_queues::may_start).
//
// Hand-off: when the holder releases while a single lock of this client can take the resource
// next, that acquire starts at once: its SET follows the release on every node in the same write,
// so the release announces nothing. After lock_options::local_handoffs of those in a row the
// release is announced instead, and the next waiter competes: it waits for the announcement like
// waiters in other processes, or for the release's own answer where the key was already gone. A
// set is never handed a resource that way (its round may lose, and sets passed between the
// coroutines of one process would keep their resources from every other process): the release is
// announced and the set competes. So is a release that no waiter can take now.
// local_queues::release_of decides and returns how the next waiter starts; the releasing lease
// passes that on to holder_gone, which carries it out. "In a row" counts the releases of this
// resource's holders handed on in this way: any other release starts the count again.
//
// A semaphore's queue (keyed by its slot keys' common prefix, see permit_queue_key) differs in
// one way: leases of this client that hold some of its slots do not block the first waiter, which
// only skips those slots; a release of one wakes it at once (its SET follows our DEL on every
// node). Its releases always announce themselves: no hand-off is counted.
//
// A read-write lock's queue (`shared`, keyed by rw_queue_key) holds this client's writer in
// `holder` and its readers in `readers`. A reader first in line goes to the nodes unless a local
// writer holds; a writer first in line goes even while local readers hold, so that its mark keeps
// new readers out everywhere; waiters behind it wait here, in FIFO order. A reader that wins lets
// the next waiter start at once (readers hold together); the last local reader leaving wakes the
// first waiter at once (its next round follows our release on every node). Its releases always
// announce themselves: no hand-off is counted.
//
// A set of locks (client::async_acquire_all) waits in the queue of each of its resources, having
// joined them all at the same moment at their ends; it starts once no local lease holds any of
// them and nothing that must go first is ahead of it in any (local_queues::may_start), and then
// takes the front of each. While it cannot start it yields: a later acquire that can start goes
// ahead of it. What that gives:
//  - No deadlock: a set never keeps an acquire from a resource while the set itself waits for
//    another, so a task that holds "a" and then takes "b" is not kept waiting by a set {a, b}
//    that started in between; and acquires that wait are in one order in every queue they share
//    (the order they joined in, but that one that starts moves to the front of all its queues),
//    so none waits for one that waits for it.
//  - Sets are not starved: after set_overtakes_before_claim acquires went ahead of a set, it
//    claims its queues: later acquires of its resources wait behind it, for as long as its TTL at
//    most, and then it yields again. So a stream of single locks cannot keep a set out, and a
//    task that holds one of a claiming set's resources and takes another waits for a TTL at most.
struct resource_queue {
  queue_holder* holder = nullptr;
  bool semaphore = false;
  bool shared = false;                      // a read-write lock's
  std::vector<queue_holder*> slot_holders;  // semaphore: by slot, null where none of ours holds it
  std::vector<queue_holder*> readers;       // read-write lock: this client's readers
  std::vector<std::shared_ptr<queued_acquire>> waiters;  // short; a deque allocates when empty
  unsigned handoffs_in_a_row = 0;
  std::size_t name_hash = 0;  // its name's, set by local_queues::queue_for

  // An idle queue made fresh but for its vectors' storage, to serve another resource: nothing of
  // the one it served (its hand-offs in a row above all) may carry over. Every member is reset.
  void empty_for_reuse() noexcept {
    holder = nullptr;
    semaphore = false;
    shared = false;
    slot_holders.clear();
    readers.clear();
    waiters.clear();
    handoffs_in_a_row = 0;
  }

  bool idle() const noexcept {
    return holder == nullptr && waiters.empty() && readers.empty() &&
           std::all_of(slot_holders.begin(), slot_holders.end(),
                       [](const queue_holder* held) { return held == nullptr; });
  }
};

// The resource queues of one client, by resource. A queue stays at its address until it is
// forgotten, which happens only once it has neither holder nor waiters. Lives on the client's
// executor.
class local_queues {
 public:
  // `release_channel`: client_options::release_channel (empty: releases announce nothing).
  local_queues(std::string release_channel, double drift_factor);

  resource_queue* find(const std::string& resource);
  resource_queue& queue_for(const std::string& resource);
  void forget_if_idle(const std::string& resource);
  // The queue with waiters that a release of `resource` concerns: the lock's own, or for a
  // semaphore's slot key the semaphore's; null when nobody here waits for it.
  resource_queue* waiting_for(std::string_view resource);
  bool any_waiting(std::string_view resource) { return waiting_for(resource) != nullptr; }

  // How a held lease's release goes out, decided right before it is sent (see resource_queue).
  struct lease_release {
    // Where it announces itself: empty when it hands the resource to the next local waiter, whose
    // SET follows it on every node; else the release channel.
    std::string_view channel;
    // How the next local waiter starts once the lease has stopped holding: the releasing lease
    // passes it to holder_gone. When it competes (queued_acquire::compete), each node's answer to
    // the release that shows our key gone there (deleted, or found no longer ours) is passed to
    // that waiter as an announcement would be (key_gone_on_node). A release that finds the key
    // already gone (a lost lease) deletes and announces nothing, and must not leave it asleep
    // until the key's TTL.
    next_waiter_start next_waiter;
  };
  // What deciding a lease's release needs to know of it besides its queues.
  struct holder_facts {
    unsigned local_handoffs = 0;               // lock_options::local_handoffs
    std::chrono::milliseconds longest_ttl{0};  // the longest TTL a request of it gave its keys
    bool contended = false;                    // its acquire met contention
    std::span<const std::string> resources;    // what it holds: a lock's one, a set's every one
  };
  // Counts the hand-off in the lease's queue; the caller sends the release and then passes
  // next_waiter on to holder_gone.
  lease_release release_of(queue_holder& holder, const holder_facts& facts);

  // The holder's keys of `resources` (a lock's one, a set's every one) are gone from `node`:
  // tells the first waiter of each of their queues, as an announcement from that node would.
  void key_gone_on_node(std::size_t node, std::span<const std::string> resources);
  // The acquire that won enters `holder` in `queues` (its own first), before it leaves them as a
  // waiter; its round strategy then makes it the holder there (round_strategy::hold).
  void hold_in(queue_holder& holder, std::span<resource_queue* const> queues);
  // A lease of this client stopped holding its resource: the next waiter goes, as `next_waiter`
  // says (what release_of returned for the lease's release; a semaphore's waiter ignores it).
  // `queue_names`: the keys of the queues it held, its own first (a semaphore's: its slot key),
  // by which they are found again once a waiter that started may have ended.
  void holder_gone(queue_holder& holder, std::span<const std::string> queue_names,
                   next_waiter_start next_waiter);
  // The first waiter of `queue` that may start, if any, starts as `how` says; by default it wakes
  // and tries at once.
  void start_next_waiter(resource_queue& queue, next_waiter_start how = {});

  // `waiter` waits in the queues of `keys` (its own first), at their ends. `claim_for`: a set's
  // TTL, how long it keeps its queues once it claims them.
  void join(const std::shared_ptr<queued_acquire>& waiter, std::span<const std::string> keys,
            std::chrono::milliseconds claim_for);
  // The same in `queues`, made already (queue_for) for the keys, in their order.
  void join(const std::shared_ptr<queued_acquire>& waiter, std::span<resource_queue* const> queues,
            std::chrono::milliseconds claim_for);
  // Starts `waiter` if it may start now: it then goes ahead of the sets that yield to it and is
  // first in each of its queues. The caller sends its first round.
  bool try_start(queued_acquire& waiter);
  // `waiter` leaves its queues, those of `keys`. With `start_others`, the acquires it kept out
  // may start (and idle queues are forgotten); without (it won, and now holds the resources),
  // nobody starts.
  void leave(queued_acquire& waiter, std::span<const std::string> keys, bool start_others);
  // Whether an acquire that joins `queue` now would wait for one of its waiters.
  bool waiter_goes_first(const resource_queue& queue) const;
  // A set's claim (queued_acquire::claims_until) ran out: it yields again.
  void claim_expired(queued_acquire& waiter);

  // Whether a contended lease of this client released one of `resources` with an announcement
  // less than `window` ago. A new acquire of it then competes with the waiters elsewhere that the
  // announcement woke, instead of sending its SET at once: a coroutine that releases and takes the
  // same lock again in a loop would otherwise come first nearly every time.
  bool announced_lately(std::span<const std::string> resources, steady_clock::time_point now,
                        steady_clock::duration window);

  // How many acquires may go ahead of a set that cannot start before it claims its queues.
  static constexpr unsigned set_overtakes_before_claim = 8;

  // Release announcements, routed to the first waiter of the queue they concern.
  void on_release_announced(std::size_t node, std::string_view resource);
  // A subscription came up or went down: for every resource, or (`slot`, a cluster node's) for
  // those of one hash slot.
  void on_subscription_changed(bool subscribed, std::optional<std::uint16_t> slot);

 private:
  // Whether `waiter` may start: no local lease holds any of its queues (`leaving`, whose release
  // is being decided, counts as gone), and every acquire ahead of it in each is a set that
  // yields.
  bool may_start(const queued_acquire& waiter, const queue_holder* leaving = nullptr) const;
  // The time, read from the clock when first asked for: most evaluations of who may start meet
  // no set with a claim, and need none.
  class lazy_now {
   public:
    steady_clock::time_point get();

   private:
    std::optional<steady_clock::time_point> now_;
  };
  bool may_start_now(const queued_acquire& waiter, const queue_holder* leaving,
                     lazy_now& now) const;
  // A set that cannot start and does not claim its queues: later acquires may go ahead of it.
  bool yields(const queued_acquire& waiter, const queue_holder* leaving, lazy_now& now) const;
  // The waiter of `queue` that would start next (`leaving` gone), if any.
  std::shared_ptr<queued_acquire> next_to_start(const resource_queue& queue,
                                                const queue_holder* leaving) const;
  // `waiter` joins `queue` at its end (join).
  static void enter(const std::shared_ptr<queued_acquire>& waiter, resource_queue& queue);
  // A waiter that has just joined its queues: not started, no claim yet.
  static void joined(queued_acquire& waiter, std::chrono::milliseconds claim_for) noexcept;
  // Moves `waiter` to the front of each of its queues, counting it against the sets it passes.
  void put_first(queued_acquire& waiter);

  // A semaphore's lease of this client ended: free its slot, wake the first waiter.
  void permit_holder_gone(resource_queue& queue, queue_holder& holder, std::string_view slot_key);
  // A read-write lock's lease of this client ended (see resource_queue).
  void shared_holder_gone(resource_queue& queue, queue_holder& holder,
                          const std::string& queue_name);
  // A set's lease of this client ended: free each of its resources, start their next waiters as
  // `next_waiter` says.
  void set_holder_gone(queue_holder& holder, std::span<const std::string> resources,
                       next_waiter_start next_waiter);

  std::string release_channel_;
  double drift_factor_;
  // The hash of a resource's name. std::hash of a string took some 80 instructions for a name of 30
  // to 40 bytes, this takes 50: eight bytes per step, each mixed by a multiplication. Like
  // std::hash it is not seeded, so that a simulation run is decided by its seed alone.
  //
  // A queue's key keeps its name's hash (queue_name), computed once when the queue is made: the
  // map reads it wherever it needs a node's hash (it keeps none of its own then, the hash being
  // cheap), and a lease's release forgets its queue by its name and that hash (hashed_name),
  // without hashing the name again. A lookup by name alone hashes it.
  struct queue_name {
    std::string name;
    std::size_t hash = 0;
  };
  struct hashed_name {
    std::string_view name;
    std::size_t hash = 0;
  };
  struct name_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const noexcept;
    std::size_t operator()(const queue_name& key) const noexcept { return key.hash; }
    std::size_t operator()(const hashed_name& key) const noexcept { return key.hash; }
  };
  struct name_equal {
    using is_transparent = void;
    static std::string_view name_of(std::string_view name) noexcept { return name; }
    static std::string_view name_of(const queue_name& key) noexcept { return key.name; }
    static std::string_view name_of(const hashed_name& key) noexcept { return key.name; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const noexcept {
      return name_of(a) == name_of(b);
    }
  };
  using queue_map = std::unordered_map<queue_name, resource_queue, name_hash, name_equal>;
  // forget_if_idle of a name whose hash is known.
  void forget_if_idle(const hashed_name& key);

  queue_map queues_;
  // Map nodes of forgotten queues, reused with their key and vector storage: nearly every acquire
  // makes a queue and its release forgets it again.
  std::vector<queue_map::node_type> spare_queues_;
  // Numbers the evaluations of may_start, for its memo in queued_acquire.
  mutable unsigned evaluation_ = 0;
  // The announced releases of contended leases, oldest first, for announced_lately: a few at a
  // time, each kept for announced_release_memory.
  struct announced_release {
    std::string resource;
    steady_clock::time_point at;
  };
  std::vector<announced_release> announced_lately_;
  static constexpr std::chrono::milliseconds announced_release_memory{100};
  static constexpr std::size_t most_announced_releases_kept = 256;
};

}  // namespace redlock::detail

#endif
