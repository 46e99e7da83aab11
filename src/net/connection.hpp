#ifndef REDLOCK_NET_CONNECTION_HPP
#define REDLOCK_NET_CONNECTION_HPP

#include "clock.hpp"
#include "net/connection_options.hpp"
#include "net/handler_memory.hpp"
#include "net/handshake.hpp"
#include "net/link_failures.hpp"
#include "net/multiplexer.hpp"
#include "redlock/node_config.hpp"
#include "redlock/options.hpp"
#include "resp/parser.hpp"
#include "resp/script.hpp"
#include "resp/value.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <lock_transport_choice.hpp>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace redlock::detail {

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
  // answer copies them then). `now` is lock_clock::now(), read once by the caller for a whole
  // fan-out.
  void exec_direct(std::string_view payload, const request_options& options, reply_sink& sink,
                   std::size_t tag, std::chrono::steady_clock::time_point now);
  // The same with bytes each request keeps alive by itself, for a caller that cannot keep them
  // unchanged until every reply is in.
  void exec_direct(shared_payload payload, const request_options& options, reply_sink& sink,
                   std::size_t tag, std::chrono::steady_clock::time_point now);

  // Opens the connection now instead of at the first request. Idempotent.
  [[gnu::noinline]] void start();

  // Fails every queued and in-flight request with operation_aborted, closes the socket and stops
  // reconnecting. Later requests fail with operation_aborted. Idempotent.
  void close();

  // Closes once every request issued so far has its reply and every kept cleanup has been
  // delivered (which may take a reconnect), or after `bound` at the latest; until then the
  // connection works as usual. Used at shutdown so that final releases still go out. Closes at
  // once when nothing is left, or when no request was ever written to the node
  // (multiplexer::worth_draining): a node never reached has nothing of ours to clean up.
  void close_when_idle(std::chrono::milliseconds bound);

  // A request to this node has waited out its deadline and the node has not answered it yet
  // (multiplexer::unresponsive, which says when it ends and why it is judged when deadlines
  // expire rather than when requests are issued).
  bool unresponsive() const noexcept { return mux_.unresponsive(); }

  state current_state() const noexcept { return state_; }
  const node_config& node() const noexcept { return node_; }
  const connection_stats& stats() const noexcept { return mux_.stats(); }
  // The most recent connection-level failure, naming the node; empty if there was none.
  const std::string& last_error() const noexcept { return failures_.last_error(); }

  // Set while the last connect attempt failed in a way that retrying will not fix until someone
  // changes a configuration: error::auth_failed, select_failed, permission_denied, protocol_error
  // (the server does not speak RESP), wrong_node_kind (connection_options::expect), a failed TLS
  // setup, or invalid_argument (admit_peer refused it). Requests issued
  // meanwhile fail at once with this code instead of error::not_connected. The connection still
  // reconnects with backoff, and clears it when a connect succeeds.
  boost::system::error_code permanent_failure() const noexcept {
    return failures_.permanent_failure();
  }

  // For a TLS node: the name the server's certificate was verified against on the current (or
  // last) connection; empty when not verified or not TLS.
  const std::string& tls_verified_name() const noexcept { return transport_.verified_name(); }

 private:
  friend class writer_turns;  // runs the writer's turn it was woken for

  using request = multiplexer::request;
  using request_ptr = multiplexer::request_ptr;
  using delivery = multiplexer::delivery;

  connection(executor_type executor, node_config node, connection_options options);

  static shared_payload encode(std::span<const std::string_view> command);

  void start_request(shared_payload payload, request_options options, handler_type handler);
  void start_request(request_ptr req, const request_options& options,
                     std::chrono::steady_clock::time_point now);
  // Gives a request's caller or sink its one outcome (multiplexer::answer_fn).
  void answer(request& req, boost::system::error_code ec, resp::value&& reply, delivery how);
  // Keeps the deadline timer armed no later than the multiplexer's earliest deadline.
  void watch_deadlines();
  [[gnu::noinline]] void arm_deadline_timer(std::chrono::steady_clock::time_point at);
  void on_deadline_timer();
  void stop_deadline_timer();
  // Has the writer take every queued request in a turn of its own (see serve_link).
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
  // Records a failed connect's cause (unless the verdict leaves the transport's standing) and
  // returns its code.
  boost::system::error_code fail_connect(const handshake_verdict& verdict);
  boost::asio::awaitable<boost::system::error_code> read_reply(resp::value& out);
  boost::asio::awaitable<boost::system::error_code> read_more();
  // Records a read's failure, or takes its `n` bytes at `data` into the parser.
  boost::system::error_code absorb_read(boost::system::error_code read_error, const char* data,
                                        std::size_t n);
  // Serves a connected link until it breaks or the connection is closed (connection_loops.cpp).
  boost::asio::awaitable<void> serve_link();
  [[gnu::noinline]] void end_link();
  void op_done(unsigned finished);
  void read_next();
  void on_read(boost::system::error_code ec, const char* data, std::size_t n);
  // Gives every buffered reply to the multiplexer; false when the link must end.
  bool deliver_replies();
  // Writes every queued request, batch after batch, until none is left or one must wait for the
  // socket; ends the turn (writing_ false) only when nothing is left.
  void write_turn();
  // A batch of `batch` requests has been written (`n` bytes), or failed with `ec`.
  // What the kernel did not take of a batch, written asynchronously.
  [[gnu::noinline]] void write_rest(std::size_t written, std::size_t batch);
  [[gnu::noinline]] void on_written(boost::system::error_code ec, std::size_t n, std::size_t batch);
  void arm_health_check();
  void log(log_level level, std::string_view message) const;

  executor_type executor_;
  // executor_'s io_context executor, if it is one: the writer's turns are posted through it
  // (post_through), without finding out on every turn.
  std::optional<boost::asio::io_context::executor_type> io_executor_;
  node_config node_;
  connection_options options_;
  std::string name_;  // "host:port", used in every message
  // Built once from node_ and options_, run on every connect.
  handshake handshake_;

  lock_transport transport_;
  resp::parser parser_;
  state state_ = state::idle;
  // Every request and every decision about them; this class only does the I/O.
  multiplexer mux_;
  write_buffer write_buffer_;
  resp::value reply_;  // reused: its storage serves every reply

  // The operations of the served link's handlers, reused (see handler_memory).
  handler_memory* handler_memory_ = handler_memory::create();
  // The served link (serve_link): whether it is up, how many of its handlers are pending, and
  // whether the writer has a turn posted or a write on the wire.
  bool link_up_ = false;
  bool writing_ = false;
  unsigned link_ops_ = 0;
  lock_timer link_watch_;  // serve_link waits on it until the link is down and quiet
  lock_timer health_timer_;
  lock_timer reconnect_timer_;
  lock_timer drain_timer_;
  lock_timer deadline_timer_;
  std::chrono::steady_clock::time_point deadline_armed_for_{};
  bool deadline_armed_ = false;
  bool draining_ = false;
  boost::asio::cancellation_signal stop_signal_;
  // For the health check: reads_ counts the reads of the link, and last_read_ is when the health
  // check last saw that count move (or the link came up). So last_read_ is at most a check period
  // after the last read, never before it: a hung server is found that much later at worst, and no
  // read pays for a clock reading.
  std::uint64_t reads_ = 0;
  std::uint64_t reads_seen_ = 0;
  std::chrono::steady_clock::time_point last_read_{};

  // The last failure's cause, whether retrying can fix it, and when to try again.
  link_failures failures_;
  std::string_view connect_stage_ = "connecting";  // for connect timeout messages
};

// Runs `lua` on `conn`: EVALSHA, resent by the connection as EVAL if the server answers NOSCRIPT
// (see request_options::eval_fallback). Completion and cancellation as connection::async_exec;
// `options.timeout` covers both attempts. `lua` must outlive the operation.
template <class CompletionToken>
auto async_eval(const std::shared_ptr<connection>& conn, const script& lua,
                std::span<const std::string_view> keys, std::span<const std::string_view> args,
                request_options options, CompletionToken&& token) {
  options.eval_fallback = &lua;
  return conn->async_exec_shared(
      std::make_shared<const std::string>(encode_evalsha(lua, keys, args)), options,
      std::forward<CompletionToken>(token));
}

}  // namespace redlock::detail

#endif
