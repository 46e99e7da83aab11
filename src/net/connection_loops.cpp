// connection: its run loop, connecting with the handshake, and the reader and writer loops.
#include "clock.hpp"
#include "completion.hpp"
#include "log.hpp"
#include "net/connection.hpp"
#include "net/handshake.hpp"
#include "net/server_kind.hpp"
#include "net/use_tuple.hpp"
#include "net/writer_turns.hpp"
#include "redlock/error.hpp"
#include "resp/encoder.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <span>
#include <variant>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;
using namespace asio::experimental::awaitable_operators;

namespace {

// Room in the parser's buffer for the next read; empty, with the failure recorded, when a reply
// has outgrown the configured limit.
std::span<char> read_space(resp::parser& parser, link_failures& failures) {
  auto space = parser.prepare(connection_read_chunk);
  if (space.empty()) failures.record(error::protocol_error, parser.error_message());
  return space;
}

handshake_verdict tls_failure(error_code ec) {
  return {error::tls_handshake_failed,
          fmt::format("TLS failed: {}", lock_transport::tls_reason(ec))};
}

}  // namespace

asio::awaitable<void> connection::run(run_owner /*owner*/) {
  // Cancellation (close()) is observed through state_; awaits return errors instead of throwing.
  co_await asio::this_coro::throw_if_cancelled(false);
  try {
    while (state_ != state::closed) {
      state_ = state::connecting;
      mux_.on_connect_started();
      error_code request_error = co_await connect_with_timeout();
      if (state_ == state::closed) break;
      failures_.connect_finished(request_error);
      if (!request_error) {
        state_ = state::ready;
        const auto now = lock_clock::now();
        last_read_ = now;
        reads_seen_ = reads_;
        // The kept cleanups go first, ahead of everything queued while the node was down.
        mux_.on_handshake_done(now);
        log(log_level::info, fmt::format("{}: connected", name_));
        if (options_.on_link) options_.on_link(true, error_code{});
        co_await serve_link();
        if (state_ == state::closed) break;
        // Whatever broke the link, callers see one code: their request may or may not have run.
        request_error = error::connection_lost;
      }

      transport_.close();
      parser_.reset();
      state_ = state::backoff;
      if (options_.on_link) options_.on_link(false, request_error);
      if (state_ == state::closed) break;
      const auto delay = failures_.next_delay();
      // Answers are posted: whoever they set off (a failed round's cleanup) finds the node down
      // and its cleanup kept for the next connection.
      mux_.on_connection_lost(request_error, failures_.last_cause(), lock_clock::now());
      stop_deadline_timer();
      if (draining_ && mux_.idle()) {
        close();
        break;
      }
      log(log_level::warning,
          fmt::format("{}; reconnecting in {} ms", failures_.last_error(), delay.count()));
      reconnect_timer_.expires_after(delay);
      co_await reconnect_timer_.async_wait(use_tuple);
    }
  } catch (const std::exception& e) {
    // Only resource exhaustion gets here; the connection cannot go on.
    failures_.record_internal_failure(e.what());
    log(log_level::error, failures_.last_error());
    state_ = state::closed;
  }
  transport_.close();
  mux_.close(asio::error::operation_aborted, "connection closed", lock_clock::now());
  stop_deadline_timer();
}

asio::awaitable<error_code> connection::connect_with_timeout() {
  lock_timer timer(executor_, options_.connect_timeout);
  connect_stage_ = "resolving";
  auto outcome = co_await (connect_and_handshake() || timer.async_wait(use_tuple));
  if (outcome.index() == 0) co_return std::get<0>(outcome);
  transport_.close();
  failures_.record(error::connect_timeout, fmt::format("connect timed out after {} ms while {}",
                                                       options_.connect_timeout.count(),
                                                       transport_.stage_text(connect_stage_)));
  co_return error::connect_timeout;
}

