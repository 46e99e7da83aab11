#include "net/multiplexer.hpp"

#include "redlock/error.hpp"
#include "resp/encoder.hpp"
#include "resp/script.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

reply_sink& ignore_replies() noexcept {
  class ignored_replies final : public reply_sink {
   public:
    ignored_replies() noexcept : reply_sink(false) {}
    void on_reply(std::size_t, const error_code&, const resp::value&) override {}
  };
  static ignored_replies sink;
  return sink;
}

// Recycles request objects: a lock operation issues one request per node, and allocating each
// one showed up as a large share of the client's CPU. Keeps at most `max_spare` idle objects, in a
// list linked through the objects themselves: returning one stores a pointer, and the path that
// every reply takes calls nothing.
class multiplexer::request_pool {
 public:
  request_pool() = default;
  request_pool(const request_pool&) = delete;
  request_pool& operator=(const request_pool&) = delete;
  ~request_pool() {
    while (spare_ != nullptr)
      delete std::exchange(spare_, spare_->next_spare);
  }

  request_ptr make(std::uint64_t id) {
    request* req = spare_;
    if (req == nullptr) {
      req = new request(*this);
    } else {
      spare_ = req->next_spare;
      --spares_;
    }
    req->id = id;
    return request_ptr(req);
  }

  // Its owner dropped it. Whatever the request still holds (an unanswered caller's handler when
  // the connection is destroyed, a sink reference) is released first.
  void put(request* req) noexcept {
    // Most requests come here holding nothing: answered, their sink reference was handed over
    // with the answer, and a library request's bytes are borrowed.
    if (req->owned || req->caller || req->sink) return put_holding(req);
    req->deadline_hook::unlink();
    req->payload = {};
    req->tag = 0;
    req->eval_fallback = nullptr;
    req->noscript_is_final = false;
    req->reply_is_push = false;
    req->deadline = time_point::max();
    req->timeout = std::chrono::milliseconds(0);
    req->written = false;
    req->answered = false;
    req->resent = false;
    req->deliver_for = std::chrono::milliseconds(0);
    req->keep_until = time_point::max();
    req->awaited_past_deadline = false;
    req->reloads = nullptr;
    if (spares_ == max_spare) return drop(req);
    req->next_spare = spare_;
    spare_ = req;
    ++spares_;
  }

 private:
  [[gnu::noinline]] void put_holding(request* req) noexcept {
    // Out of the deadline list before anything it holds is released, which may call back into
    // the multiplexer.
    req->deadline_hook::unlink();
    req->owned.reset();
    req->caller.reset();
    req->sink.reset();
    put(req);
  }
  [[gnu::noinline]] static void drop(request* req) noexcept { delete req; }

  static constexpr std::size_t max_spare = 4096;
  request* spare_ = nullptr;
  std::size_t spares_ = 0;
};

void multiplexer::request_ptr::to_pool(request* req) noexcept {
  req->pool->put(req);
}

multiplexer::request_ptr multiplexer::take_front(request_list& list) noexcept {
  request_ptr req(&list.front());
  list.pop_front();
  return req;
}

void multiplexer::drop_list(request_list& list) noexcept {
  // One at a time, newest first: releasing a request's handler or sink may call back into the
  // multiplexer, which must find every list consistent.
  while (!list.empty()) {
    request_ptr req(&list.back());
    list.pop_back();
  }
}

multiplexer::multiplexer(std::string name, std::size_t max_pending_cleanups, answer_fn answer,
                         warn_fn warn)
    : name_(std::move(name)),
      max_pending_cleanups_(max_pending_cleanups),
      answer_(std::move(answer)),
      warn_(std::move(warn)),
      pool_(std::make_unique<request_pool>()) {}

multiplexer::~multiplexer() {
  deadlines_.clear();
  drop_list(in_flight_);
  drop_list(queued_);
  drop_list(kept_cleanups_);
}

multiplexer::request_ptr multiplexer::make_request() {
  return pool_->make(++last_request_id_);
}

multiplexer::request_ptr multiplexer::make_request(shared_payload payload, reply_sink& sink,
                                                   std::size_t tag) {
  auto req = make_request();
  req->own(std::move(payload));
  req->sink = sink_ref(&sink);
  req->tag = tag;
  return req;
}

multiplexer::request_ptr multiplexer::make_request(std::string_view borrowed, reply_sink& sink,
                                                   std::size_t tag) {
  auto req = make_request();
  // Copied by answer() if the request may still be written or resent after its sink is gone.
  req->payload = borrowed;
  req->sink = sink_ref(&sink);
  req->tag = tag;
  return req;
}

