#include "nodes/sentinel/router.hpp"

#include "clock.hpp"
#include "redlock/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

// Sending a sentinel node's requests to its master, in order (sentinel_node.hpp).

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;

namespace {

// One request sent to the master, ticket `id_` of the lane: reads its answer for signs that the
// master moved before the operation's sink sees it. `request_` holds what a resend needs; its sink
// is the operation's.
class master_request final : public reply_sink {
 public:
  using waiting_request = sentinel_router::waiting_request;
  using lane_ticket = sentinel_router::lane_ticket;

  master_request(std::shared_ptr<sentinel_router> router, waiting_request request, lane_ticket id)
      : router_(std::move(router)), request_(std::move(request)), id_(id) {}

  void on_reply(std::size_t, const error_code& ec, const resp::value& reply) override {
    if (ec) {
      const auto& deadline = request_.deadline;
      if (may_send_again(ec, request_.rules) && deadline && request_.attempts < max_attempts &&
          lock_clock::now() < *deadline) {
        ++request_.attempts;
        request_.unreachable = reply.text;
        request_.payload = request_.payload.copied();
        return router_->send_after_resolution(id_, std::move(request_));
      }
      if (ec == error::connection_lost || sent_nowhere(ec)) router_->master_in_doubt(false);
      return answer(ec, reply);
    }
    if (reply.is_error() && reply.error_code_word() == "READONLY") {
      // A master demoted to replica: the vote fails, and the sentinels are asked again.
      router_->master_in_doubt(false);
    }
    answer(ec, reply);
  }

  void last_reference_dropped() noexcept override { delete this; }

 private:
  static constexpr unsigned max_attempts = 3;

  void answer(const error_code& ec, const resp::value& reply) {
    // Out of the lane first: what waited behind it may go, ahead of what its answer sets off.
    router_->settle(id_);
    request_.sink->on_reply(request_.tag, ec, reply);
  }

  std::shared_ptr<sentinel_router> router_;
  waiting_request request_;
  lane_ticket id_;
};

}  // namespace

sentinel_router::sentinel_router(asio::any_io_executor executor, node_config config,
                                 connection_options settings, std::shared_ptr<peer_registry> peers,
                                 std::size_t index)
    : executor_(std::move(executor)),
      config_(std::move(config)),
      settings_(std::move(settings)),
      peers_(std::move(peers)),
      index_(index),
      sentinels_(address_and_seeds(config_)),
      lanes_(executor_),
      resolution_(executor_, min_resolve_interval) {
  settings_.require_master = true;
}

void sentinel_router::exec(const lock_node::request& what, payload_ref payload, reply_sink& sink,
                           std::size_t tag, steady_clock::time_point now) {
  if (closing_) {
    return fail_later(sink_ref(&sink), tag, asio::error::operation_aborted,
                      fmt::format("{}: the client is shutting down", config_.address()));
  }
  std::optional<steady_clock::time_point> deadline;
  if (what.rules.timeout.count() > 0) deadline = now + what.rules.timeout;
  // Before the first answer of a sentinel no route is known: the request waits for one.
  std::optional<std::uint64_t> route;
  if (master_) route = master_generation_;
  const auto request = [&](payload_ref bytes) {
    return waiting_request{.payload = std::move(bytes),
                           .rules = what.rules,
                           .replicas = what.replicas,
                           .sink = sink_ref(&sink),
                           .tag = tag,
                           .deadline = deadline,
                           .attempts = 0,
                           .unreachable = {}};
  };
  const auto admitted = lanes_.admit(0, route, [&] { return request(payload.copied()); });
  if (admitted.go) return send(admitted.id, request(payload), now);
  watch_waiting();
  if (!master_) resolve_soon();
}

void sentinel_router::send(lane_ticket id, waiting_request request, steady_clock::time_point now) {
  request_options sent = request.rules;
  if (request.deadline) {
    // A request sent again keeps its first deadline; a cleanup is still written after it.
    sent.timeout = std::max(std::chrono::ceil<std::chrono::milliseconds>(*request.deadline - now),
                            std::chrono::milliseconds(1));
  }
  const auto payload = request.payload;
  const lock_node::request forwarded{.key = {}, .rules = sent, .replicas = request.replicas};
  sink_ref watched(new master_request(shared_from_this(), std::move(request), id));
  if (payload.owned) {
    master_->exec(forwarded, payload.owned, *watched.get(), 0, now);
  } else {
    master_->exec(forwarded, payload.bytes, *watched.get(), 0, now);
  }
}

void sentinel_router::send_after_resolution(lane_ticket id, waiting_request request) {
  if (closing_) {
    lanes_.settle(0, id);
    return fail_later(std::move(request.sink), request.tag, asio::error::operation_aborted,
                      fmt::format("{}: the client is shutting down", config_.address()));
  }
  lanes_.send_again(0, id, std::move(request), decltype(lanes_)::resend::after_new_routes);
  watch_waiting();
  resolve_soon();
}

void sentinel_router::send_ready() {
  if (sending_ready_ || !master_ || !lanes_.may_have_ready()) return;
  sending_ready_ = true;
  const auto now = lock_clock::now();
  while (auto go = lanes_.next([this](std::uint32_t) { return master_generation_; }))
    send(go->id, std::move(go->request), now);
  sending_ready_ = false;
}

void sentinel_router::watch_waiting() {
  lanes_.expire(
      [this](std::uint32_t, waiting_request& request) {
        if (!request.unreachable.empty()) {
          fail_later(std::move(request.sink), request.tag, make_error_code(error::not_connected),
                     fmt::format("{}; the sentinels named no other master before the deadline",
                                 request.unreachable));
        } else if (!master_) {
          fail_later(std::move(request.sink), request.tag, make_error_code(error::request_timeout),
                     fmt::format("{}: no master known yet: {}", config_.address(),
                                 last_error_.empty() ? "no sentinel has answered" : last_error_));
        } else {
          fail_later(std::move(request.sink), request.tag, make_error_code(error::request_timeout),
                     fmt::format("{}: the deadline passed while the request waited for an "
                                 "earlier one to be answered (requests run in the order they were "
                                 "issued)",
                                 config_.address()));
        }
      },
      [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->watch_waiting();
      });
  // Those behind the requests that left may go now.
  send_ready();
}

void sentinel_router::fail_waiting(error_code ec, std::string_view why) {
  lanes_.stop();
  for (auto& request : lanes_.take_waiting()) {
    fail_later(std::move(request.sink), request.tag, ec,
               fmt::format("{}: {}", config_.address(), why));
  }
}

void sentinel_router::send_waiting() {
  lanes_.routes_renewed();
  send_ready();
}

void sentinel_router::subscribe_releases(const std::string& channel, announcement_events on) {
  unsubscribe_releases();
  releases_wanted_ = release_wish{.channel = channel, .on = std::move(on)};
  if (master_) master_->subscribe_releases(channel, releases_wanted_->on);
}

void sentinel_router::unsubscribe_releases() {
  ++releases_wanted_generation_;
  releases_wanted_.reset();
  if (master_) master_->unsubscribe_releases();
}

subscription_state sentinel_router::releases_subscription() const {
  if (!releases_wanted_) return subscription_state::off;
  return master_ ? master_->releases_subscription({}) : subscription_state::down;
}

void sentinel_router::close_when_idle(std::chrono::milliseconds bound) {
  closing_ = true;
  resolution_.cancel();
  fail_waiting(asio::error::operation_aborted, "the client is shutting down");
  if (sentinel_link_) sentinel_link_->close();
  if (master_) master_->close_when_idle(bound);
}

}  // namespace redlock::detail
