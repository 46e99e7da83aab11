#ifndef REDLOCK_NET_MULTIPLEXER_HPP
#define REDLOCK_NET_MULTIPLEXER_HPP

#include "completion.hpp"
#include "net/reply_sink.hpp"
#include "net/write_buffer.hpp"
#include "resp/value.hpp"

#include <boost/asio/cancellation_type.hpp>
#include <boost/intrusive/list.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redlock::detail {

class script;

// One encoded command, shareable: a fan-out sends the same bytes to every node.
using shared_payload = std::shared_ptr<const std::string>;

struct request_options {
  // The request fails with error::request_timeout when its reply has not arrived this long after
  // it was issued (waiting for a connect counts). Zero: no deadline of its own.
  std::chrono::milliseconds timeout{0};

  // Set when the payload is an EVALSHA of this script (which must outlive the request). A NOSCRIPT
  // reply (the script cache was flushed) means the call did not run. By default the connection
  // then resends it as EVAL with the full source, ahead of every request not yet written (and
  // behind earlier resends), so that it keeps its place among them; requests written after it
  // and before the NOSCRIPT came back have run already, whatever they were.
  const script* eval_fallback = nullptr;

  // Fail at once, unsent, with error::node_unresponsive while the node is unresponsive (see
  // connection::unresponsive). For requests that would only wait out their deadline behind the
  // silence: a new round's SET, an extension, a PING. Never for a release, which must follow on
  // the wire every SET it may have to undo.
  bool skip_if_unresponsive = false;

  // With eval_fallback: a NOSCRIPT reply is the request's answer instead of being resent. For a
  // call whose order against later requests matters more than its success (an extension: one run
  // behind a later extension of the same key would shorten it behind the client's back). The
  // connection loads the script again at once, ahead of every request not yet written.
  bool noscript_is_final = false;

  // Zero: an ordinary request. Positive: a cleanup (a token-checked release) that must reach the
  // node even when nobody waits for it any more. Its caller or sink still gets one outcome as
  // usual (a timeout, a failure while the node is down), but the request itself is written after
  // its deadline, and when the node is down, or the link breaks before its reply, it is kept and
  // sent again right after the next handshake, before anything issued later. It is dropped unsent
  // once this long has passed since the node first failed it (its key has expired by then), when
  // the connection is closed, or beyond connection_options::max_pending_cleanups.
  std::chrono::milliseconds deliver_for{0};

  // The command's confirmation is a RESP3 push, not a reply: SSUBSCRIBE or SUBSCRIBE of one
  // channel on a RESP3 connection (connection_options::resp3). That push answers the request
  // when the request is the oldest one in flight; an error reply (MOVED, NOPERM) answers it as any
  // reply would. Only for commands the server confirms exactly once and never unprompted: an
  // unsubscribe can be pushed by the server itself (a shard channel's slot moved away), so it
  // must not be sent this way.
  bool reply_is_push = false;

  // For a write that node_config::wait_replicas follows with WAIT: whether its reply is one that
  // counts only once replicated (a grant, an extension, a write-back). Any other reply (a refusal)
  // is the node's answer as it came, whatever WAIT says: it granted nothing that a failover could
  // lose, and what it tells (the holder's PTTL, a mark it set) must reach the operation. Null:
  // every reply that is not an error counts only once replicated. Read by the lock nodes, never
  // by the connection.
  bool (*counts_once_replicated)(const resp::value& reply) = nullptr;
};

// Counters for tests and benchmarks. `writes` counts socket writes, so `requests_written / writes`
// is how many requests the automatic pipelining coalesced per write on average.
struct connection_stats {
  std::uint64_t connects = 0;
  std::uint64_t writes = 0;
  std::uint64_t requests_written = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t replies = 0;
  std::uint64_t replies_dropped = 0;       // replies of requests that were cancelled or timed out
  std::uint64_t skipped_unresponsive = 0;  // failed unsent: request_options::skip_if_unresponsive
  std::uint64_t cleanups_kept = 0;         // cleanups kept for a later connection (deliver_for)
  std::uint64_t cleanups_dropped = 0;      // kept cleanups dropped: expired or over the bound
  std::uint64_t scripts_reloaded = 0;      // SCRIPT LOADs after a NOSCRIPT (noscript_is_final)
};

