#ifndef REDLOCK_LOCK_LEASE_STATE_HPP
#define REDLOCK_LOCK_LEASE_STATE_HPP

#include "algo/hash_slot.hpp"
#include "clock.hpp"
#include "intrusive_list.hpp"
#include "lock/hold_keys.hpp"
#include "lock/lease_machine.hpp"
#include "lock/lease_timers.hpp"
#include "lock/local_queues.hpp"
#include "lock/lock_home.hpp"
#include "redlock/observer.hpp"
#include "redlock/options.hpp"

#include <boost/container/small_vector.hpp>
#include <boost/system/error_code.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

using std::chrono::steady_clock;

struct resource_queue;

// Someone waiting for a lease to stop holding (async_wait_lost): told once, with what it gets.
class loss_waiter {
 public:
  virtual void lease_ended(boost::system::error_code ec) = 0;

 protected:
  ~loss_waiter() = default;
};

// Everything behind a redlock::lease. Lives on the client's executor. What the lease is and how
// its acquire and release went change only through its own verbs below; its renewal and expiry
// are a lease_machine's (lock/lease_machine.hpp), which ops/extend.cpp drives.
class lease_state : public list_hook, public std::enable_shared_from_this<lease_state> {
 public:
  enum class phase : std::uint8_t { never_held, held, released, lost };

  lease_state(std::shared_ptr<lock_home> home, std::string resource, const lock_options& options);
  ~lease_state();

  // One per acquire, its memory recycled (block_cache.hpp).
  static std::shared_ptr<lease_state> make(std::shared_ptr<lock_home> home, std::string resource,
                                           const lock_options& options);

  // ---- What the lease is. ----
  // The client it belongs to (lock_home; its lock space: space_of in lock_space.hpp).
  const std::shared_ptr<lock_home>& home() const noexcept { return home_; }
  // The key its acquire's last round set (a set's: its first resource).
  const std::string& resource() const noexcept { return resource_; }
  // hash_slot(resource()), hashed the first time a cluster node needs it: the acquire's rounds,
  // its renewals and its release then route by one hash.
  std::uint16_t resource_slot() const noexcept {
    if (resource_slot_ == slot_unknown) resource_slot_ = hash_slot(resource_);
    return resource_slot_;
  }
  // What it holds on every node (lock/hold_keys.hpp).
  hold_kind kind() const noexcept { return kind_; }
  // A read-write lock's: a writer's mark key and mark id, and the lock's queue key
  // (rw_queue_key), which its release announcements say and under which its local queue is kept.
  const std::string& mark_key() const noexcept { return kind_details().mark_key; }
  const std::string& mark_id() const noexcept { return kind_details().mark_id; }
  const std::string& queue_key() const noexcept { return kind_details().queue_key; }
  // A set's (hold_kind::set): every resource, sorted (normalize_set); `resource` is the first.
  const std::vector<std::string>& resources() const noexcept { return kind_details().resources; }
  // What observer events name, when not `resource`: a semaphore permit's semaphore.
  const std::string& observed_name() const noexcept { return kind_details().observed_name; }
  const std::string& token() const noexcept { return token_; }
  // A key that must live at least as long as the lock key, extended with it (extend_script's
  // second key); empty for most locks. A semaphore permit's: the semaphore's permits record.
  const std::string& companion_key() const noexcept { return kind_details().companion_key; }
  // With lock_options::fencing, known before the lease is handed out; then fixed. A set's has
  // one token per resource, in the order of `resources`; `fencing_token` is then empty unless
  // the set has one resource.
  const std::optional<std::uint64_t>& fencing_token() const noexcept { return fencing_token_; }
  const std::vector<std::uint64_t>& fencing_tokens() const noexcept {
    return kind_details().fencing_tokens;
  }
  // Read anywhere: ~lease may run on any thread. Once not held it never is again (never_held ->
  // held -> released | lost), so a reader that sees anything but `held` may rely on it without a
  // hop to the executor.
  phase current(std::memory_order order = std::memory_order_seq_cst) const noexcept {
    return current_.load(order);
  }
  steady_clock::time_point acquired_at() const noexcept { return acquired_at_; }
  // Why the last operation on it failed, or what its acquire found degraded; empty otherwise.
  const std::string& diagnostics() const noexcept { return kind_details().diagnostics; }
  // Its acquire met contention: a round was refused, or it competed after a local release. Other
  // processes may then wait for the resource when it is released (local_queues::release_of).
  bool contended() const noexcept { return contended_; }
  // Nodes that granted the acquire: the quorum that decided it, then every later grant as its
  // reply arrives. Read anywhere.
  std::size_t granted_nodes() const noexcept { return granted_nodes_; }

