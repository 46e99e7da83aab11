// connection: its run loop, connecting with the handshake, and the reader and writer loops.
#include "clock.hpp"
#include "completion.hpp"
#include "log.hpp"
#include "net/connection.hpp"
#include "net/handshake.hpp"
#include "net/server_kind.hpp"
#include "net/use_tuple.hpp"
#include "redlock/error.hpp"
#include "resp/encoder.hpp"

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

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;
using namespace asio::experimental::awaitable_operators;

namespace {

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
        // The kept cleanups go first, ahead of everything queued while the node was down.
        mux_.on_handshake_done(now);
        log(log_level::info, fmt::format("{}: connected", name_));
        if (options_.on_link) options_.on_link(true, error_code{});
        auto outcome = co_await (reader_loop() || writer_loop() || health_check_loop());
        if (state_ == state::closed) break;
        // Whatever broke the link, callers see one code: their request may or may not have run.
        request_error = error::connection_lost;
        (void)outcome;
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
  auto space = parser_.prepare(connection_read_chunk);
  if (space.empty()) {
    failures_.record(error::protocol_error, parser_.error_message());
    co_return error::protocol_error;
  }
  auto [read_error, n] =
      co_await transport_.async_read_some(asio::buffer(space.data(), space.size()), use_tuple);
  if (read_error) {
    failures_.record(read_error,
                     read_error == asio::error::eof
                         ? std::string("connection closed by the server")
                         : fmt::format("read failed: {}", transport_.describe(read_error)));
    co_return read_error;
  }
  if (state_ == state::connecting) handshake_.heard({space.data(), n});
  parser_.commit(n);
  last_read_ = lock_clock::now();
  co_return error_code{};
}

asio::awaitable<error_code> connection::reader_loop() {
  resp::value reply;  // reused: its storage serves every reply
  for (;;) {
    // Every complete reply already buffered is delivered before the next read, without a
    // coroutine call per reply: one read typically brings a whole pipelined batch.
    error_code ec;
    while (parser_.next(reply, ec)) {
      if (reply.kind == resp::type::push && !mux_.takes_push(reply)) {
        if (options_.on_push) options_.on_push(reply);
        continue;
      }
      if (!mux_.consume_reply(reply)) {
        failures_.record(error::protocol_error,
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
      failures_.record(ec, parser_.error_message());
      co_return ec;
    }
    if (auto read_error = co_await read_more()) co_return read_error;
  }
}

asio::awaitable<error_code> connection::writer_loop() {
  for (;;) {
    const auto batch = mux_.prepare_write(write_buffer_, lock_clock::now());
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
        failures_.record(ec, fmt::format("write failed: {}", ec.message()));
      }
      co_return ec;
    }
    mux_.commit_write(batch, n);
  }
}

asio::awaitable<error_code> connection::health_check_loop() {
  const auto limit = options_.health_check_timeout;
  lock_timer timer(executor_);
  for (;;) {
    if (limit <= std::chrono::milliseconds(0)) {
      timer.expires_at(steady_clock::time_point::max());
    } else {
      timer.expires_after(std::max(limit / 4, std::chrono::milliseconds(10)));
    }
    auto [ec] = co_await timer.async_wait(use_tuple);
    if (ec) co_return ec;
    if (mux_.reply_overdue(last_read_, limit, lock_clock::now())) {
      failures_.record(
          error::connection_lost,
          fmt::format("no reply for more than {} ms (server hung or stopped)", limit.count()));
      co_return error::connection_lost;
    }
  }
}

}  // namespace redlock::detail
