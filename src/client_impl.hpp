#ifndef REDLOCK_CLIENT_IMPL_HPP
#define REDLOCK_CLIENT_IMPL_HPP

#include "algo/node_answer.hpp"
#include "backoff.hpp"
#include "completion.hpp"
#include "intrusive_list.hpp"
#include "log.hpp"
#include "net/connection.hpp"
#include "redlock/client.hpp"
#include "redlock/lease.hpp"
#include "redlock/options.hpp"
#include "release_listener.hpp"
#include "scripts.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace redlock::detail {

using std::chrono::steady_clock;

// Something the client must end when it is destroyed.
class abortable : public list_hook {
 public:
  virtual void abort() = 0;

 protected:
  ~abortable() = default;
};

class acquire_op;
class user_operation;

// Per resource: the lease of this client holding it (if any) and the acquires waiting, oldest
// first. Only the first waiter sends anything to the nodes, and only while no local lease holds
// the resource.
//
// Hand-off: when the holder releases while others wait, the first waiter's SET normally follows
// the release in the same write (the release announces nothing). After
// lock_options::local_handoffs of those in a row the release is announced instead, and the first
// waiter competes: it waits for the announcement like waiters in other processes, or for the
// release's own answer where the key was already gone (client_impl::release_of decides,
// holder_gone carries it out). "In a row" counts the releases of this resource's holders while
// someone waited: a release with nobody waiting starts the count again.
//
// A semaphore's queue (keyed by its slot keys' common prefix, see permit_queue_key) differs in
// one way: leases of this client that hold some of its slots do not block the first waiter, which
// only skips those slots; a release of one wakes it at once (its SET follows our DEL on every
// node). Its releases always announce themselves: no hand-off is counted.
struct resource_queue {
  lease_state* holder = nullptr;
  bool semaphore = false;
  std::vector<lease_state*> slot_holders;  // semaphore: by slot, null where none of ours holds it
  std::vector<std::shared_ptr<acquire_op>> waiters;  // short; a deque would allocate when empty
  unsigned handoffs_in_a_row = 0;
  // Set by release_of for the holder_gone that follows: the first waiter competes, and the
  // released key is gone by `released_key_gone_by` at the latest.
  bool next_competes = false;
  steady_clock::time_point released_key_gone_by{};

  bool idle() const noexcept {
    return holder == nullptr && waiters.empty() &&
           std::all_of(slot_holders.begin(), slot_holders.end(),
                       [](const lease_state* held) { return held == nullptr; });
  }
};

// Everything behind a redlock::lease. Lives on the client's executor.
//
// Validity under extensions. On every node, requests run in the order they were issued on its one
// connection (a NOSCRIPT answer to an extension is final, never resent behind later requests), so
// the key's expiry there is set by the last extension that ran, and a reply that never came may
// still mean the extension ran. Hence:
//  - when an extension is sent at `start` with `ttl`, valid_until drops at once to at most
//    start + ttl - drift (its cap), whatever its answer will be;
//  - only a quorum confirmation that arrives while the lease is still valid raises it again, to
//    the smallest cap among the confirmed extension and every one sent after it: those may still
//    run after it on any node of that quorum. Extensions sent before it ran before it there.
// Across a reconnect the order rests on the server having read the broken link's last commands
// before the new link's first (written only after a handshake round trip). Renewal never sends
// less than an earlier extension may give the key, so a late old command could only matter for
// a user's shortening async_extend sent right before a link broke.
struct lease_state : list_hook, std::enable_shared_from_this<lease_state> {
  enum class phase : std::uint8_t { never_held, held, released, lost };

  // An extension that was sent and may still run on some node, newest last.
  struct sent_extension {
    std::uint64_t id;
    steady_clock::time_point cap;  // start + ttl - drift: the key lives at least this long
  };

  lease_state(std::shared_ptr<client_impl> owner, std::string resource,
              const lock_options& options);
  ~lease_state();