  // ---- What its acquire tells it, before the lease is handed out. ----
  // It holds a set of locks, `resources` (canonical; empty for an invalid set).
  void hold_set(std::vector<std::string> resources);
  // It extends `key` along with its own (companion_key).
  void extend_along(std::string key);
  // The token of the round about to be sent (every round has its own).
  void use_token(std::string token);
  // The key the round about to be sent sets. A lock's rounds name the lease's own resource
  // (lock_rounds): told apart inline, without comparing bytes, since every round comes here.
  void sets_key(std::string_view key) {
    if (key.data() != resource_.data() || key.size() != resource_.size()) sets_other_key(key);
  }
  // It holds a read-write lock as a reader, or as a writer with its mark.
  void hold_as_reader(std::string queue_key);
  void hold_as_writer(std::string queue_key, std::string mark_key, std::string mark_id);
  // Observer events name `name` (a semaphore permit's: the semaphore).
  void observe_as(std::string name);
  // Its fencing tokens, one per resource (a set's) or the lock's one.
  void fencing_tokens_known(std::vector<std::uint64_t> tokens);
  // Held through a successful round that started at `round_start`, valid until `until`
  // (renewal and expiry: start_renewal, ops/extend.hpp).
  struct held_round {
    steady_clock::time_point started;
    steady_clock::time_point valid_until;
    bool contended = false;
    std::size_t granted_nodes = 0;
  };
  void held_with(const held_round& round);
  // One more node granted the acquire's round after it was decided.
  void granted_late() noexcept { ++granted_nodes_; }
  // Why the last operation on it failed (or what its acquire found degraded), for diagnostics().
  void diagnose(std::string why);

  // ---- Renewal and expiry (ops/extend.cpp drives them). ----
  // Until when the lock is ours, the extensions that may still run, and the longest TTL any
  // request of this lease gave the key (how long a cleanup can matter).
  const extension_validity& validity() const noexcept { return renewal_.validity(); }
  // The one timer the renewal's driver arms for the machine, one of its home's lease_timers.
  class renewal_timer_entry final : public lease_timers::entry {
   public:
    explicit renewal_timer_entry(lease_state& owner) noexcept : owner_(owner) {}
    // Calls `due(lease)` at `at` on the client's executor, unless armed again or disarmed before.
    void arm(steady_clock::time_point at, void (*due)(lease_state&));
    void disarm() noexcept;

   private:
    void due() override;
    lease_state& owner_;
    void (*call_)(lease_state&) = nullptr;
  };
  // The renewal and expiry machine, and the one timer its driver arms for it.
  lease_machine& renewal() noexcept { return renewal_; }
  renewal_timer_entry& renewal_timer() noexcept { return renewal_timer_; }
  // The lease in this client's local queues while it holds.
  queue_holder local_hold;
  // An async_wait_lost that waits (finished with the loss, or when the lease stops holding), and
  // one that gave up waiting.
  void wait_for_loss(std::shared_ptr<loss_waiter> waiter);
  void stop_waiting_for_loss(const loss_waiter* waiter);
  std::size_t waiting_for_loss() const noexcept { return lost_waiters_.size(); }

  bool is_held() const noexcept {
    return current_ == phase::held && lock_clock::now() < validity().valid_until();
  }

