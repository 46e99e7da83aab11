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
#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <exception>
#include <variant>
#include <vector>

#include "completion.hpp"
#include "log.hpp"
#include "net/script.hpp"
#include "redlock/error.hpp"
#include "resp/encoder.hpp"
#include "text.hpp"

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

// Connect failures that the same attempt would meet again until someone changes a configuration.
bool is_permanent(error_code ec) {
  return ec == error::auth_failed || ec == error::select_failed || ec == error::permission_denied ||
         ec == error::protocol_error || ec == error::invalid_argument;
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

struct connection::request {
  explicit request(request_pool& owner) noexcept : pool(&owner) {}

  request_pool* pool;
  unsigned refs = 0;
  std::uint64_t id = 0;  // unique per connection; a caller's cancellation handler finds it by id

  // The encoded command. `owned` keeps a caller's bytes alive; a library request's bytes belong to
  // its sink, which the request keeps alive until it is answered. Dropped once nothing can need
  // them any more (written and not to be resent).
  std::string_view payload;
  shared_payload owned;
  std::optional<completion<error_code, resp::value>> caller;  // a caller's request, or
  sink_ref sink;                                              // one of the library's own
  std::size_t tag = 0;
  const script* eval_fallback = nullptr;
  bool noscript_is_final = false;
  steady_clock::time_point deadline = steady_clock::time_point::max();
  std::chrono::milliseconds timeout{0};
  // Queued (in queued_ or kept_cleanups_) until written, then in in_flight_ until its reply.
  bool written = false;
  // Its caller or sink has had its one outcome; a reply that still comes is read and dropped.
  bool answered = false;
  // Resent as EVAL after NOSCRIPT: the call has not run yet, and runs even if nobody waits.
  bool resent = false;
  // request_options::deliver_for; keep_until is set when a link first fails the cleanup.
  std::chrono::milliseconds deliver_for{0};
  steady_clock::time_point keep_until = steady_clock::time_point::max();
  // Timed out after it was written; counted in connection::timed_out_in_flight_ until its reply.
  bool awaited_past_deadline = false;
  steady_clock::time_point written_at{};
  // The connection's own SCRIPT LOAD of this script after a NOSCRIPT: no caller, no sink.
  const script* reloads = nullptr;

  bool cleanup() const noexcept { return deliver_for > std::chrono::milliseconds(0); }
  // Whether the writer still sends it.
  bool wanted() const noexcept { return !answered || cleanup() || resent; }
  // Whether its bytes may be sent again once written: after NOSCRIPT, or after a broken link.
  bool may_resend() const noexcept {
    return cleanup() || (eval_fallback != nullptr && !noscript_is_final);
  }
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

  // The last reference is gone. Whatever the request still holds (an unanswered caller's handler
  // when the connection is destroyed, a sink reference) is released here.
  void put(request* req) noexcept {
    req->payload = {};
    req->owned.reset();
    req->caller.reset();
    req->sink.reset();
    req->eval_fallback = nullptr;
    req->noscript_is_final = false;
    req->deadline = steady_clock::time_point::max();
    req->timeout = std::chrono::milliseconds(0);
    req->written = false;
    req->answered = false;
    req->resent = false;
    req->deliver_for = std::chrono::milliseconds(0);
    req->keep_until = steady_clock::time_point::max();
    req->awaited_past_deadline = false;
    req->reloads = nullptr;
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

resp::parser_limits limits_for(const reply_limits& replies) {
  resp::parser_limits limits;
  limits.max_depth = replies.max_depth;
  limits.max_reply_memory = replies.max_reply_memory;
  // What the memory bound implies for the other limits: no piece of a reply can be larger than
  // the reply may take in memory, nor hold more elements than fit in it.
  limits.max_reply_size = replies.max_reply_memory;
  limits.max_bulk_length = replies.max_reply_memory;
  limits.max_line_length = std::min(limits.max_line_length, replies.max_reply_memory);
  limits.max_aggregate_size = replies.max_reply_memory / sizeof(resp::value);
  // The reader parses every complete reply before it reads again, so what is buffered then is at
  // most one unfinished reply; a read adds one chunk.
  limits.max_buffer = replies.max_reply_memory + 2 * read_chunk;
  return limits;
}

connection_options connection_options::from(const client_options& options) {
  connection_options result;
  result.connect_timeout = options.connect_timeout;
  result.reconnect = options.reconnect;
  result.health_check_timeout = options.health_check_timeout;
  result.client_name = options.client_name;
  result.logger = options.logger;
  result.limits = limits_for(options.replies);
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
  fail_all(asio::error::operation_aborted, "connection closed", false);
}

bool connection::idle() const noexcept {
  return queued_.empty() && in_flight_.empty() && kept_cleanups_.empty();
}

void connection::close_when_idle(std::chrono::milliseconds bound) {
  if (state_ == state::closed) return;
  if (idle() || state_ == state::idle) return close();
  // Down, with nothing that a reconnect would deliver: the requests there fail as it is.
  if (state_ == state::backoff && kept_cleanups_.empty()) return close();
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
  // The sink's bytes: a request that must outlive its answer (a cleanup answered before it was
  // delivered) copies them when it is answered.
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
  req->noscript_is_final = options.noscript_is_final;
  req->deliver_for = options.deliver_for;

  // Never answer inside the initiating function: failures here are posted.
  if (state_ == state::closed) {
    answer_failure(*req, asio::error::operation_aborted, "connection closed", delivery::post);
    return;
  }
  if (state_ == state::backoff) {
    if (permanent_failure_) {
      answer_failure(*req, permanent_failure_, fmt::format("not sent: {}", last_cause_),
                     delivery::post);
    } else {
      answer_failure(*req, error::not_connected,
                     fmt::format("node is down, reconnecting (last error: {})", last_cause_),
                     delivery::post);
    }
    if (req->cleanup()) keep_cleanup(std::move(req), now);
    return;
  }
  if (options.skip_if_unresponsive && unresponsive()) {
    ++stats_.skipped_unresponsive;
    answer_failure(*req, error::node_unresponsive,
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
    if (found == in_flight_.end()) return;  // answered and gone
  }
  request_ptr req = *found;
  // Posted: we are inside the caller's cancellation slot, and completing clears that slot, which
  // would destroy the very handler that is running.
  if (!req->written) {
    answer_failure(*req, asio::error::operation_aborted, "cancelled before it was sent",
                   delivery::post);
  } else if ((type & (ct::terminal | ct::partial)) != ct::none) {
    answer_failure(*req, asio::error::operation_aborted,
                   "cancelled after it was sent (it may have executed; its reply will be dropped)",
                   delivery::post);
  }
}

// Deadlines are kept in one list sorted by time, watched by one timer: a timer per request would
// cost a heap insertion, a lock and often a timerfd update for every request. Requests usually
// share one timeout, so a new deadline almost always goes at the back.
//
// Invariant: while deadlines_ holds an unanswered request, the timer is armed no later than the
// earliest deadline in it, so no deadline fires late.
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
  // Everything due is taken out and the timer re-armed for what is left before anyone is
  // answered: a sink answered here may issue requests at once (a failed round's cleanup), and
  // those must not decide when the requests already waiting time out.
  boost::container::small_vector<request_ptr, 8> due;
  while (!deadlines_.empty()) {
    request_ptr& front = deadlines_.front();
    if (!front->answered) {
      if (front->deadline > now) break;
      due.push_back(std::move(front));
    }
    deadlines_.pop_front();
  }
  if (!deadlines_.empty()) arm_deadline_timer(deadlines_.front()->deadline);
  for (auto& req : due) {
    if (req->answered) continue;  // the link failed meanwhile, from an earlier answer
    if (req->written) {
      req->awaited_past_deadline = true;
      ++timed_out_in_flight_;
    } else if (state_ == state::connecting) {
      timed_out_while_connecting_ = true;
    }
    std::string why;
    if (req->written) {
      why = fmt::format("no reply within {} ms (sent; it may still execute)", to_ms(req->timeout));
    } else if (state_ == state::connecting) {
      why = fmt::format("not sent: still {} after {} ms", connect_stage_, to_ms(req->timeout));
    } else {
      why =
          fmt::format("not sent within {} ms: queued behind earlier requests", to_ms(req->timeout));
    }
    answer_failure(*req, error::request_timeout, why, delivery::dispatch);
  }
}

void connection::drop_answered_deadlines() {
  while (!deadlines_.empty() && deadlines_.front()->answered)
    deadlines_.pop_front();
}

void connection::answer(request& req, error_code ec, resp::value&& reply, delivery how) {
  if (req.answered) return;
  req.answered = true;
  drop_answered_deadlines();
  if (req.written ? !req.may_resend() : !req.wanted()) {
    // Never to be written (again): the bytes are not needed, and may belong to the sink.
    req.payload = {};
    req.owned.reset();
  } else if (!req.owned) {
    // It may still be written or resent after the sink, which owns these bytes, is gone.
    req.owned = std::make_shared<const std::string>(req.payload);
    req.payload = *req.owned;
  }

  if (req.reloads != nullptr) {
    // Answered or failed: a later NOSCRIPT may load the script again.
    std::erase(reloading_, req.reloads);
    return;
  }
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

void connection::answer_failure(request& req, error_code ec, std::string_view why, delivery how) {
  if (req.answered) return;
  resp::value reply;
  reply.kind = resp::type::simple_error;
  reply.text = fmt::format("{}: {}", name_, why);
  answer(req, ec, std::move(reply), how);
}

void connection::fail_all(error_code ec, std::string_view why, bool keep_cleanups) {
  // Moved out first: answers are posted, but a failing request must not see itself re-queued.
  auto queued = std::move(queued_);
  auto in_flight = std::move(in_flight_);
  queued_.clear();
  in_flight_.clear();
  queued_ahead_ = 0;
  timed_out_in_flight_ = 0;  // their replies will never come
  deadlines_.clear();
  deadline_armed_ = false;
  deadline_timer_.cancel();
  reloading_.clear();
  const auto now = steady_clock::now();
  // Oldest first, so that kept cleanups stay in the order they were issued.
  for (auto* requests : {&in_flight, &queued}) {
    for (auto& req : *requests) {
      answer_failure(*req, ec, why, delivery::post);
      if (req->cleanup()) {
        if (keep_cleanups) {
          keep_cleanup(std::move(req), now);
        } else {
          ++stats_.cleanups_dropped;
        }
      }
    }
  }
  if (!keep_cleanups) {
    stats_.cleanups_dropped += kept_cleanups_.size();
    kept_cleanups_.clear();
  }
}

// A cleanup that could not be delivered on this link waits for the next one. Delivered or not,
// its key cannot outlive the time the node first failed it plus the key's longest lifetime, so it
// is dropped after that; and beyond the bound the oldest go first (their keys expire soonest).
void connection::keep_cleanup(request_ptr req, steady_clock::time_point now) {
  if (req->keep_until == steady_clock::time_point::max()) req->keep_until = now + req->deliver_for;
  if (now >= req->keep_until) {
    ++stats_.cleanups_dropped;
    return;
  }
  req->written = false;
  req->awaited_past_deadline = false;
  if (kept_cleanups_.size() >= options_.max_pending_cleanups) {
    kept_cleanups_.pop_front();
    ++stats_.cleanups_dropped;
    if (stats_.cleanups_dropped % 1000 == 1) {
      log(log_level::warning,
          fmt::format("{}: more than {} releases wait for the node; the oldest are dropped and "
                      "their keys left to expire",
                      name_, options_.max_pending_cleanups));
    }
  }
  kept_cleanups_.push_back(std::move(req));
  ++stats_.cleanups_kept;
}

// Right after a handshake: the kept cleanups go first. Everything queued meanwhile was issued
// after them, and on each node a release must run no earlier than its place in that order.
void connection::requeue_kept_cleanups() {
  if (kept_cleanups_.empty()) return;
  const auto now = steady_clock::now();
  auto kept = std::move(kept_cleanups_);
  kept_cleanups_.clear();
  std::erase_if(kept, [&](const request_ptr& req) {
    const bool expired = now >= req->keep_until;
    if (expired) ++stats_.cleanups_dropped;
    return expired;
  });
  queued_.insert(queued_.begin(), std::make_move_iterator(kept.begin()),
                 std::make_move_iterator(kept.end()));
  wake_writer();
}

void connection::queue_ahead(request_ptr req) {
  queued_.insert(queued_.begin() + static_cast<std::ptrdiff_t>(queued_ahead_), std::move(req));
  ++queued_ahead_;
  wake_writer();
}

void connection::reload_script(const script& lua) {
  if (std::find(reloading_.begin(), reloading_.end(), &lua) != reloading_.end()) return;
  reloading_.push_back(&lua);
  ++stats_.scripts_reloaded;
  auto req = pool_->make(++last_request_id_);
  const std::string_view command[] = {"SCRIPT", "LOAD", lua.source()};
  req->owned = encode(command);
  req->payload = *req->owned;
  req->reloads = &lua;
  queue_ahead(std::move(req));
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
  while (!deadlines_.empty())
    deadlines_.pop_back();
  while (!in_flight_.empty())
    in_flight_.pop_back();
  timed_out_in_flight_ = 0;
  while (!queued_.empty())
    queued_.pop_back();
  queued_ahead_ = 0;
  while (!kept_cleanups_.empty())
    kept_cleanups_.pop_back();
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

      // Only a failure of the handshake itself can be permanent: a protocol error later on
      // breaks one link, not the node's configuration.
      permanent_failure_ = is_permanent(request_error) ? request_error : error_code{};
      if (!request_error) {
        state_ = state::ready;
        reconnect_backoff_.reset();
        ++stats_.connects;
        last_read_ = steady_clock::now();
        log(log_level::info, fmt::format("{}: connected", name_));
        requeue_kept_cleanups();
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
      // Answers are posted: whoever they set off (a failed round's cleanup) finds the node down
      // and its cleanup kept for the next connection.
      fail_all(request_error, last_cause_, true);
      if (draining_ && idle()) {
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
  fail_all(asio::error::operation_aborted, "connection closed", false);
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
    set_last_error(write_error, fmt::format("handshake write failed: {}", write_error.message()));
    co_return write_error;
  }
  for (const auto& s : steps) {
    resp::value reply;
    if (auto ec = co_await read_reply(reply)) {
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
      if (!deliver(reply)) co_return error::protocol_error;
      if (draining_ && idle()) close();
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
    // The script cache was flushed, and the call did not run.
    const script& lua = *req->eval_fallback;
    req->eval_fallback = nullptr;
    if (!req->noscript_is_final) {
      // Send the same call as EVAL, which also caches the script for the next EVALSHA. It goes
      // ahead of everything not written yet, so it keeps its place among those; only requests
      // written after it and before this reply have overtaken it. It keeps its deadline and its
      // caller, and is sent even if its caller has given up (a release must still run).
      req->owned = std::make_shared<const std::string>(evalsha_to_eval(lua, req->payload));
      req->payload = *req->owned;
      req->resent = true;
      req->written = false;
      queue_ahead(std::move(req));
      return true;
    }
    // The NOSCRIPT is this request's answer; later calls of the script need it cached again.
    reload_script(lua);
  }
  if (req->answered) {
    ++stats_.replies_dropped;
    return true;
  }
  // Done: no fallback and no further delivery can be needed, so the bytes need not be kept.
  req->eval_fallback = nullptr;
  req->deliver_for = std::chrono::milliseconds(0);
  answer(*req, {}, std::move(reply), delivery::dispatch);
  return true;
}

asio::awaitable<error_code> connection::writer_loop() {
  for (;;) {
    write_buffer_.clear();
    std::uint64_t batch = 0;
    const auto now = steady_clock::now();
    queued_ahead_ = 0;  // everything queued is taken now
    while (!queued_.empty()) {
      auto req = std::move(queued_.front());
      queued_.pop_front();
      if (!req->wanted()) continue;
      if (now >= req->keep_until) {  // a kept cleanup whose key has expired meanwhile
        ++stats_.cleanups_dropped;
        continue;
      }
      write_buffer_ += req->payload;
      if (!req->may_resend()) {
        req->payload = {};
        req->owned.reset();
      }
      req->written = true;
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
