#include "net/connection.hpp"

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <exception>
#include <variant>
#include <vector>

#include "completion.hpp"
#include "net/script.hpp"
#include "redlock/error.hpp"
#include "resp/encoder.hpp"

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr std::size_t read_chunk = 16 * 1024;

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

long long to_ms(std::chrono::milliseconds d) {
  return static_cast<long long>(d.count());
}

}  // namespace

struct connection::request {
  explicit request(request_pool& owner) noexcept : pool(&owner) {}

  request_pool* pool;
  unsigned refs = 0;
  std::uint64_t id = 0;  // unique per connection; a caller's cancellation handler finds it by id

  // The encoded command. `owned` keeps a caller's bytes alive; a library request's bytes belong to
  // its sink, which the request keeps alive. Dropped once written, unless an EVAL fallback may
  // need them.
  std::string_view payload;
  shared_payload owned;
  std::optional<completion<error_code, resp::value>> caller;  // a caller's request, or
  sink_ref sink;                                              // one of the library's own
  std::size_t tag = 0;
  const script* eval_fallback = nullptr;
  steady_clock::time_point deadline = steady_clock::time_point::max();
  std::chrono::milliseconds timeout{0};
  enum class phase : std::uint8_t { queued, written, finished } phase = phase::queued;
  // Resent as EVAL after it had finished: it runs on the server, but nobody gets its reply.
  bool abandoned = false;
  // Timed out after it was written; counted in connection::timed_out_in_flight_ until its reply.
  bool awaited_past_deadline = false;
  steady_clock::time_point written_at{};
};

// Recycles request objects: a lock operation issues one request per node, and allocating each
// one showed up as a large share of the client's CPU. Keeps at most `max_spare` idle objects.
class connection::request_pool {
 public:
  request_pool() = default;
  request_pool(const request_pool&) = delete;
  request_pool& operator=(const request_pool&) = delete;
  ~request_pool() {
    for (request* req : spare_)
      delete req;
  }

  request_ptr make(std::uint64_t id) {
    request* req = nullptr;
    if (spare_.empty()) {
      req = new request(*this);
    } else {
      req = spare_.back();
      spare_.pop_back();
    }
    req->id = id;
    return request_ptr(req);
  }

  // The last reference is gone. Whatever the request still holds (an unfinished caller's handler
  // when the connection is destroyed, a sink reference) is released here.
  void put(request* req) noexcept {
    req->payload = {};
    req->owned.reset();
    req->caller.reset();
    req->sink.reset();
    req->eval_fallback = nullptr;
    req->deadline = steady_clock::time_point::max();
    req->timeout = std::chrono::milliseconds(0);
    req->phase = request::phase::queued;
    req->abandoned = false;
    req->awaited_past_deadline = false;
    if (spare_.size() >= max_spare) {
      delete req;
      return;
    }
    try {
      spare_.push_back(req);
    } catch (...) {
      delete req;
    }
  }

 private:
  static constexpr std::size_t max_spare = 4096;
  std::vector<request*> spare_;
};

void connection::request_ptr::add_ref(request* req) noexcept {
  if (req) ++req->refs;
}

void connection::request_ptr::release(request* req) noexcept {
  if (req && --req->refs == 0) req->pool->put(req);
}

connection_options connection_options::from(const client_options& options) {
  connection_options result;
  result.connect_timeout = options.connect_timeout;
  result.reconnect = options.reconnect;
  result.health_check_timeout = options.health_check_timeout;
  result.client_name = options.client_name;
  result.logger = options.logger;
  return result;
}

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
      pool_(std::make_unique<request_pool>()),
      transport_(executor_),
      parser_(options_.limits),
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
  fail_all(asio::error::operation_aborted, "connection closed");
}