  std::shared_ptr<client_impl> client;
  std::string resource;
  std::string token;
  // A key that must live at least as long as the lock key, extended with it (extend_script's
  // second key); empty for most locks. A semaphore permit's: the semaphore's permits record.
  std::string companion_key;
  // With lock_options::fencing, set by the acquire before the lease is handed out; then fixed.
  std::optional<std::uint64_t> fencing_token;
  lock_options options;
  // Changed only on the client's executor, read anywhere: ~lease may run on any thread. Once not
  // held it never is again (never_held -> held -> released | lost), so a reader that sees
  // anything but `held` may rely on it without a hop to the executor.
  std::atomic<phase> current{phase::never_held};
  steady_clock::time_point acquired_at{};
  steady_clock::time_point valid_until{};
  // Extensions sent since the newest confirmed one; see above.
  std::vector<sent_extension> unconfirmed_extensions;
  std::uint64_t extensions_sent = 0;
  // The longest TTL any request of this lease gave the key: how long a cleanup can matter.
  std::chrono::milliseconds longest_ttl{0};
  resource_queue* queue = nullptr;  // while held: this resource's local queue
  std::string diagnostics;
  // Nodes that granted the acquire: the quorum that decided it, then every later grant as its
  // reply arrives.
  std::atomic<std::size_t> granted_nodes{0};

  // One timer serves renewal and expiry: it is armed for min(next_renewal, valid_until), so a loss
  // is reported on time also while an extension is in flight or after max_hold stopped renewal.
  // The generation tells a stale expiry (queued before a re-arm) from the current one.
  boost::asio::steady_timer timer;
  unsigned timer_generation = 0;
  steady_clock::time_point next_renewal = steady_clock::time_point::max();  // max: none due
  bool renewal_in_flight = false;
  bool renewal_stopped_by_max_hold = false;
  std::vector<std::shared_ptr<user_operation>> lost_waiters;  // unfinished ones only

  bool is_held() const noexcept {
    return current == phase::held && steady_clock::now() < valid_until;
  }

  // Became held through a successful round that started at `round_start`.
  void on_acquired(steady_clock::time_point round_start, steady_clock::time_point until);
  void arm_timer();
  void on_timer();
  // Why the lease ran out, for the loss it is reported as: max_hold reached, the TTL without
  // renewal, or extensions not confirmed in time.
  std::string why_expired() const;
  // The keys an extension uses, quoted, for messages.
  std::string keys() const;
  // When the next renewal is due for the validity claimed now: once less than half a TTL is left.
  void schedule_renewal();
  void renew();
  // The lock cannot be kept: clean up the nodes, tell waiters, free the resource locally.
  void lose(std::string why);
  // Not ours any more by our own choice (release, destruction, client shutdown).
  void stop_holding(phase next, boost::system::error_code waiters_get);
  // Sends an extension and lowers the validity to its cap; `caller` (null for renewal) gets the
  // outcome.
  void start_extend(std::chrono::milliseconds ttl, bool from_renewal,
                    std::shared_ptr<user_operation> caller);
  // The extension `id` was confirmed by a quorum at `now`. Returns false if that came too late.
  bool confirm_extension(std::uint64_t id, steady_clock::time_point now);
  // Token-checked DEL on every node (or those in `only`), nobody waiting for it, announced unless
  // it hands the resource to a local waiter (client_impl::release_of).
  void release_on_nodes(const std::vector<bool>* only = nullptr);
};

class client_impl : public std::enable_shared_from_this<client_impl> {
 public:
  client_impl(boost::asio::any_io_executor executor, std::vector<node_config> nodes,
              client_options options);

  const boost::asio::any_io_executor& executor() const noexcept { return executor_; }
  std::size_t size() const noexcept { return connections_.size(); }
  std::size_t quorum() const noexcept { return connections_.size() / 2 + 1; }
  const client_options& options() const noexcept { return options_; }
  bool closed() const noexcept { return closed_; }
  const node_config& node(std::size_t i) const noexcept { return connections_[i]->node(); }
  const connection& connection_at(std::size_t i) const noexcept { return *connections_[i]; }
  connection& connection_at(std::size_t i) noexcept { return *connections_[i]; }

  // Ends the client: operations under way complete with operation_aborted and later ones fail
  // with it, held leases are released, and the connections close once those releases are out.
  // Without `waiter` (the destructor) the releases are best effort; with one (async_shutdown) they
  // are the token-checked release operation, and `waiter` completes once all have answered, with
  // the first failure. A waiter that comes while a shutdown is under way shares its outcome.
  void shutdown(std::shared_ptr<user_operation> waiter = nullptr);

  static lease make_lease(std::shared_ptr<lease_state> state);