// The requests of one node's connection and every decision about them, with no socket, timer or
// coroutine: which bytes go out next and in what order, which request a reply belongs to, when a
// request times out, what survives a broken link, and when the node counts as unresponsive. The
// connection does the I/O, reads the clock and tells it what happened (a reply was parsed, the
// link broke, a handshake finished); it gives callers and sinks their outcomes through `answer`.
//
// One multiplexer belongs to one executor; nothing in it is thread-safe.
class multiplexer {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;

  class request_pool;
  struct request;

  // Sole ownership of a pooled request, handed from one place to the next: the issuer, then the
  // multiplexer's list of queued, in-flight or kept requests (which hold their members by
  // intrusive links and own them), then whoever takes it out to answer or drop it. Dropping the
  // owner returns the request to the pool. The cancellation handler of a caller's request holds
  // its id instead.
  class request_ptr {
   public:
    request_ptr() noexcept = default;
    explicit request_ptr(request* req) noexcept : req_(req) {}
    request_ptr(request_ptr&& other) noexcept : req_(std::exchange(other.req_, nullptr)) {}
    request_ptr& operator=(request_ptr&& other) noexcept {
      reset(std::exchange(other.req_, nullptr));
      return *this;
    }
    request_ptr(const request_ptr&) = delete;
    request_ptr& operator=(const request_ptr&) = delete;
    ~request_ptr() { reset(); }

    request* get() const noexcept { return req_; }
    request* operator->() const noexcept { return req_; }
    request& operator*() const noexcept { return *req_; }
    // Gives up ownership, to a list that holds the request from now on.
    request& release() noexcept { return *std::exchange(req_, nullptr); }
    // Inline: most owners are empty by the time they go (moved along), and must cost nothing.
    void reset(request* req = nullptr) noexcept {
      if (auto* old = std::exchange(req_, req)) to_pool(old);
    }

   private:
    [[gnu::noinline]] static void to_pool(request* req) noexcept;
    request* req_ = nullptr;
  };

  // A request is linked into at most one of the lists of queued, in-flight or kept requests (its
  // owner), and, while it waits with a deadline and has not been answered, into the deadline list
  // too (which owns nothing; the link goes when the request is answered or pooled).
  struct queue_tag;
  struct deadline_tag;
  using queue_hook =
      boost::intrusive::list_base_hook<boost::intrusive::tag<queue_tag>,
                                       boost::intrusive::link_mode<boost::intrusive::safe_link>>;
  using deadline_hook =
      boost::intrusive::list_base_hook<boost::intrusive::tag<deadline_tag>,
                                       boost::intrusive::link_mode<boost::intrusive::auto_unlink>>;

  struct request : queue_hook, deadline_hook {
    explicit request(request_pool& owner) noexcept : pool(&owner) {}

    // Filled by whoever issues the request (the connection).
    //
    // The encoded command. `owned` keeps a caller's bytes alive; a library request's bytes belong
    // to its sink, which the request keeps alive until it is answered. Dropped once nothing can
    // need them any more (written and not to be resent).
    std::string_view payload;
    shared_payload owned;
    std::optional<completion<boost::system::error_code, resp::value>> caller;  // a caller's, or
    sink_ref sink;  // one of the library's own
    std::size_t tag = 0;

    void own(shared_payload bytes) {
      owned = std::move(bytes);
      payload = *owned;
    }