void multiplexer::apply(request& req, const request_options& options) const noexcept {
  req.timeout = options.timeout;
  req.eval_fallback = options.eval_fallback;
  req.noscript_is_final = options.noscript_is_final;
  req.reply_is_push = options.reply_is_push;
  req.deliver_for = options.deliver_for;
}

bool multiplexer::add(request_ptr req, const request_options& options, time_point now) {
  apply(*req, options);
  if (options.skip_if_unresponsive && unresponsive()) {
    skip_unresponsive(*req);
    return false;
  }
  if (options.timeout > std::chrono::milliseconds(0)) {
    req->deadline = now + options.timeout;
    track_deadline(*req);
  }
  queued_.push_back(req.release());
  return true;
}

void multiplexer::skip_unresponsive(request& req) {
  ++stats_.skipped_unresponsive;
  // Behind a stalled connect, the stage it stalled in (and what that may mean) is the cause.
  answer_failure(req, error::node_unresponsive,
                 connecting_ ? fmt::format("not sent: a request already timed out waiting for "
                                           "the connection while {}",
                                           stalled_while_)
                             : "not sent: the node has not answered a request that timed out",
                 delivery::post);
}

void multiplexer::fail_unsent(request_ptr req, const request_options& options, error_code ec,
                              std::string_view why, time_point now) {
  apply(*req, options);
  // Never answered inside the initiating function: posted.
  answer_failure(*req, ec, why, delivery::post);
  if (req->cleanup() && !closed_) keep_cleanup(std::move(req), now);
}

void multiplexer::fail_while_down(request_ptr req, const request_options& options,
                                  error_code permanent_failure, std::string_view last_cause,
                                  time_point now) {
  if (permanent_failure) {
    fail_unsent(std::move(req), options, permanent_failure, fmt::format("not sent: {}", last_cause),
                now);
  } else {
    fail_unsent(std::move(req), options, error::not_connected,
                fmt::format("node is down, reconnecting (last error: {})", last_cause), now);
  }
}

void multiplexer::cancel(std::uint64_t id, asio::cancellation_type type) {
  using ct = asio::cancellation_type;
  auto has_id = [id](const request& r) { return r.id == id; };
  auto found = std::find_if(queued_.begin(), queued_.end(), has_id);
  if (found == queued_.end()) {
    found = std::find_if(in_flight_.begin(), in_flight_.end(), has_id);
    if (found == in_flight_.end()) return;  // answered and gone
  }
  request& req = *found;
  // Posted: we are inside the caller's cancellation slot, and completing clears that slot, which
  // would destroy the very handler that is running. So the request stays where it is.
  if (!req.written) {
    answer_failure(req, asio::error::operation_aborted, "cancelled before it was sent",
                   delivery::post);
  } else if ((type & (ct::terminal | ct::partial)) != ct::none) {
    answer_failure(req, asio::error::operation_aborted,
                   "cancelled after it was sent (it may have executed; its reply will be dropped)",
                   delivery::post);
  }
}

std::size_t multiplexer::prepare_write(write_buffer& out, time_point now) {
  out.clear();
  std::size_t batch = 0;
  queued_ahead_ = 0;  // everything queued is taken now
  while (!queued_.empty()) {
    auto req = take_front(queued_);
    if (!req->wanted()) continue;
    if (now >= req->keep_until) {  // a kept cleanup whose key has expired meanwhile
      ++stats_.cleanups_dropped;
      continue;
    }
    out.append(req->payload);
    if (!req->may_resend()) {
      req->payload = {};
      req->owned.reset();
    }
    req->written = true;
    req->written_at = now;
    // In flight before the write completes: a reply cannot precede its request, and if the write
    // fails these are failed with the link.
    in_flight_.push_back(req.release());
    ++batch;
  }
  if (batch > 0) ever_written_ = true;
  return batch;
}

void multiplexer::commit_write(std::size_t requests, std::size_t bytes) noexcept {
  ++stats_.writes;
  stats_.requests_written += requests;
  stats_.bytes_written += bytes;
}

bool multiplexer::takes_push(const resp::value& push) const noexcept {
  if (in_flight_.empty() || !in_flight_.front().reply_is_push || push.elements.empty())
    return false;
  const auto& kind = push.elements.front().text;
  return kind == "ssubscribe" || kind == "subscribe";
}

