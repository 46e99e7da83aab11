#ifndef REDLOCK_NET_CONNECTION_HPP
#define REDLOCK_NET_CONNECTION_HPP

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include "algo/backoff.hpp"
#include "net/transport.hpp"
#include "redlock/node_config.hpp"
#include "redlock/options.hpp"
#include "resp/parser.hpp"
#include "resp/value.hpp"

namespace redlock::detail {

class script;

struct connection_options {
  std::chrono::milliseconds connect_timeout{1000};
  retry_policy reconnect{std::chrono::milliseconds(50), std::chrono::milliseconds(2000), 2.0};
  std::chrono::milliseconds health_check_timeout{5000};
  std::string client_name = "redlock-asio";
  redlock::logger logger;
  resp::parser_limits limits;
  // Loaded with SCRIPT LOAD during every handshake, so that an EVALSHA of one of them meets
  // NOSCRIPT only after a SCRIPT FLUSH. Each must outlive the connection.
  std::vector<const script*> preload;
  // Cleanups (request_options::deliver_for) kept for a node that is down; the oldest are dropped
  // beyond this many.
  std::size_t max_pending_cleanups = 8192;
  // Encoded commands sent after the preloads in every handshake to learn whether the ACL user may
  // run what the lock needs. Each must be harmless (touch no existing key). An error reply fails
  // the connect: NOPERM for the command as error::permission_denied, naming the probe's command
  // (its first word); NOPERM for a key is accepted, since key patterns depend on the resource and
  // each lock request meets them itself.
  struct probe {
    std::string command;  // for messages: "EVALSHA"
    std::string encoded;
  };
  std::vector<probe> permission_probes;
  // Asked after every TCP connect, with the peer's address ("127.0.0.1:6379"; every loopback
  // address reads "loopback"): a non-empty answer refuses the connect with
  // error::invalid_argument and that text. How a client refuses two nodes that are one server.
  std::function<std::string(const std::string& peer)> admit_peer;

  static connection_options from(const client_options& options);
};

// The parser's limits that enforce a client's reply_limits.
resp::parser_limits limits_for(const reply_limits& replies);

// Receives the replies of the library's own requests (connection::exec_direct), told apart by a
// tag: one object per fan-out instead of a type-erased handler per request.
//
// Every request holds a reference (retain/release) from the moment it is issued until its one
// on_reply has returned, so a sink lives at least as long as a request may still answer it. The
// count is not atomic: a sink and the connections that answer it share one executor.
class reply_sink {
 public:
  virtual void on_reply(std::size_t tag, boost::system::error_code ec,
                        const resp::value& reply) = 0;
  virtual void retain() noexcept = 0;
  virtual void release() noexcept = 0;

 protected:
  ~reply_sink() = default;
};

// A reference to a reply_sink: retains on construction and copy, releases when reset.
class sink_ref {
 public:
  sink_ref() noexcept = default;
  explicit sink_ref(reply_sink* sink) noexcept : sink_(sink) {
    if (sink_) sink_->retain();
  }
  sink_ref(const sink_ref& other) noexcept : sink_ref(other.sink_) {}
  sink_ref(sink_ref&& other) noexcept : sink_(std::exchange(other.sink_, nullptr)) {}
  sink_ref& operator=(sink_ref other) noexcept {
    std::swap(sink_, other.sink_);
    return *this;
  }
  ~sink_ref() { reset(); }

  void reset() noexcept {
    if (auto* sink = std::exchange(sink_, nullptr)) sink->release();
  }
  reply_sink* get() const noexcept { return sink_; }
  reply_sink* operator->() const noexcept { return sink_; }
  explicit operator bool() const noexcept { return sink_ != nullptr; }