void connection::close_when_idle(std::chrono::milliseconds bound) {
  if (state_ == state::closed) return;
  const bool idle = queued_.empty() && in_flight_.empty();
  if (idle || state_ == state::idle || state_ == state::backoff) return close();
  draining_ = true;
  drain_timer_.expires_after(bound);
  drain_timer_.async_wait([weak_self = weak_from_this()](error_code ec) {
    auto self = weak_self.lock();
    if (!ec && self) self->close();
  });
}

void connection::exec_direct(std::string_view payload, request_options options, reply_sink& sink,
                             std::size_t tag, steady_clock::time_point now) {
  auto req = pool_->make(++last_request_id_);
  req->payload = payload;
  req->sink = sink_ref(&sink);
  req->tag = tag;
  start_request(std::move(req), options, now);
}

void connection::exec_direct(shared_payload payload, request_options options, reply_sink& sink,
                             std::size_t tag, steady_clock::time_point now) {
  auto req = pool_->make(++last_request_id_);
  req->owned = std::move(payload);
  req->payload = *req->owned;
  req->sink = sink_ref(&sink);
  req->tag = tag;
  start_request(std::move(req), options, now);
}

void connection::start_request(shared_payload payload, request_options options,
                               handler_type handler) {
  auto req = pool_->make(++last_request_id_);
  req->owned = std::move(payload);
  req->payload = *req->owned;
  req->caller.emplace(std::move(handler), executor_);
  // By id, not by pointer: the slot belongs to the caller and may fire after the request is
  // finished and its object reused.
  req->caller->on_cancel(
      [weak_self = weak_from_this(), id = req->id](asio::cancellation_type type) {
        if (auto self = weak_self.lock()) self->on_request_cancelled(id, type);
      });
  start_request(std::move(req), options, steady_clock::now());
}

void connection::start_request(request_ptr req, request_options options,
                               steady_clock::time_point now) {
  req->timeout = options.timeout;
  req->eval_fallback = options.eval_fallback;

  // Never complete inside the initiating function: failures here are posted.
  if (state_ == state::closed) {
    fail(*req, asio::error::operation_aborted, "connection closed", delivery::post);
    return;
  }
  if (state_ == state::backoff) {
    fail(*req, error::not_connected,
         fmt::format("node is down, reconnecting (last error: {})", last_cause_), delivery::post);
    return;
  }
  if (options.skip_if_unresponsive && unresponsive()) {
    ++stats_.skipped_unresponsive;
    fail(*req, error::node_unresponsive,
         state_ == state::connecting
             ? "not sent: a request already timed out waiting for the connection"
             : "not sent: the node has not answered a request that timed out",
         delivery::post);
    return;
  }

  if (options.timeout > std::chrono::milliseconds(0)) {
    req->deadline = now + options.timeout;
    track_deadline(req);
  }

  queued_.push_back(std::move(req));
  if (state_ == state::idle) {
    start();
  } else if (state_ == state::ready) {
    wake_writer();
  }
}

void connection::on_request_cancelled(std::uint64_t id, asio::cancellation_type type) {
  using ct = asio::cancellation_type;
  auto has_id = [id](const request_ptr& r) { return r->id == id; };
  auto found = std::find_if(queued_.begin(), queued_.end(), has_id);
  if (found == queued_.end()) {
    found = std::find_if(in_flight_.begin(), in_flight_.end(), has_id);
    if (found == in_flight_.end()) return;  // finished and gone
  }
  request_ptr req = *found;
  // Posted, not dispatched: we are inside the caller's cancellation slot, and completing clears
  // that slot, which would destroy the very handler that is running.
  if (req->phase == request::phase::queued) {
    fail(*req, asio::error::operation_aborted, "cancelled before it was sent", delivery::post);
  } else if (req->phase == request::phase::written &&
             (type & (ct::terminal | ct::partial)) != ct::none) {
    fail(*req, asio::error::operation_aborted,
         "cancelled after it was sent (it may have executed; its reply will be dropped)",
         delivery::post);
  }
}

