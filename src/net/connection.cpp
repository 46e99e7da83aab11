#include "net/connection.hpp"

#include "completion.hpp"
#include "log.hpp"
#include "net/script.hpp"
#include "redlock/error.hpp"
#include "resp/encoder.hpp"
#include "text.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <variant>
#include <vector>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

long long to_ms(std::chrono::milliseconds d) {
  return static_cast<long long>(d.count());
}

// Connect failures that the same attempt would meet again until someone changes a configuration.
bool is_permanent(error_code ec) {
  return ec == error::auth_failed || ec == error::select_failed || ec == error::permission_denied ||
         ec == error::protocol_error || ec == error::invalid_argument ||
         ec == error::tls_handshake_failed || ec == error::certificate_rejected;
}

constexpr std::size_t handshake_head_size = 24;

// Redis 7 words NOPERM for a key "... no permissions to access one of the keys used as
// arguments" (or "... access a key"); for a command it names the command ("... no permissions to
// run the 'evalsha' command").
bool is_key_permission_error(std::string_view text) {
  return text.find("permissions to access") != std::string_view::npos &&
         text.find("key") != std::string_view::npos;
}

// What to tell a user whose "Redis" answered bytes that are not RESP.
std::string not_resp_hint(std::string_view first_bytes) {
  if (first_bytes.starts_with("H")) {  // "HTTP/1.1 400 Bad Request"
    return " (an HTTP server?)";
  }
  if (first_bytes.starts_with("\x15") || first_bytes.starts_with("\x16")) {
    return " (a TLS port? use rediss://)";
  }
  if (first_bytes.starts_with("SSH-")) return " (an SSH server?)";
  return "";
}

}  // namespace

std::shared_ptr<connection> connection::create(executor_type executor, node_config node,
                                               connection_options options) {
  return std::shared_ptr<connection>(
      new connection(std::move(executor), std::move(node), std::move(options)));
}

connection::connection(executor_type executor, node_config node, connection_options options)
    : executor_(std::move(executor)),
      node_(std::move(node)),
      options_(std::move(options)),
      name_(node_.address()),
      transport_(executor_, node_),
      parser_(options_.limits),
      mux_(
          name_, options_.max_pending_cleanups,
          [this](request& req, error_code ec, resp::value&& reply, delivery how) {
            answer(req, ec, std::move(reply), how);
          },
          [this](std::string_view message) { log(log_level::warning, message); }),
      writer_wakeup_(executor_),
      reconnect_timer_(executor_),
      drain_timer_(executor_),
      deadline_timer_(executor_),
      reconnect_backoff_(options_.reconnect),
      jitter_(std::random_device{}()) {}

connection::~connection() = default;

shared_payload connection::encode(std::span<const std::string_view> command) {
  auto payload = std::make_shared<std::string>();
  resp::encode_command(*payload, command);
  return payload;
}

void connection::start() {
  if (state_ != state::idle) return;
  state_ = state::connecting;
  mux_.on_connect_started();
  asio::co_spawn(executor_, run(run_owner(shared_from_this())),
                 asio::bind_cancellation_slot(stop_signal_.slot(), asio::detached));
}

void connection::close() {
  if (state_ == state::closed) return;
  state_ = state::closed;
  // The run coroutine (if any) notices state_ and the cancellation, and returns.
  stop_signal_.emit(asio::cancellation_type::terminal);
  reconnect_timer_.cancel();
  drain_timer_.cancel();
  writer_wakeup_.cancel();
  transport_.close();
  mux_.close(asio::error::operation_aborted, "connection closed", steady_clock::now());
  stop_deadline_timer();
}

void connection::close_when_idle(std::chrono::milliseconds bound) {
  if (state_ == state::closed) return;
  if (state_ == state::idle || !mux_.worth_draining()) return close();
  // Down, with nothing that a reconnect would deliver: the requests there fail as it is.
  if (state_ == state::backoff && !mux_.has_kept_cleanups()) return close();
  draining_ = true;
  drain_timer_.expires_after(bound);
  drain_timer_.async_wait([weak_self = weak_from_this()](error_code ec) {
    auto self = weak_self.lock();
    if (!ec && self) self->close();
  });
}

void connection::exec_direct(std::string_view payload, request_options options, reply_sink& sink,
                             std::size_t tag, steady_clock::time_point now) {
  auto req = mux_.make_request();
  // The sink's bytes: a request that must outlive its answer (a cleanup answered before it was
  // delivered) copies them when it is answered.
  req->payload = payload;
  req->sink = sink_ref(&sink);
  req->tag = tag;
  start_request(std::move(req), options, now);
}