 private:
  reply_sink* sink_ = nullptr;
};

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

// One pipelined connection to one Redis node.
//
// Requests issued in the same turn of the executor, by any number of callers, go out in one socket
// write; replies complete them in FIFO order. The connection opens on the first request, performs
// AUTH / SELECT / CLIENT SETNAME / SCRIPT LOAD, and after a failure reconnects by itself with
// jittered backoff.
//
// Completion signature of a request: void(error_code ec, resp::value reply).
//  - ec == success: `reply` is the server's reply, which may itself be a RESP error reply
//    (reply.is_error(): e.g. "-NOSCRIPT ...", "-WRONGTYPE ...").
//  - ec != success: the request got no reply. `reply` is a simple_error whose text names the node
//    and the cause ("127.0.0.1:6380: connect failed: Connection refused"). Codes:
//    error::not_connected (node down, request not sent), error::connection_lost (link broke while
//    the request was queued or in flight; a written command may or may not have executed),
//    error::request_timeout, error::node_unresponsive (skip_if_unresponsive; not sent),
//    error::connect_timeout, error::auth_failed, error::select_failed, error::permission_denied,
//    error::protocol_error, error::invalid_argument (connection_options::admit_peer), a
//    system/asio error from connecting, or operation_aborted (cancelled, or the connection was
//    closed). While permanent_failure() is set, requests fail unsent with that code.
//
// Cancellation (per-operation): before a request is written, every cancellation type drops it and
// it is never sent (a cleanup, request_options::deliver_for, is still sent). After it is written,
// terminal and partial cancellation complete it at once; its reply is still read and dropped so
// later replies stay matched. The command may have executed.
//
// Thread safety: a connection and all its requests belong to its executor (pass a strand when the
// io_context runs on several threads). Completions are posted through each handler's associated
// executor, never run inside the connection's read or write loop: a handler that throws unwinds
// into io_context::run(), not into the loop, and the connection goes on working.
//
// Lifetime: once started, the connection keeps itself alive (its read/write/reconnect loop holds a
// reference) until close() is called or its io_context is destroyed. Its owner must close() it.
class connection : public std::enable_shared_from_this<connection> {
 public:
  using executor_type = boost::asio::any_io_executor;
  using completion_signature = void(boost::system::error_code, resp::value);
  using handler_type = boost::asio::any_completion_handler<completion_signature>;

  enum class state : std::uint8_t { idle, connecting, ready, backoff, closed };

  static std::shared_ptr<connection> create(executor_type executor, node_config node,
                                            connection_options options = {});
  ~connection();

  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  executor_type get_executor() const noexcept { return executor_; }

  template <class CompletionToken>
  auto async_exec(std::span<const std::string_view> command, request_options options,
                  CompletionToken&& token) {
    return async_exec_shared(encode(command), options, std::forward<CompletionToken>(token));
  }

  template <class CompletionToken>
  auto async_exec(std::initializer_list<std::string_view> command, request_options options,
                  CompletionToken&& token) {
    return async_exec(std::span<const std::string_view>(command.begin(), command.size()), options,
                      std::forward<CompletionToken>(token));
  }

  // `payload` holds exactly one RESP-encoded command (resp::encode_command).
  template <class CompletionToken>
  auto async_exec_encoded(std::string payload, request_options options, CompletionToken&& token) {
    return async_exec_shared(std::make_shared<const std::string>(std::move(payload)), options,
                             std::forward<CompletionToken>(token));
  }

  template <class CompletionToken>
  auto async_exec_shared(shared_payload payload, request_options options, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, completion_signature>(
        [self = shared_from_this()](handler_type handler, shared_payload payload,
                                    request_options options) {
          self->start_request(std::move(payload), options, std::move(handler));
        },
        token, std::move(payload), options);
  }

  // For the library's own fan-outs: `sink->on_reply(tag, ...)` runs on this connection's executor,
  // inline when the reply is parsed (never inside this call). No handler is type-erased and no
  // associated executor is consulted, which matters on every node of every request. A sink is
  // library code: it must not throw, and whatever user code it sets off must be posted.
  // `payload` must stay valid until the sink has this request's reply (the request keeps the sink
  // alive until then, so a sink that owns the bytes is enough; a request that must outlive its
  // answer copies them then). `now` is steady_clock::now(), read once by the caller for a whole
  // fan-out.
  void exec_direct(std::string_view payload, request_options options, reply_sink& sink,
                   std::size_t tag, std::chrono::steady_clock::time_point now);
  // The same with bytes each request keeps alive by itself, for a caller that cannot keep them
  // unchanged until every reply is in.
  void exec_direct(shared_payload payload, request_options options, reply_sink& sink,
                   std::size_t tag, std::chrono::steady_clock::time_point now);

  // Opens the connection now instead of at the first request. Idempotent.
  void start();