  // Why the lease ran out, for the loss it is reported as: max_hold reached, the TTL without
  // renewal, or extensions not confirmed in time.
  std::string why_expired() const;
  // Tells the observer, if any, of an outcome (`what`) with `ec`; `held` counts from acquired_at
  // to `hold_ended` (a release's: when it was sent), or to now when that is not given (0 if never
  // held). Inline, so that without an observer the hot path pays one test, not a call.
  void report(void (observer::*what)(const lease_event&), boost::system::error_code ec,
              steady_clock::time_point hold_ended = {}) const {
    if (observer* const watcher = home_->watcher()) report_to(*watcher, what, ec, hold_ended);
  }
  void report_to(observer& watcher, void (observer::*what)(const lease_event&),
                 boost::system::error_code ec, steady_clock::time_point hold_ended) const;
  // The keys an extension uses, quoted, for messages.
  std::string keys() const;
  // What messages call the lease's lock: its resource quoted, or a set's resources.
  std::string subject() const;
  // The resources it holds: a set's, else its one resource.
  std::span<const std::string> held_resources() const noexcept {
    if (kind_ == hold_kind::set) return resources();
    return {&resource_, 1};
  }
  // The names of the local queues it holds in (local_queues::holder_gone): a set's resources, a
  // read-write lock's queue_key, else its resource (a semaphore permit's: its slot key).
  std::span<const std::string> queue_names() const noexcept {
    if (kind_ == hold_kind::set) return resources();
    if (kind_ == hold_kind::reader || kind_ == hold_kind::writer) return {&queue_key(), 1};
    return {&resource_, 1};
  }
  // How its release goes out and who goes next here (local_queues::release_of), decided now.
  local_queues::lease_release release_decision();
  // The keys a release of this lease deletes (the views point into this object).
  hold_keys held() const noexcept {
    return {.kind = kind_,
            .key = resource_,
            .mark = mark_key(),
            .mark_id = mark_id(),
            .message = queue_key(),
            .keys = resources(),
            .slot = resource_slot_ == slot_unknown ? std::nullopt
                                                   : std::optional<std::uint16_t>(resource_slot_)};
  }
  // Not ours any more (release, destruction, client shutdown, loss): the next local waiter starts
  // as `next_waiter` says, which is what this lease's release returned (release_of); without a
  // release, it wakes and tries at once.
  void stop_holding(phase next, boost::system::error_code waiters_get,
                    next_waiter_start next_waiter = {});

 private:
  // sets_key with a name that is not resource_'s own string (a read-write lock's, a set's).
  void sets_other_key(std::string_view key);

  std::shared_ptr<lock_home> home_;
  std::string resource_;
  // The one-byte members side by side: no padding between them.
  hold_kind kind_ = hold_kind::lock;
  // Changed only on the client's executor.
  std::atomic<phase> current_{phase::never_held};
  bool contended_ = false;
  // resource_slot(), or slot_unknown before it is asked for (or after sets_key changed the key).
  static constexpr std::uint16_t slot_unknown = 0xffff;
  mutable std::uint16_t resource_slot_ = slot_unknown;
  // lock_options::local_handoffs, for its release (the other options are its acquire's and its
  // renewal's: acquire_machine, lease_machine).
  unsigned local_handoffs_ = 0;
  // What only some kinds of lease have (a writer's mark, a set's resources, a permit's record),
  // allocated for those alone, and what only some leases have (a diagnostic), allocated when the
  // first one is written: a plain lock held without trouble, the common case, is 240 bytes
  // smaller, which counts when a client holds 100 000 of them. Read and written on the client's
  // executor only (~lease, which may run elsewhere, reads nothing but the phase).
  struct details {
    std::string mark_key;
    std::string mark_id;
    std::string queue_key;
    std::vector<std::string> resources;
    std::string observed_name;
    std::string companion_key;
    std::vector<std::uint64_t> fencing_tokens;
    std::string diagnostics;
  };
  const details& kind_details() const noexcept { return details_ ? *details_ : no_details_; }
  // What a lease without details reads. Constant-initialized, so that reading it tests no guard.
  static const details no_details_;
  details& own_details() {
    if (!details_) details_ = std::make_unique<details>();
    return *details_;
  }
  std::unique_ptr<details> details_;
  std::string token_;
  std::optional<std::uint64_t> fencing_token_;
  steady_clock::time_point acquired_at_{};
  std::atomic<std::size_t> granted_nodes_{0};
  lease_machine renewal_;
  renewal_timer_entry renewal_timer_{*this};
  // Unfinished ones only; room for one inline: a lease usually has one watcher or none, and the
  // inline one saves an allocation per watched lease.
  boost::container::small_vector<std::shared_ptr<loss_waiter>, 1> lost_waiters_;
};

}  // namespace redlock::detail

#endif