void connection::exec_direct(shared_payload payload, request_options options, reply_sink& sink,
                             std::size_t tag, steady_clock::time_point now) {
  auto req = mux_.make_request();
  req->own(std::move(payload));
  req->sink = sink_ref(&sink);
  req->tag = tag;
  start_request(std::move(req), options, now);
}

void connection::start_request(shared_payload payload, request_options options,
                               handler_type handler) {
  auto req = mux_.make_request();
  req->own(std::move(payload));
  req->caller.emplace(std::move(handler), executor_);
  // By id, not by pointer: the slot belongs to the caller and may fire after the request is
  // finished and its object reused.
  req->caller->on_cancel(
      [weak_self = weak_from_this(), id = req->id](asio::cancellation_type type) {
        if (auto self = weak_self.lock()) self->mux_.cancel(id, type);
      });
  start_request(std::move(req), options, steady_clock::now());
}

void connection::start_request(request_ptr req, request_options options,
                               steady_clock::time_point now) {
  // Never answer inside the initiating function: failures here are posted.
  if (state_ == state::closed) {
    mux_.fail_unsent(std::move(req), options, asio::error::operation_aborted, "connection closed",
                     now);
    return;
  }
  if (state_ == state::backoff) {
    if (permanent_failure_) {
      mux_.fail_unsent(std::move(req), options, permanent_failure_,
                       fmt::format("not sent: {}", last_cause_), now);
    } else {
      mux_.fail_unsent(std::move(req), options, error::not_connected,
                       fmt::format("node is down, reconnecting (last error: {})", last_cause_),
                       now);
    }
    return;
  }
  if (!mux_.add(std::move(req), options, now)) return;
  watch_deadlines();
  if (state_ == state::idle) {
    start();
  } else if (state_ == state::ready) {
    wake_writer();
  }
}

void connection::answer(request& req, error_code ec, resp::value&& reply, delivery how) {
  if (req.sink) {
    const auto sink = std::move(req.sink);
    if (how == delivery::post) {
      asio::post(executor_, [sink, tag = req.tag, ec, reply = std::move(reply)]() mutable {
        sink->on_reply(tag, ec, reply);
      });
    } else {
      sink->on_reply(req.tag, ec, reply);
    }
    return;
  }
  // Always posted: a caller's handler is user code, which must never run inside the read or
  // write loop (an exception it throws would end the loop instead of reaching run()).
  req.caller->complete(ec, std::move(reply));
}

// One timer watches every deadline (the multiplexer keeps them sorted). Invariant: while the
// multiplexer has a deadline, the timer is armed no later than the earliest one, so no deadline
// fires late. It is re-checked after every request issued, including those that a sink issues
// while expired requests are being answered.
void connection::watch_deadlines() {
  const auto next = mux_.next_deadline();
  if (next == steady_clock::time_point::max()) return;
  if (deadline_armed_ && deadline_armed_for_ <= next) return;
  arm_deadline_timer(next);
}

void connection::arm_deadline_timer(steady_clock::time_point at) {
  // Re-arming cancels the pending wait; its handler sees operation_aborted and leaves it be.
  deadline_armed_ = true;
  deadline_armed_for_ = at;
  deadline_timer_.expires_at(at);
  deadline_timer_.async_wait([weak_self = weak_from_this()](error_code ec) {
    auto self = weak_self.lock();
    if (!ec && self) self->on_deadline_timer();
  });
}

void connection::on_deadline_timer() {
  deadline_armed_ = false;
  mux_.expire_deadlines(steady_clock::now(), transport_.stage_text(connect_stage_));
  watch_deadlines();
}

void connection::stop_deadline_timer() {
  deadline_armed_ = false;
  deadline_timer_.cancel();
}

void connection::wake_writer() {
  // Once per turn at most: cancelling the timer takes the reactor's lock, and a fan-out calls this
  // for every request.
  if (!writer_waiting_) return;
  writer_waiting_ = false;
  writer_wakeup_.cancel();
}

void connection::set_last_error(error_code ec, std::string_view what) {
  // A loop that was cancelled because another one failed must not overwrite the real cause.
  if (ec == asio::error::operation_aborted) return;
  last_cause_ = what;
  last_error_ = fmt::format("{}: {}", name_, what);
}

void connection::log(log_level level, std::string_view message) const {
  call_logger(options_.logger, executor_, level, message);
}

void connection::drop_requests() noexcept {
  // Without its loop the connection cannot work any more. Closed first, so that anything a
  // released sink sets off (a lease's best-effort release) fails at once instead of queueing.
  state_ = state::closed;
  deadline_armed_ = false;
  mux_.drop_all();
}