asio::awaitable<error_code> connection::connect_and_handshake() {
  if (auto failure = co_await transport_.connect(connect_stage_)) {
    failures_.record(failure.code, failure.what);
    co_return failure.code;
  }
  if (!handshake_.caution().empty()) log(log_level::warning, handshake_.caution());
  parser_.reset();
  handshake_.restart();
  if (auto refusal = handshake_.admit(transport_.peer()); refusal.failed()) {
    co_return fail_connect(refusal);
  }

  connect_stage_ = "waiting for the handshake";
  const auto& out = handshake_.request();
  auto [write_error, written] = co_await transport_.async_write(asio::buffer(out), use_tuple);
  (void)written;
  if (write_error) {
    if (lock_transport::is_tls_protocol_error(write_error))
      co_return fail_connect(tls_failure(write_error));
    co_return fail_connect(
        {write_error, fmt::format("handshake write failed: {}", write_error.message())});
  }
  while (!handshake_.done()) {
    resp::value reply;
    if (auto ec = co_await read_reply(reply)) {
      // A TLS 1.3 server judges the client's certificate after the client has finished its side
      // of the handshake: a refusal arrives as an alert in place of the first reply.
      if (lock_transport::is_tls_protocol_error(ec)) co_return fail_connect(tls_failure(ec));
      co_return fail_connect(handshake_.on_link_error(ec, parser_.error_message()));
    }
    if (auto verdict = handshake_.on_reply(reply); verdict.failed()) {
      co_return fail_connect(verdict);
    }
  }
  co_return error_code{};
}

error_code connection::fail_connect(const handshake_verdict& verdict) {
  if (!verdict.message.empty()) failures_.record(verdict.code, verdict.message);
  return verdict.code;
}

asio::awaitable<error_code> connection::read_reply(resp::value& out) {
  for (;;) {
    error_code ec;
    if (parser_.next(out, ec)) co_return error_code{};
    if (ec) {
      failures_.record(ec, parser_.error_message());
      co_return ec;
    }
    if (auto read_error = co_await read_more()) co_return read_error;
  }
}

asio::awaitable<error_code> connection::read_more() {
  auto space = read_space(parser_, failures_);
  if (space.empty()) co_return error::protocol_error;
  auto [read_error, n] =
      co_await transport_.async_read_some(asio::buffer(space.data(), space.size()), use_tuple);
  co_return absorb_read(read_error, space.data(), n);
}

error_code connection::absorb_read(error_code read_error, const char* data, std::size_t n) {
  if (read_error) {
    failures_.record(read_error,
                     read_error == asio::error::eof
                         ? std::string("connection closed by the server")
                         : fmt::format("read failed: {}", transport_.describe(read_error)));
    return read_error;
  }
  if (state_ == state::connecting) handshake_.heard({data, n});
  parser_.commit(n);
  ++reads_;
  return error_code{};
}

// Serving a link is done by plain completion handlers, not coroutines: a read, a write or a turn
// of the writer is one handler invocation, where a coroutine resumption (and the cancellation
// slots of a parallel group) cost several times as much on every request of every node.
//
// Invariant: link_ops_ counts the reader's pending read, the writer's pending write or posted
// turn, and the health check's pending wait. serve_link() returns only once the link is down
// (link_up_ false) and link_ops_ is zero, so no handler of this link is left when run() reconnects:
// a TLS stream must not be replaced under a pending read, and a handler of an old link must never
// act on a new one. Each handler holds the connection, so that an io_context destroyed with
// handlers pending destroys them without touching a destroyed connection.
asio::awaitable<void> connection::serve_link() {
  link_up_ = true;
  writing_ = false;
  read_next();
  arm_health_check();
  // The kept cleanups and everything queued while connecting go out in the first turn.
  wake_writer();
  while (link_up_ || link_ops_ > 0) {
    link_watch_.expires_at(steady_clock::time_point::max());
    co_await link_watch_.async_wait(use_tuple);
    // close() cancelled the wait (and ended the link): wait for the handlers still pending.
    if (state_ != state::ready) end_link();
  }
}

void connection::end_link() {
  if (!link_up_) return;
  link_up_ = false;
  // Pending reads and writes complete with operation_aborted.
  transport_.close();
  health_timer_.cancel();
  op_done(0);
}

void connection::op_done(unsigned finished) {
  link_ops_ -= finished;
  if (!link_up_ && link_ops_ == 0) link_watch_.cancel();
}

void connection::read_next() {
  auto space = read_space(parser_, failures_);
  if (space.empty()) return end_link();
  ++link_ops_;
  transport_.async_read_some(
      asio::buffer(space.data(), space.size()),
      asio::bind_allocator(handler_allocator<void>(*handler_memory_, handler_memory::use::read),
                           [self = shared_from_this(), data = space.data()](
                               error_code ec, std::size_t n) { self->on_read(ec, data, n); }));
}

void connection::on_read(error_code ec, const char* data, std::size_t n) {
  op_done(1);
  if (!link_up_) return;
  if (absorb_read(ec, data, n) || !deliver_replies()) return end_link();
  read_next();
}

