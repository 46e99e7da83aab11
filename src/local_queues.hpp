#ifndef REDLOCK_LOCAL_QUEUES_HPP
#define REDLOCK_LOCAL_QUEUES_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace redlock::detail {

using std::chrono::steady_clock;

struct lease_state;

// What the local queues ask of an acquire waiting in one (ops/acquire.hpp has the rules).
class queued_acquire {
 public:
  // The resource became free locally and this acquire is first in line: try at once.
  virtual void wake() = 0;
  // The local holder released after its hand-off limit, announcing it: compete like a waiter in
  // another process would. The key is gone by `key_gone_by` at the latest.
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

 protected:
  ~queued_acquire() = default;
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
// first. Only the first waiter sends anything to the nodes, and only while no local lease holds
// the resource.
//
// Hand-off: when the holder releases while others wait, the first waiter's SET normally follows
// the release in the same write (the release announces nothing). After
// lock_options::local_handoffs of those in a row the release is announced instead, and the first
// waiter competes: it waits for the announcement like waiters in other processes, or for the
// release's own answer where the key was already gone. local_queues::release_of decides and
// returns how the next waiter starts; the releasing lease passes that on to holder_gone, which
// carries it out. "In a row" counts the releases of this resource's holders while someone waited:
// a release with nobody waiting starts the count again.
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
// joined them all at the same moment at their ends, and goes to the nodes only once it is first in
// every one of them and no local lease holds any; it then holds them all. What that gives:
//  - No deadlock: two acquires that share queues are in the same order in each of them (the order
//    in which they started), so none waits for one that waits for it.
//  - FIFO per resource, no overtaking: an acquire behind a set in one queue waits for that set,
//    also while the set itself waits for another resource; so a stream of small sets or single
//    locks cannot starve a larger set, at the price of keeping a free resource unused meanwhile.
// A set's releases always announce themselves (no hand-off is counted), and wake the first waiter
// of each of its queues.
struct resource_queue {
  lease_state* holder = nullptr;
  bool semaphore = false;
  bool shared = false;                     // a read-write lock's
  std::vector<lease_state*> slot_holders;  // semaphore: by slot, null where none of ours holds it
  std::vector<lease_state*> readers;       // read-write lock: this client's readers
  std::vector<std::shared_ptr<queued_acquire>> waiters;  // short; a deque allocates when empty
  unsigned handoffs_in_a_row = 0;

  bool idle() const noexcept {
    return holder == nullptr && waiters.empty() && readers.empty() &&
           std::all_of(slot_holders.begin(), slot_holders.end(),
                       [](const lease_state* held) { return held == nullptr; });
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
  // Counts the hand-off in the lease's queue; the caller sends the release and then passes
  // next_waiter on to holder_gone.
  lease_release release_of(lease_state& state);

  // The holder's key of lock `resource` is gone from `node`: tells the first waiter of its queue,
  // as an announcement from that node would.
  void key_gone_on_node(std::size_t node, const std::string& resource);
  // A lease of this client stopped holding its resource: the next waiter goes, as `next_waiter`
  // says (what release_of returned for the lease's release; a semaphore's waiter ignores it).
  void holder_gone(lease_state& state, next_waiter_start next_waiter);
  // The first waiter of `queue`, if any, starts as `how` says; by default it wakes and tries at
  // once.
  void start_next_waiter(resource_queue& queue, next_waiter_start how = {});

  // Release announcements, routed to the first waiter of the queue they concern.
  void on_release_announced(std::size_t node, std::string_view resource);
  // A subscription came up or went down: for every resource, or (`slot`, a cluster node's) for
  // those of one hash slot.
  void on_subscription_changed(bool subscribed, std::optional<std::uint16_t> slot);

 private:
  // A semaphore's lease of this client ended: free its slot, wake the first waiter.
  void permit_holder_gone(resource_queue& queue, lease_state& state);
  // A read-write lock's lease of this client ended (see resource_queue).
  void shared_holder_gone(resource_queue& queue, lease_state& state);
  // A set's lease of this client ended: free each of its resources, start their next waiters.
  void set_holder_gone(lease_state& state);

  std::string release_channel_;
  double drift_factor_;
  std::unordered_map<std::string, resource_queue> queues_;
  // Map nodes of forgotten queues, reused with their key and vector storage: nearly every acquire
  // makes a queue and its release forgets it again.
  std::vector<std::unordered_map<std::string, resource_queue>::node_type> spare_queues_;
};

}  // namespace redlock::detail

#endif