asio::awaitable<void> connection::run(run_owner /*owner*/) {
  // Cancellation (close()) is observed through state_; awaits return errors instead of throwing.
  co_await asio::this_coro::throw_if_cancelled(false);
  try {
    while (state_ != state::closed) {
      state_ = state::connecting;
      mux_.on_connect_started();
      error_code request_error = co_await connect_with_timeout();
      if (state_ == state::closed) break;

      // Only a failure of the handshake itself can be permanent: a protocol error later on
      // breaks one link, not the node's configuration.
      permanent_failure_ = is_permanent(request_error) ? request_error : error_code{};
      if (!request_error) {
        state_ = state::ready;
        reconnect_backoff_.reset();
        const auto now = steady_clock::now();
        last_read_ = now;
        // The kept cleanups go first, ahead of everything queued while the node was down.
        mux_.on_handshake_done(now);
        log(log_level::info, fmt::format("{}: connected", name_));
        if (options_.on_link) options_.on_link(true);
        auto outcome = co_await (reader_loop() || writer_loop() || health_check_loop());
        if (state_ == state::closed) break;
        // Whatever broke the link, callers see one code: their request may or may not have run.
        request_error = error::connection_lost;
        (void)outcome;
      }

      transport_.close();
      parser_.reset();
      state_ = state::backoff;
      if (options_.on_link) options_.on_link(false);
      if (state_ == state::closed) break;
      const auto delay = reconnect_backoff_.next(jitter_);
      // Answers are posted: whoever they set off (a failed round's cleanup) finds the node down
      // and its cleanup kept for the next connection.
      mux_.on_connection_lost(request_error, last_cause_, steady_clock::now());
      stop_deadline_timer();
      if (draining_ && mux_.idle()) {
        close();
        break;
      }
      log(log_level::warning, fmt::format("{}; reconnecting in {} ms", last_error_, to_ms(delay)));
      reconnect_timer_.expires_after(delay);
      co_await reconnect_timer_.async_wait(use_tuple);
    }
  } catch (const std::exception& e) {
    // Only resource exhaustion gets here; the connection cannot go on.
    last_error_ = fmt::format("{}: internal failure: {}", name_, e.what());
    log(log_level::error, last_error_);
    state_ = state::closed;
  }
  transport_.close();
  mux_.close(asio::error::operation_aborted, "connection closed", steady_clock::now());
  stop_deadline_timer();
}

asio::awaitable<error_code> connection::connect_with_timeout() {
  asio::steady_timer timer(executor_, options_.connect_timeout);
  connect_stage_ = "resolving";
  auto outcome = co_await (connect_and_handshake() || timer.async_wait(use_tuple));
  if (outcome.index() == 0) co_return std::get<0>(outcome);
  transport_.close();
  set_last_error(error::connect_timeout, fmt::format("connect timed out after {} ms while {}",
                                                     to_ms(options_.connect_timeout),
                                                     transport_.stage_text(connect_stage_)));
  co_return error::connect_timeout;
}