  // Fails every queued and in-flight request with operation_aborted, closes the socket and stops
  // reconnecting. Later requests fail with operation_aborted. Idempotent.
  void close();

  // Closes once every request issued so far has its reply and every kept cleanup has been
  // delivered (which may take a reconnect), or after `bound` at the latest; until then the
  // connection works as usual. Used at shutdown so that final releases still go out.
  void close_when_idle(std::chrono::milliseconds bound);

  // A request to this node has waited out its deadline and the node has not answered it yet: a
  // written request whose reply has not arrived, or one queued behind a connect attempt that is
  // still under way. It ends when those replies arrive (the requests in flight are the probe;
  // nothing extra is sent) or the connection is reset.
  //
  // Judged when deadlines expire, not by the age of the oldest request when a new one is issued:
  // the reactor reads ready sockets before it runs expired timers, so a reply that has arrived is
  // seen first even by a starved process, which would otherwise blame a node it had simply not
  // read yet.
  bool unresponsive() const noexcept {
    return timed_out_in_flight_ > 0 || (state_ == state::connecting && timed_out_while_connecting_);
  }

  state current_state() const noexcept { return state_; }
  const node_config& node() const noexcept { return node_; }
  const connection_stats& stats() const noexcept { return stats_; }
  // The most recent connection-level failure, naming the node; empty if there was none.
  const std::string& last_error() const noexcept { return last_error_; }

  // Set while the last connect attempt failed in a way that retrying will not fix until someone
  // changes a configuration: error::auth_failed, select_failed, permission_denied, protocol_error
  // (the server does not speak RESP) or invalid_argument (admit_peer refused it). Requests issued
  // meanwhile fail at once with this code instead of error::not_connected. The connection still
  // reconnects with backoff, and clears it when a connect succeeds.
  boost::system::error_code permanent_failure() const noexcept { return permanent_failure_; }

 private:
  struct request;
  class request_pool;

  // Shared ownership of a pooled request, intrusive and not atomic: only this connection's
  // containers (queued_ or in_flight_, and deadlines_) own requests, and all on one executor. The
  // cancellation handler of a caller's request holds a generation-checked pointer instead.
  class request_ptr {
   public:
    request_ptr() noexcept = default;
    explicit request_ptr(request* req) noexcept : req_(req) { add_ref(req_); }
    request_ptr(const request_ptr& other) noexcept : request_ptr(other.req_) {}
    request_ptr(request_ptr&& other) noexcept : req_(std::exchange(other.req_, nullptr)) {}
    request_ptr& operator=(request_ptr other) noexcept {
      std::swap(req_, other.req_);
      return *this;
    }
    ~request_ptr() { release(std::exchange(req_, nullptr)); }

    request* get() const noexcept { return req_; }
    request* operator->() const noexcept { return req_; }
    request& operator*() const noexcept { return *req_; }

   private:
    static void add_ref(request* req) noexcept;
    static void release(request* req) noexcept;
    request* req_ = nullptr;
  };

  connection(executor_type executor, node_config node, connection_options options);

  static shared_payload encode(std::span<const std::string_view> command);

  void start_request(shared_payload payload, request_options options, handler_type handler);
  void start_request(request_ptr req, request_options options,
                     std::chrono::steady_clock::time_point now);
  void on_request_cancelled(std::uint64_t id, boost::asio::cancellation_type type);
  void track_deadline(const request_ptr& req);
  void arm_deadline_timer(std::chrono::steady_clock::time_point at);
  void expire_deadlines();
  void drop_answered_deadlines();
  // Gives the request's caller or sink its one outcome. A caller's handler is always posted and
  // gets `reply` moved into it; a sink only reads it, inline (dispatch) or posted: posted from an
  // initiating function or a cancellation handler, and from inside fail_all.
  enum class delivery { post, dispatch };
  void answer(request& req, boost::system::error_code ec, resp::value&& reply, delivery how);
  void answer_failure(request& req, boost::system::error_code ec, std::string_view why,
                      delivery how);
  // The link is gone: every request still queued or in flight gets `ec` (posted: this runs inside
  // the loops); with `keep_cleanups`, cleanups are kept for the next connection, else dropped.
  void fail_all(boost::system::error_code ec, std::string_view why, bool keep_cleanups);
  void keep_cleanup(request_ptr req, std::chrono::steady_clock::time_point now);
  void requeue_kept_cleanups();
  // Queues `req` ahead of every request not yet written, behind earlier ones queued this way.
  void queue_ahead(request_ptr req);
  void reload_script(const script& lua);
  bool idle() const noexcept;
  void wake_writer();