  // The kinds of request a lock operation sends, each with its own rules on the connections:
  //  - set, extend, ping: skipped (failed at once, unsent) on a node that has let a request time
  //    out and not answered it since (connection::unresponsive): a stopped, stalled or much delayed
  //    node. A round that cannot win without such a node is then decided in one round trip and
  //    frees the keys it took on the others, instead of holding them for node_timeout while rival
  //    rounds split the remaining votes.
  //  - extend: a NOSCRIPT answer is final (the node did not extend), never resent behind requests
  //    written after it: that could run a shorter extension after a longer, later one.
  //  - release: always sent, in order behind every SET it may have to undo; written also after its
  //    deadline, and kept for a node that is down until its next handshake (for at most the key's
  //    longest lifetime, given as `key_lifetime`), so that a broken link does not leave the key.
  enum class lock_request : std::uint8_t {
    set,
    set_asking_ttl,
    fenced_set,
    slot_set,
    fence_write_back,
    extend,
    release,
    ping
  };

  request_options options_for(lock_request kind,
                              std::chrono::milliseconds key_lifetime = {}) const noexcept;

  // Sends one request to every node (or those marked in `only`), each with node_timeout;
  // sink.on_reply(first_tag + node, ec, reply) is called once per node, on the client's executor.
  // `payload` (one encoded command) must be owned by the sink or outlive it.
  void fan_out(std::string_view payload, reply_sink& sink, std::size_t first_tag,
               const request_options& per_node, const std::vector<bool>* only = nullptr);
  // The same with bytes the requests keep alive themselves.
  void fan_out(const shared_payload& payload, reply_sink& sink, std::size_t first_tag,
               const request_options& per_node, const std::vector<bool>* only = nullptr);

  // The channel a release of `key` announces itself on (client_options::release_channel): empty
  // when nothing is announced.
  //  - Releases of failed rounds and cancelled acquires announce: their keys may be what blocked
  //    a rival's round (see release_watch for why that cannot make two losers wake each other).
  //  - A lease's release asks release_of.
  std::string_view release_channel() const noexcept { return options_.release_channel; }

  // How a held lease's release goes out, decided right before it is sent (see resource_queue).
  struct lease_release {
    // Where it announces itself: empty when it hands the resource to the next local waiter, whose
    // SET follows it on every node; else release_channel().
    std::string_view channel;
    // The next local waiter competes for the resource (compete()): each node's answer to the
    // release that shows our key gone there (deleted, or found no longer ours) is passed to that
    // waiter as an announcement would be (key_gone_on_node). A release that finds the key already
    // gone (a lost lease) deletes and announces nothing, and must not leave it asleep until the
    // key's TTL.
    bool next_waiter_competes = false;
  };
  lease_release release_of(lease_state& state);

  // The holder's key of lock `resource` is gone from `node`: tells the first waiter of its queue,
  // as an announcement from that node would.
  void key_gone_on_node(std::size_t node, const std::string& resource);

  // The extend script's call (token, ttl) for `key` and its `companion` key (empty: none; see
  // lease_state::companion_key), encoded into `payload`, on every node.
  void fan_out_extend(std::string_view key, std::string_view companion, std::string_view token,
                      std::chrono::milliseconds ttl, std::string& payload, reply_sink& sink,
                      std::size_t first_tag);
  // The release script's call (token, channel) for `key` on every node (or those in `only`),
  // encoded into `payload`, which the sink owns. `channel`: where a deletion is announced (empty:
  // nowhere).
  void fan_out_release(std::string_view key, std::string_view token, std::string_view channel,
                       std::chrono::milliseconds key_lifetime, std::string& payload,
                       reply_sink& sink, std::size_t first_tag);

  // Token-checked DEL on the chosen nodes; nobody waits for it. Requests on each node's connection
  // run in order, so a release queued after a SET on that connection executes after it.
  // `key_lifetime`: the longest TTL the key may have been given (see lock_request::release).
  // With `report_gone_keys`, the answers are passed to key_gone_on_node (lease_release).
  void release_best_effort(const std::string& resource, const std::string& token,
                           std::string_view channel, std::chrono::milliseconds key_lifetime,
                           const std::vector<bool>* only = nullptr, bool report_gone_keys = false);

  // Release announcements (client_options::release_channel), for acquires that wait. Null when
  // announcements are off. Created on first use.
  release_listener* listener();
  // How long one round took lately (a moving average), and a random delay of up to that long,
  // halved for every competition the waiter has lost: how long a waiter woken by an announcement
  // waits before its round, so that the waiters of all processes woken by one release do not all
  // send at the same instant, none has a head start, and one that keeps losing comes first.
  void note_round_trip(steady_clock::duration took) noexcept;
  steady_clock::duration wake_jitter(unsigned competitions_lost);
  // One round trip (as wake_jitter measures it) doubled `doublings` times: the window of a
  // waiter's collision backoff (acquire_op::wake_after_news_heard_in_round).
  steady_clock::duration collision_window(unsigned doublings) const noexcept;
  // The moving average of note_round_trip, kept between 50 us and 20 ms: the unit of both.
  steady_clock::duration bounded_round_trip() const noexcept;