asio::awaitable<error_code> connection::connect_and_handshake() {
  if (auto failure = co_await transport_.connect(connect_stage_)) {
    set_last_error(failure.code, failure.what);
    co_return failure.code;
  }
  if (node_.tls.enabled && !node_.tls.verify_peer) {
    log(log_level::warning,
        fmt::format("{}: TLS peer verification is off (verify=no): the server is not "
                    "authenticated, and anyone in the path can read and change the traffic",
                    name_));
  }
  parser_.reset();
  handshake_head_.clear();
  if (options_.admit_peer) {
    if (auto refusal = options_.admit_peer(transport_.peer()); !refusal.empty()) {
      set_last_error(error::invalid_argument, refusal);
      co_return error::invalid_argument;
    }
  }

  // All handshake commands go out in one write; their replies come back in the same order.
  struct step {
    std::string_view command;
    error failure;
    const script* loaded = nullptr;  // SCRIPT LOAD: the reply must be this script's SHA-1
    bool probe = false;              // connection_options::permission_probes
  };
  std::vector<step> steps;
  std::string out;
  const std::string database = std::to_string(node_.database);
  if (!node_.password.empty()) {
    if (node_.username.empty()) {
      resp::encode_command(out, {"AUTH", node_.password});
    } else {
      resp::encode_command(out, {"AUTH", node_.username, node_.password});
    }
    steps.push_back({"AUTH", error::auth_failed});
  }
  if (node_.database != 0) {
    resp::encode_command(out, {"SELECT", database});
    steps.push_back({"SELECT", error::select_failed});
  }
  // Always one command that needs authentication, so a server that requires a password we do not
  // have is detected now (NOAUTH) rather than on the first lock request.
  if (!options_.client_name.empty()) {
    resp::encode_command(out, {"CLIENT", "SETNAME", options_.client_name});
    steps.push_back({"CLIENT SETNAME", error::server_error});
  } else {
    resp::encode_command(out, {"PING"});
    steps.push_back({"PING", error::server_error});
  }
  if (!options_.subscribe_channel.empty()) {
    // RESP3, so that messages (pushes) cannot be mistaken for replies to requests.
    resp::encode_command(out, {"HELLO", "3"});
    steps.push_back({"HELLO 3", error::server_error});
    resp::encode_command(out, {"SUBSCRIBE", options_.subscribe_channel});
    steps.push_back({"SUBSCRIBE", error::server_error});
  }
  for (const script* lua : options_.preload) {
    resp::encode_command(out, {"SCRIPT", "LOAD", lua->source()});
    steps.push_back({"SCRIPT LOAD", error::server_error, lua});
  }
  for (const auto& probe : options_.permission_probes) {
    out += probe.encoded;
    steps.push_back({probe.command, error::server_error, nullptr, true});
  }

  connect_stage_ = "waiting for the handshake";
  auto [write_error, written] = co_await transport_.async_write(asio::buffer(out), use_tuple);
  (void)written;
  if (write_error) {
    if (transport::is_tls_protocol_error(write_error)) {
      set_last_error(error::tls_handshake_failed,
                     fmt::format("TLS failed: {}", transport::tls_reason(write_error)));
      co_return error::tls_handshake_failed;
    }
    set_last_error(write_error, fmt::format("handshake write failed: {}", write_error.message()));
    co_return write_error;
  }
  for (const auto& s : steps) {
    resp::value reply;
    if (auto ec = co_await read_reply(reply)) {
      if (transport::is_tls_protocol_error(ec)) {
        // A TLS 1.3 server judges the client's certificate after the client has finished its side
        // of the handshake: a refusal arrives as an alert in place of the first reply.
        set_last_error(error::tls_handshake_failed,
                       fmt::format("TLS failed: {}", transport::tls_reason(ec)));
        co_return error::tls_handshake_failed;
      }
      if (!node_.tls.enabled && handshake_head_.empty() &&
          (ec == asio::error::eof || ec == asio::error::connection_reset)) {
        // What a Redis TLS port does with plain RESP: it drops the connection without a byte.
        // Also what a proxy without a backend may do, so it stays a passing failure.
        set_last_error(ec, fmt::format("the server closed the connection without answering the "
                                       "handshake ({}; a TLS port? use rediss://)",
                                       ec.message()));
        co_return ec;
      }
      if (ec == error::protocol_error) {
        // Not a reply that went wrong: the first bytes were not RESP at all.
        set_last_error(
            ec, fmt::format("the server at {} does not speak RESP{}; it sent \"{}\" ({})", name_,
                            not_resp_hint(handshake_head_), printable(handshake_head_),
                            parser_.error_message()));
      }
      co_return ec;
    }
    if (reply.is_error()) {
      const auto word = reply.error_code_word();
      if (word == "NOAUTH") {
        set_last_error(error::auth_failed,
                       fmt::format("cannot log in: the server requires a password and {} ({})",
                                   node_.password.empty() ? "none is configured"
                                                          : "refused the one configured",
                                   reply.text));
        co_return error::auth_failed;
      }
      if (word == "NOPERM") {
        // Naming the connection is a courtesy, and a key pattern is the resource's business.
        if (s.command == "CLIENT SETNAME" || (s.probe && is_key_permission_error(reply.text))) {
          continue;
        }
        set_last_error(error::permission_denied,
                       fmt::format("ACL user \"{}\" may not run {}, which the lock needs ({})",
                                   node_.username.empty() ? "default" : node_.username, s.command,
                                   reply.text));
        co_return error::permission_denied;
      }
      // A probe asks only about permissions. Any other refusal (OOM at maxmemory, READONLY on a
      // replica) is the state of the node now, which the lock's own requests meet and report; a
      // failed connect would also stop the releases that could free it.
      if (s.probe) continue;
      if (s.failure == error::auth_failed) {
        set_last_error(s.failure, fmt::format("cannot log in: AUTH refused ({})", reply.text));
      } else if (s.failure == error::select_failed) {
        set_last_error(s.failure, fmt::format("cannot select database {}: SELECT refused ({})",
                                              node_.database, reply.text));
      } else {
        set_last_error(s.failure, fmt::format("{} failed: {}", s.command, reply.text));
      }
      co_return s.failure;
    }
    if (s.loaded != nullptr && !(reply.is_string() && reply.text == s.loaded->sha1())) {
      set_last_error(error::server_error,
                     fmt::format("SCRIPT LOAD answered {}, not the script's SHA-1 {}",
                                 resp::to_debug_string(reply), s.loaded->sha1()));
      co_return error::server_error;
    }
  }
  co_return error_code{};
}