    // The multiplexer's own bookkeeping.
    request_pool* pool;
    request* next_spare = nullptr;  // the next idle request while this one is in the pool
    std::uint64_t id = 0;  // unique per multiplexer; a caller's cancellation handler finds it by id
    const script* eval_fallback = nullptr;
    bool noscript_is_final = false;
    time_point deadline = time_point::max();
    std::chrono::milliseconds timeout{0};
    // Queued (in queued_ or kept_cleanups_) until written, then in in_flight_ until its reply.
    bool written = false;
    // Its caller or sink has had its one outcome; a reply that still comes is read and dropped.
    bool answered = false;
    // Resent as EVAL after NOSCRIPT: the call has not run yet, and runs even if nobody waits.
    bool resent = false;
    // request_options::deliver_for; keep_until is set when a link first fails the cleanup.
    std::chrono::milliseconds deliver_for{0};
    time_point keep_until = time_point::max();
    // Timed out after it was written; counted in timed_out_in_flight_ until its reply.
    bool awaited_past_deadline = false;
    time_point written_at{};
    // The multiplexer's own SCRIPT LOAD of this script after a NOSCRIPT: no caller, no sink.
    const script* reloads = nullptr;
    bool reply_is_push = false;  // request_options::reply_is_push

    bool cleanup() const noexcept { return deliver_for > std::chrono::milliseconds(0); }
    // Whether the writer still sends it.
    bool wanted() const noexcept { return !answered || cleanup() || resent; }
    // Whether its bytes may be sent again once written: after NOSCRIPT, or after a broken link.
    bool may_resend() const noexcept {
      return cleanup() || (eval_fallback != nullptr && !noscript_is_final);
    }
  };

  // How an outcome reaches its caller or sink. A caller's handler is always posted; a sink is run
  // inline (dispatch) or posted: posted from an initiating function or a cancellation handler,
  // and whenever a link fails (which happens inside the connection's loops).
  enum class delivery { post, dispatch };
  // Gives the request's caller or sink (never both, never neither) its one outcome. A caller gets
  // `reply` moved into it; a sink only reads it. A sink run inline may call back into the
  // multiplexer (issue requests, close the connection): it is called with every container in a
  // consistent state. A node's reply that is not an error, to a sink's request, the multiplexer
  // hands to the sink itself (consume_reply); everything else (a caller's, a failure, an error
  // reply the issuer may have to look at) goes through answer_fn.
  using answer_fn = std::function<void(request& req, boost::system::error_code ec,
                                       resp::value&& reply, delivery how)>;
  using warn_fn = std::function<void(std::string_view message)>;

  // `name` ("host:port") starts every failure text; beyond `max_pending_cleanups` kept cleanups
  // the oldest are dropped, and `warn` is told now and then.
  multiplexer(std::string name, std::size_t max_pending_cleanups, answer_fn answer, warn_fn warn);
  ~multiplexer();

  multiplexer(const multiplexer&) = delete;
  multiplexer& operator=(const multiplexer&) = delete;

  // A fresh request with a unique id, for the issuer to fill (payload, caller or sink, tag) and
  // pass to add() or fail_unsent().
  request_ptr make_request();
  // One of the library's own requests, answered through `sink` under `tag`: with bytes it keeps
  // alive by itself, or with `borrowed` bytes of the sink's, which it copies only if it must
  // outlive its answer (a cleanup answered before it was delivered).
  request_ptr make_request(shared_payload payload, reply_sink& sink, std::size_t tag);
  request_ptr make_request(std::string_view borrowed, reply_sink& sink, std::size_t tag);

  // Issues a request on a link that is up or being opened: queued behind everything issued
  // earlier, with its deadline counted from `now`; or failed unsent at once (posted) when it may
  // be skipped and the node is unresponsive (then false).
  bool add(request_ptr req, const request_options& options, time_point now);

  // Fails a request unsent (posted), as the connection can take none now: the node is down, or
  // the connection closed. While the node is down a cleanup is kept for the next handshake; once
  // closed, nothing is kept.
  [[gnu::noinline]] void fail_unsent(request_ptr req, const request_options& options,
                                     boost::system::error_code ec, std::string_view why,
                                     time_point now);
  // fail_unsent while the node is down between connect attempts. The code tells the caller whether
  // waiting can help: `permanent_failure` when the last connect failed in a way that retrying will
  // not fix (connection::permanent_failure), else error::not_connected. The text carries the last
  // failure's cause (`last_cause`, without the node's name) either way.
  [[gnu::noinline]] void fail_while_down(request_ptr req, const request_options& options,
                                         boost::system::error_code permanent_failure,
                                         std::string_view last_cause, time_point now);