// Deadlines are kept in one list sorted by time, watched by one timer: a timer per request would
// cost a heap insertion, a lock and often a timerfd update for every request. Requests usually
// share one timeout, so a new deadline almost always goes at the back.
void connection::track_deadline(const request_ptr& req) {
  if (deadlines_.empty() || deadlines_.back()->deadline <= req->deadline) {
    deadlines_.push_back(req);
  } else {
    auto later = std::upper_bound(
        deadlines_.begin(), deadlines_.end(), req->deadline,
        [](steady_clock::time_point t, const request_ptr& r) { return t < r->deadline; });
    deadlines_.insert(later, req);
  }
  if (!deadline_armed_ || req->deadline < deadline_armed_for_) arm_deadline_timer(req->deadline);
}

void connection::arm_deadline_timer(steady_clock::time_point at) {
  // Re-arming cancels the pending wait; its handler sees operation_aborted and leaves it be.
  deadline_armed_ = true;
  deadline_armed_for_ = at;
  deadline_timer_.expires_at(at);
  deadline_timer_.async_wait([weak_self = weak_from_this()](error_code ec) {
    auto self = weak_self.lock();
    if (!ec && self) self->expire_deadlines();
  });
}

void connection::expire_deadlines() {
  deadline_armed_ = false;
  const auto now = steady_clock::now();
  while (!deadlines_.empty()) {
    auto req = deadlines_.front();
    const bool done = req->phase == request::phase::finished || req->abandoned;
    if (!done && req->deadline > now) break;
    deadlines_.pop_front();
    if (done) continue;
    const bool sent = req->phase == request::phase::written;
    if (sent) {
      req->awaited_past_deadline = true;
      ++timed_out_in_flight_;
    } else if (state_ == state::connecting) {
      timed_out_while_connecting_ = true;
    }
    // May run the caller's handler inline, which may issue requests: re-read the list each time.
    fail(*req, error::request_timeout,
         fmt::format("no reply within {} ms ({})", to_ms(req->timeout),
                     sent ? "sent; it may still execute" : "not sent"),
         delivery::dispatch);
  }
  if (!deadlines_.empty() && !deadline_armed_) arm_deadline_timer(deadlines_.front()->deadline);
}

void connection::drop_finished_deadlines() {
  // An abandoned request (resent after it finished) has no deadline any more either.
  while (!deadlines_.empty() &&
         (deadlines_.front()->phase == request::phase::finished || deadlines_.front()->abandoned)) {
    deadlines_.pop_front();
  }
}

void connection::finish(request& req, error_code ec, resp::value&& reply, delivery how) {
  if (req.phase == request::phase::finished) return;
  const bool written = req.phase == request::phase::written;
  req.phase = request::phase::finished;
  drop_finished_deadlines();
  if (written && req.eval_fallback != nullptr && !req.abandoned) {
    // Its reply may still be NOSCRIPT, and the call must then still run as EVAL although nobody
    // waits for it (a release that timed out must not leave the key behind). Keep the bytes: they
    // may belong to the sink released below.
    if (!req.owned) {
      req.owned = std::make_shared<const std::string>(req.payload);
      req.payload = *req.owned;
    }
  } else {
    // The payload is not needed any more; a finished request may wait in queued_ for a while.
    req.payload = {};
    req.owned.reset();
  }
  if (req.abandoned) return;  // its caller or sink had their outcome long ago

  if (req.sink) {
    if (how == delivery::post) {
      asio::post(executor_, [sink = std::move(req.sink), tag = req.tag, ec,
                             reply = std::move(reply)]() mutable {
        sink->on_reply(tag, ec, std::move(reply));
      });
    } else {
      const auto sink = std::move(req.sink);
      sink->on_reply(req.tag, ec, reply);
    }
    return;
  }
  if (how == delivery::post) {
    req.caller->complete_posted(ec, std::move(reply));
  } else {
    req.caller->complete(ec, std::move(reply));
  }
}

void connection::fail(request& req, error_code ec, std::string_view why, delivery how) {
  resp::value reply;
  reply.kind = resp::type::simple_error;
  reply.text = fmt::format("{}: {}", name_, why);
  finish(req, ec, std::move(reply), how);
}