asio::awaitable<error_code> connection::read_reply(resp::value& out) {
  for (;;) {
    error_code ec;
    if (parser_.next(out, ec)) co_return error_code{};
    if (ec) {
      set_last_error(ec, parser_.error_message());
      co_return ec;
    }
    if (auto read_error = co_await read_more()) co_return read_error;
  }
}

asio::awaitable<error_code> connection::read_more() {
  auto space = parser_.prepare(connection_read_chunk);
  if (space.empty()) {
    set_last_error(error::protocol_error, parser_.error_message());
    co_return error::protocol_error;
  }
  auto [read_error, n] =
      co_await transport_.async_read_some(asio::buffer(space.data(), space.size()), use_tuple);
  if (read_error) {
    set_last_error(read_error,
                   read_error == asio::error::eof
                       ? std::string("connection closed by the server")
                       : fmt::format("read failed: {}", transport_.describe(read_error)));
    co_return read_error;
  }
  if (state_ == state::connecting && handshake_head_.size() < handshake_head_size) {
    handshake_head_.append(space.data(), std::min(n, handshake_head_size - handshake_head_.size()));
  }
  parser_.commit(n);
  last_read_ = steady_clock::now();
  co_return error_code{};
}

asio::awaitable<error_code> connection::reader_loop() {
  resp::value reply;  // reused: its storage serves every reply
  for (;;) {
    // Every complete reply already buffered is delivered before the next read, without a
    // coroutine call per reply: one read typically brings a whole pipelined batch.
    error_code ec;
    while (parser_.next(reply, ec)) {
      if (reply.kind == resp::type::push && options_.on_push) {
        options_.on_push(reply);
        continue;
      }
      if (!mux_.consume_reply(reply)) {
        set_last_error(error::protocol_error,
                       fmt::format("unsolicited reply {}", resp::to_debug_string(reply)));
        co_return error::protocol_error;
      }
      // A NOSCRIPT re-send or a script reload was queued.
      if (mux_.write_pending()) wake_writer();
      if (draining_ && mux_.idle()) close();
      // A sink answered inline may have closed us.
      if (state_ != state::ready) co_return asio::error::operation_aborted;
    }
    if (ec) {
      set_last_error(ec, parser_.error_message());
      co_return ec;
    }
    if (auto read_error = co_await read_more()) co_return read_error;
  }
}

asio::awaitable<error_code> connection::writer_loop() {
  for (;;) {
    const auto batch = mux_.prepare_write(write_buffer_, steady_clock::now());
    if (batch == 0) {
      // Requests issued during this turn cancel the wait; the writer resumes in a later turn and
      // takes all of them in one write.
      writer_wakeup_.expires_at(steady_clock::time_point::max());
      writer_waiting_ = true;
      co_await writer_wakeup_.async_wait(use_tuple);
      writer_waiting_ = false;
      auto cancelled = (co_await asio::this_coro::cancellation_state).cancelled();
      if (cancelled != asio::cancellation_type::none || state_ != state::ready) {
        co_return asio::error::operation_aborted;
      }
      continue;
    }

    auto [ec, n] = co_await transport_.async_write(asio::buffer(write_buffer_), use_tuple);
    if (ec) {
      if (state_ == state::ready) {
        set_last_error(ec, fmt::format("write failed: {}", ec.message()));
      }
      co_return ec;
    }
    mux_.commit_write(batch, n);
  }
}

asio::awaitable<error_code> connection::health_check_loop() {
  const auto limit = options_.health_check_timeout;
  asio::steady_timer timer(executor_);
  for (;;) {
    if (limit <= std::chrono::milliseconds(0)) {
      timer.expires_at(steady_clock::time_point::max());
    } else {
      timer.expires_after(std::max(limit / 4, std::chrono::milliseconds(10)));
    }
    auto [ec] = co_await timer.async_wait(use_tuple);
    if (ec) co_return ec;
    if (mux_.reply_overdue(last_read_, limit, steady_clock::now())) {
      set_last_error(
          error::connection_lost,
          fmt::format("no reply for more than {} ms (server hung or stopped)", to_ms(limit)));
      co_return error::connection_lost;
    }
  }
}

}  // namespace redlock::detail