  // The caller of request `id` cancelled it (from its cancellation slot; answers are posted).
  void cancel(std::uint64_t id, boost::asio::cancellation_type type);

  // Every queued request that is still to be written, in order, into `out` (cleared first); they
  // count as written (in flight) from now on. Returns how many; zero: nothing to write.
  std::size_t prepare_write(write_buffer& out, time_point now);
  // The bytes of the last prepare_write are on the wire. A failed write needs no call: its
  // requests are in flight and fail with the link (on_connection_lost).
  void commit_write(std::size_t requests, std::size_t bytes) noexcept;
  // Whether a prepare_write would find queued requests (possibly only ones it skips).
  bool write_pending() const noexcept { return !queued_.empty(); }

  // A parsed reply: it belongs to the oldest written request (a RESP3 push belongs to none and is
  // ignored, unless it confirms a request_options::reply_is_push request: takes_push). False:
  // there is no such request (an unsolicited reply, a protocol error; `reply` is left as it was).
  bool consume_reply(resp::value& reply);
  // Whether `push` is the confirmation of the oldest request in flight (request_options::
  // reply_is_push): a subscribe confirmation, which the server sends for nothing else.
  bool takes_push(const resp::value& push) const noexcept;

  // Times out every unanswered request whose deadline is at or before `now`, earliest first
  // (answers dispatched), whatever the link is doing: a request queued behind a connect attempt
  // fails at its own deadline, not at the connect's. `connect_stage` says what a connect under way
  // is doing, with what that may mean ("performing the TLS handshake (no TLS answer: ...)"): the
  // text of every request it holds up, and of those skipped behind them (add), carries it.
  void expire_deadlines(time_point now, std::string_view connect_stage);
  // The earliest deadline of an unanswered request; time_point::max() when there is none. A timer
  // armed no later than this, and re-armed after each expire_deadlines and add, fires no deadline
  // late.
  time_point next_deadline() const noexcept {
    return deadlines_.empty() ? time_point::max() : deadlines_.front().deadline;
  }

  // Lifecycle of the link, as the connection sees it.
  void on_connect_started() noexcept;
  void on_handshake_done(time_point now);
  // The link broke or a connect failed: everything queued or in flight fails with `ec` (posted),
  // and cleanups are kept for the next link.
  void on_connection_lost(boost::system::error_code ec, std::string_view why, time_point now);
  // Closed for good: everything fails with `ec` (posted) and kept cleanups are dropped.
  void close(boost::system::error_code ec, std::string_view why, time_point now);
  // Closed for good without answering anyone: the connection's loop is gone.
  void drop_all() noexcept;

  // A request has waited out its deadline and the node has not answered it yet: a written request
  // whose reply has not arrived, or one queued behind a connect attempt that is still under way.
  // It ends when those replies arrive (the requests in flight are the probe; nothing extra is
  // sent) or the link is reset.
  //
  // Judged when deadlines expire, not by the age of the oldest request when a new one is issued:
  // the reactor reads ready sockets before it runs expired timers, so a reply that has arrived is
  // seen first even by a starved process, which would otherwise blame a node it had simply not
  // read yet.
  bool unresponsive() const noexcept {
    return timed_out_in_flight_ > 0 || (connecting_ && timed_out_while_connecting_);
  }

  // The oldest written request has waited more than `limit` for a reply, and nothing at all was
  // read for that long either (`last_read`): the server hung or stopped.
  bool reply_overdue(time_point last_read, std::chrono::milliseconds limit,
                     time_point now) const noexcept;