bool connection::deliver_replies() {
  // Every complete reply already buffered is delivered before the next read: one read typically
  // brings a whole pipelined batch.
  error_code ec;
  while (parser_.next(reply_, ec)) {
    if (reply_.kind == resp::type::push && !mux_.takes_push(reply_)) {
      if (options_.on_push) options_.on_push(reply_);
      continue;
    }
    if (!mux_.consume_reply(reply_)) {
      failures_.record(error::protocol_error,
                       fmt::format("unsolicited reply {}", resp::to_debug_string(reply_)));
      return false;
    }
    // A NOSCRIPT re-send or a script reload was queued.
    if (mux_.write_pending()) wake_writer();
    if (draining_ && mux_.idle()) close();
    // A sink answered inline may have closed us.
    if (state_ != state::ready) return false;
  }
  if (ec) {
    failures_.record(ec, parser_.error_message());
    return false;
  }
  return true;
}

void connection::wake_writer() {
  // One turn at a time: requests issued while a turn is posted or a write is on the wire are
  // taken by that turn or by the next one, which follows the write at once. So a fan-out that
  // issues a request per node costs one post per connection, and a turn takes every request
  // issued before it runs in one write. Connections that share their turns (a client's lock
  // connections, see writer_turns) cost one post together.
  if (!link_up_ || writing_) return;
  writing_ = true;
  ++link_ops_;
  if (options_.shared_turns) return options_.shared_turns->wake(*this);
  auto turn =
      asio::bind_allocator(handler_allocator<void>(*handler_memory_, handler_memory::use::turn),
                           [self = shared_from_this()] {
                             self->op_done(1);
                             self->write_turn();
                           });
  // With the turn's own memory when the executor is the io_context's (see post_through).
  post_through(executor_, io_executor_, std::move(turn));
}

void connection::write_turn() {
  // A batch goes straight to the socket when the kernel takes it whole, as it nearly always does:
  // no pending write, no completion to post and dispatch. Only what the kernel leaves (a full
  // send buffer) or a TLS stream waits in an async_write. Either way one batch is on the wire at
  // a time, and requests issued meanwhile join the next one.
  while (link_up_) {
    const auto batch = mux_.prepare_write(write_buffer_, lock_clock::now());
    if (batch == 0) break;
    error_code ec;
    const std::size_t written =
        transport_.write_now(asio::buffer(write_buffer_.data(), write_buffer_.size()), ec);
    if (written == write_buffer_.size()) {
      mux_.commit_write(batch, written);
      // Nothing issued meanwhile (nearly always): the turn ends without reading the clock again.
      if (mux_.write_pending()) continue;
      break;
    }
    if (ec && ec != asio::error::would_block) return on_written(ec, written, batch);
    return write_rest(written, batch);
  }
  writing_ = false;
}

void connection::write_rest(std::size_t written, std::size_t batch) {
  ++link_ops_;
  transport_.async_write(
      asio::buffer(write_buffer_.data(), write_buffer_.size()) + written,
      asio::bind_allocator(
          handler_allocator<void>(*handler_memory_, handler_memory::use::write),
          [self = shared_from_this(), batch, written](error_code ec, std::size_t n) {
            self->op_done(1);
            self->on_written(ec, written + n, batch);
          }));
}

void connection::on_written(error_code ec, std::size_t n, std::size_t batch) {
  if (!link_up_) return;
  if (ec) {
    failures_.record(ec, fmt::format("write failed: {}", ec.message()));
    return end_link();
  }
  mux_.commit_write(batch, n);
  write_turn();
}

void connection::arm_health_check() {
  const auto limit = options_.health_check_timeout;
  if (!link_up_ || limit <= std::chrono::milliseconds(0)) return;
  ++link_ops_;
  health_timer_.expires_after(std::max(limit / 4, std::chrono::milliseconds(10)));
  health_timer_.async_wait([self = shared_from_this()](error_code ec) {
    self->op_done(1);
    if (ec || !self->link_up_) return;
    const auto limit = self->options_.health_check_timeout;
    const auto now = lock_clock::now();
    if (self->reads_ != self->reads_seen_) {
      self->reads_seen_ = self->reads_;
      self->last_read_ = now;
    }
    if (self->mux_.reply_overdue(self->last_read_, limit, now)) {
      self->failures_.record(
          error::connection_lost,
          fmt::format("no reply for more than {} ms (server hung or stopped)", limit.count()));
      return self->end_link();
    }
    self->arm_health_check();
  });
}

}  // namespace redlock::detail
