#include "net/connection.hpp"

#include "clock.hpp"
#include "completion.hpp"
#include "log.hpp"
#include "net/handshake.hpp"
#include "net/server_kind.hpp"
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

std::shared_ptr<connection> connection::create(executor_type executor, node_config node,
                                               connection_options options) {
  return std::shared_ptr<connection>(
      new connection(std::move(executor), std::move(node), std::move(options)));
}

connection::connection(executor_type executor, node_config node, connection_options options)
    : executor_(std::move(executor)),
      io_executor_(io_context_executor_of(executor_)),
      node_(std::move(node)),
      options_(std::move(options)),
      name_(node_.address()),
      handshake_(node_, {.client_name = options_.client_name,
                         .subscribe_channel = options_.subscribe_channel,
                         .resp3 = options_.resp3,
                         .require_master = options_.require_master,
                         .expect = options_.expect,
                         .preload = options_.preload,
                         .probes = options_.permission_probes,
                         .admit_peer = options_.admit_peer}),
      transport_(executor_, node_),
      parser_(options_.limits),
      mux_(
          name_, options_.max_pending_cleanups,
          [this](request& req, error_code ec, resp::value&& reply, delivery how) {
            answer(req, ec, std::move(reply), how);
          },
          [this](std::string_view message) { log(log_level::warning, message); }),
      link_watch_(executor_),
      health_timer_(executor_),
      reconnect_timer_(executor_),
      drain_timer_(executor_),
      deadline_timer_(executor_),
      failures_(name_, options_.reconnect) {}

connection::~connection() {
  handler_memory_->drop_ref();
}

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
  end_link();
  transport_.close();
  mux_.close(asio::error::operation_aborted, "connection closed", lock_clock::now());
  stop_deadline_timer();
}

void connection::close_when_idle(std::chrono::milliseconds bound) {
  if (state_ == state::closed) return;
  if (state_ == state::idle || !mux_.worth_draining(state_ == state::backoff)) return close();
  draining_ = true;
  drain_timer_.expires_after(bound);
  drain_timer_.async_wait([weak_self = weak_from_this()](error_code ec) {
    auto self = weak_self.lock();
    if (!ec && self) self->close();
  });
}

// Every lock operation comes through here once per node. Flattened: issuing, queueing, the
// deadline and waking the writer are one function, not a chain of calls; the rare paths (a
// closed or down link, a failure, a connect, the deadline timer) are kept out of line where they
// are declared.
[[gnu::flatten]] void connection::exec_direct(std::string_view payload,
                                              const request_options& options, reply_sink& sink,
                                              std::size_t tag, steady_clock::time_point now) {
  start_request(mux_.make_request(payload, sink, tag), options, now);
}

void connection::exec_direct(shared_payload payload, const request_options& options,
                             reply_sink& sink, std::size_t tag, steady_clock::time_point now) {
  start_request(mux_.make_request(std::move(payload), sink, tag), options, now);
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
  start_request(std::move(req), options, lock_clock::now());
}

void connection::start_request(request_ptr req, const request_options& options,
                               steady_clock::time_point now) {
  // Never answer inside the initiating function: failures here are posted.
  if (state_ == state::closed) {
    mux_.fail_unsent(std::move(req), options, asio::error::operation_aborted, "connection closed",
                     now);
    return;
  }
  if (state_ == state::backoff) {
    mux_.fail_while_down(std::move(req), options, failures_.permanent_failure(),
                         failures_.last_cause(), now);
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
  // A cluster node given as redis://: the command did not run, its key's slot is elsewhere.
  // Only an error reply can be a redirect: the kind is tested here, before the call, since nearly
  // every reply is not one.
  if (options_.refuse_cluster_redirects && !ec && reply.kind == resp::type::simple_error &&
      replace_cluster_redirect(reply, name_, node_))
    ec = error::wrong_node_kind;
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
  mux_.expire_deadlines(lock_clock::now(), transport_.stage_text(connect_stage_));
  watch_deadlines();
}

void connection::stop_deadline_timer() {
  deadline_armed_ = false;
  deadline_timer_.cancel();
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

}  // namespace redlock::detail