  // No request queued, in flight or kept.
  bool idle() const noexcept {
    return queued_.empty() && in_flight_.empty() && kept_cleanups_.empty();
  }
  // At shutdown (connection::close_when_idle): whether the requests still queued, in flight or
  // kept are worth waiting for before the link is closed. Not when there are none; nor when no
  // request was ever written on any link to this node (it never completed a handshake, say):
  // then nothing we sent has run there, no key there is ours for a kept cleanup to delete, and
  // whatever is left may fail unsent at once; nor, while the link is down (`link_down`: waiting
  // to reconnect), when no cleanup is kept: only a kept cleanup is delivered by a reconnect, and
  // every other request fails as it is.
  bool worth_draining(bool link_down) const noexcept {
    return ever_written_ && !idle() && (!link_down || has_kept_cleanups());
  }
  bool has_kept_cleanups() const noexcept { return !kept_cleanups_.empty(); }
  const connection_stats& stats() const noexcept { return stats_; }

 private:
  // add() fails `req` unsent: it may be skipped, and the node is unresponsive. Out of line, as
  // are the other failures: add() is inlined into the path of every request.
  [[gnu::noinline]] void skip_unresponsive(request& req);
  // consume_reply for every reply but the commonest kind.
  [[gnu::noinline]] bool consume_any_reply(resp::value& reply);
  void apply(request& req, const request_options& options) const noexcept;
  void track_deadline(request& req);
  void answer(request& req, boost::system::error_code ec, resp::value&& reply, delivery how);
  [[gnu::noinline]] void answer_failure(request& req, boost::system::error_code ec,
                                        std::string_view why, delivery how);
  // The link is gone: every request still queued or in flight gets `ec` (posted: this runs inside
  // the loops); with `keep_cleanups`, cleanups are kept for the next link, else dropped.
  void fail_all(boost::system::error_code ec, std::string_view why, bool keep_cleanups,
                time_point now);
  [[gnu::noinline]] void keep_cleanup(request_ptr req, time_point now);
  void requeue_kept_cleanups(time_point now);
  // Queues `req` ahead of every request not yet written, behind earlier ones queued this way.
  void queue_ahead(request_ptr req);
  [[gnu::noinline]] void reload_script(const script& lua);

  using request_list = boost::intrusive::list<request, boost::intrusive::base_hook<queue_hook>>;
  using deadline_list = boost::intrusive::list<request, boost::intrusive::base_hook<deadline_hook>,
                                               boost::intrusive::constant_time_size<false>>;
  // Takes the first request out of `list`, with its ownership.
  static request_ptr take_front(request_list& list) noexcept;
  // Returns every request of `list` to the pool, last first, unanswered.
  static void drop_list(request_list& list) noexcept;

  std::string name_;
  std::size_t max_pending_cleanups_;
  answer_fn answer_;
  warn_fn warn_;

  // Declared before every container of requests, so that it outlives them.
  std::unique_ptr<request_pool> pool_;

  // Requests not yet written, in the order they are to be written. One answered here (cancelled,
  // timed out) stays until the writer skips it; a cleanup is written anyway. The first
  // `queued_ahead_` were put there by queue_ahead().
  request_list queued_;
  std::size_t queued_ahead_ = 0;
  // Requests written and waiting for their reply, oldest first. Every reply belongs to the front
  // one, even if that one was already answered (then the reply is dropped).
  request_list in_flight_;
  // Cleanups failed by a broken link or issued while the node was down, oldest first: written
  // right after the next handshake, before anything else.
  request_list kept_cleanups_;
  // Unanswered requests with a deadline, earliest first: a request leaves it when it is answered,
  // so the front is always one still waiting.
  deadline_list deadlines_;
  // Scripts whose SCRIPT LOAD (after a NOSCRIPT) is queued or in flight on this link.
  std::vector<const script*> reloading_;

  std::size_t timed_out_in_flight_ = 0;      // written, timed out, reply not read yet
  bool connecting_ = false;                  // a connect attempt is under way
  bool timed_out_while_connecting_ = false;  // in this connect attempt
  std::string stalled_while_;                // ... and what the attempt was doing then
  bool ever_written_ = false;                // a request went out on some link (prepare_write)
  bool closed_ = false;
  std::uint64_t last_request_id_ = 0;
  connection_stats stats_;
};

}  // namespace redlock::detail

#endif