bool multiplexer::consume_reply(resp::value& reply) {
  // Nearly every reply: one that is not an error, to one of the library's own requests that
  // nothing has answered yet. Its sink reads it right here, with the request back in the pool
  // first (the sink may issue the next ones). This path calls nothing but the sink; every other
  // reply takes consume_any_reply, which decides the same for these.
  if (in_flight_.empty() || reply.kind == resp::type::push || reply.is_error())
    return consume_any_reply(reply);
  request& req = in_flight_.front();
  if (!req.sink || req.answered || req.awaited_past_deadline || req.reloads != nullptr)
    return consume_any_reply(reply);
  in_flight_.pop_front();
  ++stats_.replies;
  req.answered = true;
  req.eval_fallback = nullptr;
  req.deliver_for = std::chrono::milliseconds(0);
  const sink_ref sink = std::move(req.sink);
  const std::size_t tag = req.tag;
  pool_->put(&req);
  sink->on_reply(tag, {}, reply);
  return true;
}

bool multiplexer::consume_any_reply(resp::value& reply) {
  // RESP3 out-of-band data belongs to no request. Only subscriber connections switch to RESP3, and
  // they hand pushes to their own handler before this.
  if (reply.kind == resp::type::push && !takes_push(reply)) return true;
  if (in_flight_.empty()) return false;
  auto req = take_front(in_flight_);
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
      req->own(std::make_shared<const std::string>(evalsha_to_eval(lua, req->payload)));
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
  if (req->sink && reply.kind != resp::type::simple_error && req->reloads == nullptr) {
    // Nearly every reply: one of the library's own requests answered by the node. Its sink reads
    // it right here, with the request back in the pool first (the sink may issue the next ones).
    // Only an error reply may need the issuer's review (answer_fn: a cluster redirect).
    req->answered = true;
    const sink_ref sink = std::move(req->sink);
    const std::size_t tag = req->tag;
    req.reset();
    sink->on_reply(tag, {}, reply);
    return true;
  }
  answer(*req, {}, std::move(reply), delivery::dispatch);
  return true;
}

// Deadlines are kept in one list sorted by time, watched by the connection's one timer: a timer
// per request would cost a heap insertion, a lock and often a timerfd update for every request.
// Requests usually share one timeout, so a new deadline almost always goes at the back.
void multiplexer::track_deadline(request& req) {
  auto later = deadlines_.end();
  while (later != deadlines_.begin() && std::prev(later)->deadline > req.deadline)
    --later;
  deadlines_.insert(later, req);
}

void multiplexer::expire_deadlines(time_point now, std::string_view connect_stage) {
  // One at a time, earliest first, each taken out of the list before it is answered. A sink
  // answered here may issue requests (a failed round's cleanup), or close the connection, which
  // answers and frees the rest: so nothing is held across an answer, and the list is read anew.
  while (!deadlines_.empty() && deadlines_.front().deadline <= now) {
    request& req = deadlines_.front();
    deadlines_.pop_front();
    if (req.written) {
      req.awaited_past_deadline = true;
      ++timed_out_in_flight_;
    } else if (connecting_) {
      timed_out_while_connecting_ = true;
      stalled_while_ = connect_stage;
    }
    std::string why;
    if (req.written) {
      why = fmt::format("no reply within {} ms (sent; it may still execute)", req.timeout.count());
    } else if (connecting_) {
      why = fmt::format("not sent within {} ms: still {}", req.timeout.count(), connect_stage);
    } else {
      why =
          fmt::format("not sent within {} ms: queued behind earlier requests", req.timeout.count());
    }
    answer_failure(req, error::request_timeout, why, delivery::dispatch);
  }
}

void multiplexer::answer(request& req, error_code ec, resp::value&& reply, delivery how) {
  if (req.answered) return;
  req.answered = true;
  req.deadline_hook::unlink();
  if (req.written ? !req.may_resend() : !req.wanted()) {
    // Never to be written (again): the bytes are not needed, and may belong to the sink.
    req.payload = {};
    req.owned.reset();
  } else if (!req.owned) {
    // It may still be written or resent after the sink, which owns these bytes, is gone.
    req.own(std::make_shared<const std::string>(req.payload));
  }

  if (req.reloads != nullptr) {
    // Answered or failed: a later NOSCRIPT may load the script again.
    std::erase(reloading_, req.reloads);
    return;
  }
  answer_(req, ec, std::move(reply), how);
}

void multiplexer::answer_failure(request& req, error_code ec, std::string_view why, delivery how) {
  if (req.answered) return;
  resp::value reply;
  reply.kind = resp::type::simple_error;
  reply.text = fmt::format("{}: {}", name_, why);
  answer(req, ec, std::move(reply), how);
}

}  // namespace redlock::detail