  // Keeps the connection alive for its run loop. Its destructor (the loop ended, or its frame was
  // destroyed with the io_context) drops every request that is left: a request holds its sink, the
  // sink its client and the client this connection, so a request that can no longer complete must
  // not outlive the loop. Asio destroys never-invoked handlers in the same way.
  class run_owner {
   public:
    explicit run_owner(std::shared_ptr<connection> owned) noexcept : owned_(std::move(owned)) {}
    run_owner(run_owner&& other) noexcept = default;
    run_owner& operator=(run_owner&&) = delete;
    ~run_owner() {
      if (owned_) owned_->drop_requests();
    }

   private:
    std::shared_ptr<connection> owned_;
  };

  boost::asio::awaitable<void> run(run_owner owner);
  void drop_requests() noexcept;
  boost::asio::awaitable<boost::system::error_code> connect_with_timeout();
  boost::asio::awaitable<boost::system::error_code> connect_and_handshake();
  boost::asio::awaitable<boost::system::error_code> read_reply(resp::value& out);
  boost::asio::awaitable<boost::system::error_code> read_more();
  boost::asio::awaitable<boost::system::error_code> reader_loop();
  boost::asio::awaitable<boost::system::error_code> writer_loop();
  boost::asio::awaitable<boost::system::error_code> health_check_loop();
  bool deliver(resp::value& reply);
  void set_last_error(boost::system::error_code ec, std::string_view what);
  void log(log_level level, std::string_view message) const;

  executor_type executor_;
  node_config node_;
  connection_options options_;
  std::string name_;  // "host:port", used in every message

  // Declared before every container of requests, so that it outlives them.
  std::unique_ptr<request_pool> pool_;
  transport transport_;
  resp::parser parser_;
  state state_ = state::idle;

  // Requests not yet written, in the order they are to be written. One answered here (cancelled,
  // timed out) stays until the writer skips it, so removal is O(1); a cleanup is written anyway.
  // The first `queued_ahead_` were put there by queue_ahead().
  std::deque<request_ptr> queued_;
  std::size_t queued_ahead_ = 0;
  // Requests written and waiting for their reply, oldest first. Every reply belongs to the front
  // one, even if that one was already answered (then the reply is dropped).
  std::deque<request_ptr> in_flight_;
  // Cleanups failed by a broken link or issued while the node was down, oldest first: written
  // right after the next handshake, before anything else.
  std::deque<request_ptr> kept_cleanups_;
  std::string write_buffer_;

  boost::asio::steady_timer writer_wakeup_;
  bool writer_waiting_ = false;  // the writer waits on writer_wakeup_ and nobody has woken it
  boost::asio::steady_timer reconnect_timer_;
  boost::asio::steady_timer drain_timer_;
  // Requests with a deadline, earliest first; answered ones are dropped lazily from the front.
  std::deque<request_ptr> deadlines_;
  boost::asio::steady_timer deadline_timer_;
  std::chrono::steady_clock::time_point deadline_armed_for_{};
  bool deadline_armed_ = false;
  bool draining_ = false;
  boost::asio::cancellation_signal stop_signal_;
  backoff reconnect_backoff_;
  std::minstd_rand jitter_;
  std::chrono::steady_clock::time_point last_read_{};
  std::size_t timed_out_in_flight_ = 0;      // written, timed out, reply not read yet
  bool timed_out_while_connecting_ = false;  // in this connect attempt

  // Scripts whose SCRIPT LOAD (after a NOSCRIPT) is queued or in flight on this link.
  std::vector<const script*> reloading_;

  std::uint64_t last_request_id_ = 0;
  connection_stats stats_;
  std::string last_error_;  // "host:port: cause"
  std::string last_cause_;  // the same without the node's name, for request failure texts
  boost::system::error_code permanent_failure_;
  std::string handshake_head_;  // the first bytes the server sent on this link, for messages
  std::string_view connect_stage_ = "connecting";  // for connect timeout messages
};

}  // namespace redlock::detail

#endif
