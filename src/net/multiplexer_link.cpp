// multiplexer: what happens to the requests when the link comes, goes or closes, and the
// releases kept for the next link.
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

void multiplexer::on_connect_started() noexcept {
  connecting_ = true;
  timed_out_while_connecting_ = false;
}

void multiplexer::on_handshake_done(time_point now) {
  connecting_ = false;
  ++stats_.connects;
  requeue_kept_cleanups(now);
}

void multiplexer::on_connection_lost(error_code ec, std::string_view why, time_point now) {
  connecting_ = false;
  fail_all(ec, why, true, now);
}

void multiplexer::close(error_code ec, std::string_view why, time_point now) {
  connecting_ = false;
  closed_ = true;
  fail_all(ec, why, false, now);
}

void multiplexer::fail_all(error_code ec, std::string_view why, bool keep_cleanups,
                           time_point now) {
  // Moved out first: answers are posted, but a failing request must not see itself re-queued.
  request_list queued;
  request_list in_flight;
  queued.swap(queued_);
  in_flight.swap(in_flight_);
  queued_ahead_ = 0;
  timed_out_in_flight_ = 0;  // their replies will never come
  deadlines_.clear();
  reloading_.clear();
  // Oldest first, so that kept cleanups stay in the order they were issued.
  for (auto* requests : {&in_flight, &queued}) {
    while (!requests->empty()) {
      auto req = take_front(*requests);
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
    drop_list(kept_cleanups_);
  }
}

void multiplexer::drop_all() noexcept {
  // Closed first, so that anything a released sink sets off (a lease's best-effort release) fails
  // at once instead of queueing; one at a time, since that may call back into this object.
  closed_ = true;
  connecting_ = false;
  deadlines_.clear();
  drop_list(in_flight_);
  timed_out_in_flight_ = 0;
  drop_list(queued_);
  queued_ahead_ = 0;
  drop_list(kept_cleanups_);
}

// A cleanup that could not be delivered on this link waits for the next one. Delivered or not,
// its key cannot outlive the time the node first failed it plus the key's longest lifetime, so it
// is dropped after that; and beyond the bound the oldest go first (their keys expire soonest).
void multiplexer::keep_cleanup(request_ptr req, time_point now) {
  if (req->keep_until == time_point::max()) req->keep_until = now + req->deliver_for;
  if (now >= req->keep_until) {
    ++stats_.cleanups_dropped;
    return;
  }
  req->written = false;
  req->awaited_past_deadline = false;
  if (kept_cleanups_.size() >= max_pending_cleanups_) {
    if (!kept_cleanups_.empty()) take_front(kept_cleanups_).reset();  // the oldest goes
    ++stats_.cleanups_dropped;
    if (stats_.cleanups_dropped % 1000 == 1 && warn_) {
      warn_(
          fmt::format("{}: more than {} releases wait for the node; the oldest are dropped and "
                      "their keys left to expire",
                      name_, max_pending_cleanups_));
    }
    if (max_pending_cleanups_ == 0) return;
  }
  kept_cleanups_.push_back(req.release());
  ++stats_.cleanups_kept;
}

// Right after a handshake: the kept cleanups go first. Everything queued meanwhile was issued
// after them, and on each node a release must run no earlier than its place in that order.
void multiplexer::requeue_kept_cleanups(time_point now) {
  if (kept_cleanups_.empty()) return;
  request_list kept;
  kept.swap(kept_cleanups_);
  kept.remove_and_dispose_if([&](const request& req) { return now >= req.keep_until; },
                             [&](request* expired) {
                               ++stats_.cleanups_dropped;
                               request_ptr dropped(expired);
                             });
  queued_.splice(queued_.begin(), kept);
}

void multiplexer::queue_ahead(request_ptr req) {
  queued_.insert(std::next(queued_.begin(), static_cast<std::ptrdiff_t>(queued_ahead_)),
                 req.release());
  ++queued_ahead_;
}

void multiplexer::reload_script(const script& lua) {
  if (std::find(reloading_.begin(), reloading_.end(), &lua) != reloading_.end()) return;
  reloading_.push_back(&lua);
  ++stats_.scripts_reloaded;
  auto req = make_request();
  auto bytes = std::make_shared<std::string>();
  resp::encode_command(*bytes, {"SCRIPT", "LOAD", lua.source()});
  req->own(std::move(bytes));
  req->reloads = &lua;
  queue_ahead(std::move(req));
}

bool multiplexer::reply_overdue(time_point last_read, std::chrono::milliseconds limit,
                                time_point now) const noexcept {
  if (in_flight_.empty()) return false;
  const auto waiting_since = std::max(last_read, in_flight_.front().written_at);
  return now - waiting_since > limit;
}
}  // namespace redlock::detail