  // Local queueing of acquires, see resource_queue. A queue stays at its address until it is
  // forgotten, which happens only once it has neither holder nor waiters.
  resource_queue* find_queue(const std::string& resource);
  // The queue with waiters that a release of `resource` concerns: the lock's own, or for a
  // semaphore's slot key the semaphore's; null when nobody here waits for it.
  resource_queue* queue_waiting_for(std::string_view resource);
  resource_queue& queue_for(const std::string& resource);
  void holder_gone(lease_state& state);
  // A semaphore's lease of this client ended: free its slot, wake the first waiter.
  void permit_holder_gone(resource_queue& queue, lease_state& state);
  void start_next_waiter(resource_queue& queue);
  void forget_queue_if_idle(const std::string& resource);

  void track(abortable* op) { active_.push(*op); }
  void untrack(abortable* op) { op->unlink(); }
  void track_lease(lease_state* state) { held_.push(*state); }
  void untrack_lease(lease_state* state) { state->unlink(); }

  std::minstd_rand& random() noexcept { return random_; }

  // "127.0.0.1:7001 granted; 127.0.0.1:7002 held by another owner; ..." for diagnostics. A node
  // still pending reads "not awaited", or "failing (text)" with a non-empty text in
  // `pending_texts`. `keys` (quoted_keys) are the request's keys, named with the node's ACL user
  // where a node refused them (NOPERM).
  std::string describe(const node_answers& answers, std::string_view yes, std::string_view no,
                       const std::vector<std::string>* pending_texts = nullptr,
                       std::string_view keys = {}) const;

  void log(log_level level, std::string_view message) const {
    call_logger(options_.logger, executor_, level, message);
  }

  // For tests: the state behind a lease.
  static const std::shared_ptr<lease_state>& state_of(const lease& handle) noexcept;

  // Why no acquire can be trusted with these nodes, once two of them turned out to reach one
  // server ("localhost:7700 and 127.0.0.1:7700 are one server ..."); empty until then.
  const std::string& duplicate_nodes() const noexcept { return peers_->refusal; }

 private:
  // The peer each node's connection reached last, by node: two nodes that reach one server would
  // count that server's vote twice. Shared with the connections' admit_peer checks, which may
  // outlive the client while they drain.
  struct peer_registry {
    std::vector<std::string> addresses;  // node_config::address(), for messages
    std::vector<std::string> peers;      // empty until the node has connected
    std::string refusal;                 // the first duplicate found
    std::string admit(std::size_t node, const std::string& peer);
  };

  static std::vector<std::shared_ptr<connection>> open_connections(
      const boost::asio::any_io_executor& executor, std::vector<node_config>& nodes,
      const client_options& options, const std::shared_ptr<peer_registry>& peers);

  boost::asio::any_io_executor executor_;
  client_options options_;
  std::shared_ptr<peer_registry> peers_;
  std::vector<std::shared_ptr<connection>> connections_;
  std::unordered_map<std::string, resource_queue> queues_;
  // Map nodes of forgotten queues, reused with their key and vector storage: nearly every acquire
  // makes a queue and its release forgets it again.
  std::vector<std::unordered_map<std::string, resource_queue>::node_type> spare_queues_;
  // The releases async_shutdown waits for, owned by those releases' handlers only: its waiters
  // own the client, so a client that owned it too would never be freed if the io_context stopped
  // before the nodes answered.
  struct shutdown_progress {
    std::weak_ptr<client_impl> client;
    std::size_t releases_pending = 0;
    boost::system::error_code outcome;  // the first failure
    std::vector<std::shared_ptr<user_operation>> waiters;
    void release_answered(boost::system::error_code ec);
    void finish_waiters();
  };

  void on_release_announced(std::size_t node, std::string_view resource);
  void on_subscription_changed(std::size_t node, bool subscribed);

  std::shared_ptr<release_listener> listener_;
  steady_clock::duration round_trip_ = std::chrono::milliseconds(1);  // a guess until measured
  bool round_trip_known_ = false;

  intrusive_list active_;  // of abortable
  intrusive_list held_;    // of lease_state
  std::minstd_rand random_;
  bool closed_ = false;
  std::weak_ptr<shutdown_progress> shutdown_in_progress_;
  boost::system::error_code shutdown_outcome_;  // of the finished async_shutdown
};

}  // namespace redlock::detail

#endif