void connection::fail_all(error_code ec, std::string_view why) {
  // Swap first: completions are posted, but a failing request must not see itself re-queued.
  auto queued = std::move(queued_);
  auto in_flight = std::move(in_flight_);
  queued_.clear();
  in_flight_.clear();
  timed_out_in_flight_ = 0;  // their replies will never come
  deadlines_.clear();
  deadline_armed_ = false;
  deadline_timer_.cancel();
  for (auto& req : in_flight)
    fail(*req, ec, why, delivery::post);
  for (auto& req : queued)
    fail(*req, ec, why, delivery::post);
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
  if (options_.logger) options_.logger(level, message);
}

void connection::drop_requests() noexcept {
  // Without its loop the connection cannot work any more. Closed first, so that anything a
  // released sink sets off (a lease's best-effort release) fails at once instead of queueing.
  state_ = state::closed;
  deadline_armed_ = false;
  while (!deadlines_.empty())
    deadlines_.pop_back();
  while (!in_flight_.empty())
    in_flight_.pop_back();
  timed_out_in_flight_ = 0;
  while (!queued_.empty())
    queued_.pop_back();
}

asio::awaitable<void> connection::run(run_owner /*owner*/) {
  // Cancellation (close()) is observed through state_; awaits return errors instead of throwing.
  co_await asio::this_coro::throw_if_cancelled(false);
  try {
    while (state_ != state::closed) {
      state_ = state::connecting;
      timed_out_while_connecting_ = false;
      error_code request_error = co_await connect_with_timeout();
      if (state_ == state::closed) break;

      if (!request_error) {
        state_ = state::ready;
        reconnect_backoff_.reset();
        ++stats_.connects;
        last_read_ = steady_clock::now();
        log(log_level::info, fmt::format("{}: connected", name_));
        auto outcome = co_await (reader_loop() || writer_loop() || health_check_loop());
        if (state_ == state::closed) break;
        // Whatever broke the link, callers see one code: their request may or may not have run.
        request_error = error::connection_lost;
        (void)outcome;
      }

      transport_.close();
      parser_.reset();
      state_ = state::backoff;
      const auto delay = reconnect_backoff_.next(jitter_);
      fail_all(request_error, last_cause_);
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
  fail_all(asio::error::operation_aborted, "connection closed");
}

asio::awaitable<error_code> connection::connect_with_timeout() {
  asio::steady_timer timer(executor_, options_.connect_timeout);
  connect_stage_ = "resolving";
  auto outcome = co_await (connect_and_handshake() || timer.async_wait(use_tuple));
  if (outcome.index() == 0) co_return std::get<0>(outcome);
  transport_.close();
  set_last_error(error::connect_timeout,
                 fmt::format("connect timed out after {} ms while {}",
                             to_ms(options_.connect_timeout), connect_stage_));
  co_return error::connect_timeout;
}

asio::awaitable<error_code> connection::connect_and_handshake() {
  connect_stage_ = "connecting";
  if (auto ec = co_await transport_.connect(node_)) {
    set_last_error(ec, fmt::format("connect failed: {}", ec.message()));
    co_return ec;
  }
  parser_.reset();

  // All handshake commands go out in one write; their replies come back in the same order.
  struct step {
    std::string_view command;
    error failure;
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

  connect_stage_ = "waiting for the handshake";
  auto [write_error, written] = co_await transport_.async_write(asio::buffer(out), use_tuple);
  (void)written;
  if (write_error) {
    set_last_error(write_error, fmt::format("handshake write failed: {}", write_error.message()));
    co_return write_error;
  }
  for (const auto& s : steps) {
    resp::value reply;
    if (auto ec = co_await read_reply(reply)) co_return ec;
    if (reply.is_error()) {
      const error code = reply.error_code_word() == "NOAUTH" ? error::auth_failed : s.failure;
      set_last_error(code, fmt::format("{} failed: {}", s.command, reply.text));
      co_return code;
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
  auto space = parser_.prepare(read_chunk);
  if (space.empty()) {
    set_last_error(error::protocol_error, parser_.error_message());
    co_return error::protocol_error;
  }
  auto [read_error, n] =
      co_await transport_.async_read_some(asio::buffer(space.data(), space.size()), use_tuple);
  if (read_error) {
    set_last_error(read_error, read_error == asio::error::eof
                                   ? std::string("connection closed by the server")
                                   : fmt::format("read failed: {}", read_error.message()));
    co_return read_error;
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
      if (!deliver(reply)) co_return error::protocol_error;
      if (draining_ && in_flight_.empty() && queued_.empty()) close();
      // A completion ran inline and may have closed us.
      if (state_ != state::ready) co_return asio::error::operation_aborted;
    }
    if (ec) {
      set_last_error(ec, parser_.error_message());
      co_return ec;
    }
    if (auto read_error = co_await read_more()) co_return read_error;
  }
}

bool connection::deliver(resp::value& reply) {
  // RESP3 out-of-band data belongs to no request. The handshake stays on RESP2, so none is
  // expected.
  if (reply.kind == resp::type::push) return true;
  if (in_flight_.empty()) {
    set_last_error(error::protocol_error,
                   fmt::format("unsolicited reply {}", resp::to_debug_string(reply)));
    return false;
  }
  auto req = std::move(in_flight_.front());
  in_flight_.pop_front();
  ++stats_.replies;
  if (req->awaited_past_deadline) {
    req->awaited_past_deadline = false;
    --timed_out_in_flight_;
  }
  if (req->eval_fallback && reply.is_error() && reply.error_code_word() == "NOSCRIPT") {
    // The server's script cache is empty (restart, SCRIPT FLUSH): send the same call as EVAL,
    // which also caches the script for the next EVALSHA. The request keeps its deadline and its
    // caller; it is queued behind requests issued after it, which may thus execute first. One
    // that already finished (timed out, cancelled) is sent all the same, and its reply dropped.
    req->owned =
        std::make_shared<const std::string>(evalsha_to_eval(*req->eval_fallback, req->payload));
    req->payload = *req->owned;
    req->eval_fallback = nullptr;
    if (req->phase == request::phase::finished) req->abandoned = true;
    req->phase = request::phase::queued;
    queued_.push_back(std::move(req));
    wake_writer();
    return true;
  }
  if (req->phase == request::phase::finished || req->abandoned) {
    ++stats_.replies_dropped;
    return true;
  }
  req->eval_fallback = nullptr;  // answered: no fallback can be needed any more
  finish(*req, {}, std::move(reply), delivery::dispatch);
  return true;
}

asio::awaitable<error_code> connection::writer_loop() {
  for (;;) {
    write_buffer_.clear();
    std::uint64_t batch = 0;
    const auto now = steady_clock::now();
    while (!queued_.empty()) {
      auto req = std::move(queued_.front());
      queued_.pop_front();
      if (req->phase != request::phase::queued) continue;
      write_buffer_ += req->payload;
      if (!req->eval_fallback) {
        req->payload = {};
        req->owned.reset();
      }
      req->phase = request::phase::written;
      req->written_at = now;
      // In flight before the write completes: a reply cannot precede its request, and if the
      // write fails these are failed with the link.
      in_flight_.push_back(std::move(req));
      ++batch;
    }

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
    ++stats_.writes;
    stats_.requests_written += batch;
    stats_.bytes_written += n;
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
    if (in_flight_.empty()) continue;
    const auto waiting_since = std::max(last_read_, in_flight_.front()->written_at);
    if (steady_clock::now() - waiting_since > limit) {
      set_last_error(
          error::connection_lost,
          fmt::format("no reply for more than {} ms (server hung or stopped)", to_ms(limit)));
      co_return error::connection_lost;
    }
  }
}

}  // namespace redlock::detail
