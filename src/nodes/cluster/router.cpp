#include "nodes/cluster/router.hpp"

#include "clock.hpp"
#include "nodes/replica_wait.hpp"
#include "redlock/error.hpp"

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;

namespace {

const shared_payload& asking_command() {
  static const shared_payload command = encoded({"ASKING"});
  return command;
}

}  // namespace

// One request sent to a shard master, ticket `id_` of its slot's lane: reads its reply for
// redirections and refusals before the operation's sink sees it, and with replicas pairs it with
// the WAIT sent behind it. `request_` holds what a resend needs; its sink is the operation's.
//
// Once its last reference is dropped it goes back to its router's spares (keep_spare), without
// its router and its request, for the next request to reuse: most requests are routed this way.
class cluster_router::routed_request final : public reply_sink {
 public:
  routed_request(std::shared_ptr<cluster_router> router, waiting_request&& request, lane_ticket id,
                 const std::shared_ptr<const cluster_endpoint>& sent_to)
      : router_(std::move(router)), request_(std::move(request)), id_(id), sent_to_(sent_to) {}

  // A spare taken again: as constructed with these.
  void reuse(std::shared_ptr<cluster_router> router, waiting_request&& request, lane_ticket id,
             const std::shared_ptr<const cluster_endpoint>& sent_to) {
    router_ = std::move(router);
    request_ = std::move(request);
    id_ = id;
    if (sent_to_ != sent_to) sent_to_ = sent_to;  // a spare often served the same master
    done_ = false;
    written_.reset();
    waited_.reset();
  }

  const payload_ref& payload() const noexcept { return request_.payload; }

  // `which`: 0 for the request, 1 for the WAIT sent behind it (replicas > 0).
  void on_reply(std::size_t which, const error_code& ec, const resp::value& reply) override {
    if (done_) return;  // answered, or handed to the route a redirection gave
    if (which == 1) {
      waited_.emplace(ec, reply);
      if (written_) finish_replicated();
      return;
    }
    if (ec) {
      // The shard's master may be gone (a failover): look again, coalesced with other requests.
      // A request that was not sent tries the slot's master the new topology names.
      const auto& deadline = request_.deadline;
      if (may_send_again(ec, request_.rules) && deadline &&
          request_.redirects < cluster_router::max_redirects && lock_clock::now() < *deadline) {
        done_ = true;
        ++request_.redirects;
        request_.unreachable = std::make_unique<const std::string>(reply.text);
        request_.asking = false;
        request_.payload = request_.payload.copied();
        return router_->route_after_refresh(id_, std::move(request_));
      }
      if (ec != asio::error::operation_aborted) router_->route_changed();
      return answer(ec, reply);
    }
    if (!reply.is_error()) {
      if (request_.replicas == 0) return answer(ec, reply);
      written_.emplace(ec, reply);
      if (waited_) finish_replicated();
      return;
    }
    if (const auto redirect = read_redirect(reply, sent_to_->host)) return follow(*redirect, reply);
    if (const auto refusal = cluster_refusal(reply); !refusal.empty()) {
      if (refusal == "READONLY") router_->route_changed();  // a master demoted to replica
      return answer(ec, error_reply(fmt::format("{} (cluster node {}, slot {})", reply.text,
                                                endpoint_text(*sent_to_), *request_.slot)));
    }
    answer(ec, reply);
  }

  void last_reference_dropped() noexcept override {
    // The router is held until this is among its spares: the last reference to the router may
    // go with it, and this with the router's spares, as the last thing done here.
    auto router = std::move(router_);
    // The operation's sink and bytes are not kept; the rest owns nothing of the operation, and
    // reuse() overwrites it.
    request_.sink = {};
    request_.payload = {};
    request_.unreachable.reset();
    router->keep_spare(this);
  }

 private:
  void answer(const error_code& ec, const resp::value& reply) {
    done_ = true;
    // Out of the lane first: what waited behind it may go, ahead of what its answer sets off.
    router_->settle(*request_.slot, id_);
    request_.sink->on_reply(request_.tag, ec, reply);
  }

  void finish_replicated() {
    const auto result = after_replica_wait(
        written_->first, written_->second, waited_->first, waited_->second, request_.replicas,
        endpoint_text(*sent_to_), request_.rules.counts_once_replicated);
    answer(result.ec, result.reply);
  }

  void follow(const cluster_redirect& redirect, const resp::value& reply) {
    const auto now = lock_clock::now();
    const bool cleanup = request_.rules.deliver_for.count() > 0;
    const auto slot = *request_.slot;
    if (request_.redirects >= cluster_router::max_redirects) {
      router_->follow(redirect, 0, {});  // the route it names, for later requests
      return answer(
          make_error_code(error::server_error),
          error_reply(fmt::format("{}: slot {} redirected {} times, the last time by {} "
                                  "({})",
                                  router_->config().address(), slot, request_.redirects + 1,
                                  endpoint_text(*sent_to_), reply.text)));
    }
    if (request_.deadline && now >= *request_.deadline && !cleanup) {
      router_->follow(redirect, 0, {});
      return answer(make_error_code(error::request_timeout),
                    error_reply(fmt::format("{}: the deadline passed while slot {} was redirected "
                                            "({})",
                                            router_->config().address(), slot, reply.text)));
    }
    done_ = true;
    ++request_.redirects;
    request_.payload = request_.payload.copied();
    router_->follow(redirect, id_, std::move(request_));
  }

  std::shared_ptr<cluster_router> router_;
  waiting_request request_;
  lane_ticket id_;
  std::shared_ptr<const cluster_endpoint> sent_to_;
  bool done_ = false;
  std::optional<std::pair<error_code, resp::value>> written_, waited_;
};

namespace {

// A request about no key sent to every master: answered once, when all have answered, with the
// first failure or, when none failed, the last reply.
class every_master final : public reply_sink {
 public:
  every_master(sink_ref inner, std::size_t tag, std::size_t expected)
      : inner_(std::move(inner)), tag_(tag), expected_(expected) {}

  void on_reply(std::size_t, const error_code& ec, const resp::value& reply) override {
    if (!failed_ && (ec || reply.is_error())) {
      failed_ = true;
      failure_ec_ = ec;
      failure_ = reply;
    } else if (!failed_) {
      last_ = reply;
    }
    if (++answered_ < expected_) return;
    if (failed_) return inner_->on_reply(tag_, failure_ec_, failure_);
    inner_->on_reply(tag_, {}, last_);
  }
  void last_reference_dropped() noexcept override { delete this; }

 private:
  sink_ref inner_;
  std::size_t tag_;
  std::size_t expected_;
  std::size_t answered_ = 0;
  bool failed_ = false;
  error_code failure_ec_;
  resp::value failure_;
  resp::value last_;
};

}  // namespace

cluster_router::~cluster_router() = default;

void cluster_router::routed_request_deleter::operator()(routed_request* spare) const noexcept {
  delete spare;
}

cluster_router::routed_request* cluster_router::make_routed(
    waiting_request&& request, lane_ticket id,
    const std::shared_ptr<const cluster_endpoint>& sent_to) {
  if (spare_routed_.empty())
    return new routed_request(shared_from_this(), std::move(request), id, sent_to);
  routed_request* spare = spare_routed_.back().release();
  spare_routed_.pop_back();
  spare->reuse(shared_from_this(), std::move(request), id, sent_to);
  return spare;
}

void cluster_router::keep_spare(routed_request* spare) noexcept {
  if (spare_routed_.size() >= max_spare_routed) return delete spare;
  try {
    spare_routed_.emplace_back(spare);
  } catch (...) {
    delete spare;  // emplace_back took no ownership
  }
}

void cluster_router::exec(std::optional<std::uint16_t> slot, payload_ref payload,
                          const request_options& rules, unsigned replicas, reply_sink& sink,
                          std::size_t tag, steady_clock::time_point now) {
  if (closing_) {
    return fail_later(sink_ref(&sink), tag, asio::error::operation_aborted,
                      fmt::format("{}: the client is shutting down", config_.address()));
  }
  if (known_ && !slot) return send_everywhere(payload, rules, sink, tag, now);
  std::optional<std::uint64_t> route_now;  // none before the first topology: it waits for one
  if (known_) {
    if (slot_owner_[*slot] == no_master) {
      refresh_soon();
      return fail_later(sink_ref(&sink), tag, make_error_code(error::not_connected),
                        fmt::format("{}: no master serves slot {} (CLUSTERDOWN, or a failover "
                                    "under way)",
                                    config_.address(), *slot));
    }
    route_now = route_of(*slot);
  }
  const auto request = [&](payload_ref bytes) {
    return waiting_request{.slot = slot,
                           .payload = std::move(bytes),
                           .rules = rules,
                           .replicas = replicas,
                           .sink = sink_ref(&sink),
                           .tag = tag,
                           .deadline = deadline_of(rules, now),
                           .redirects = 0,
                           .unreachable = nullptr,
                           .asking = false};
  };
  // The caller's bytes are copied only for a request that waits.
  const auto admitted = lanes_.admit(slot ? *slot : keyless_lane, route_now,
                                     [&] { return request(payload.copied()); });
  if (admitted.go) return route(*slot, admitted.id, *route_now, request(payload), now);
  watch_waiting();
  // Before the first topology: asks for it. After: what it waits behind may wait for a new one
  // (a refresh that failed is not tried again by itself).
  if (known_ || !refresh_.running()) refresh_soon();
}

std::uint64_t cluster_router::route_of(std::uint32_t lane) const noexcept {
  if (lane == keyless_lane) return 0;
  const auto owner = slot_owner_[lane];
  return owner == no_master ? 0 : links_[owner].route;
}

void cluster_router::follow(const cluster_redirect& redirect, lane_ticket id,
                            waiting_request request) {
  // After close_when_idle no connection is opened: it would never be closed.
  if (redirect.what == cluster_redirect::kind::moved && !closing_) {
    const auto before = slot_owner_[redirect.slot];
    slot_owner_[redirect.slot] = link_index(redirect.target);
    if (before != no_master && before != slot_owner_[redirect.slot]) report_moved({redirect.slot});
    refresh_soon();
  }
  if (id == 0) return;  // answered where it stands
  const auto slot = *request.slot;
  if (redirect.what == cluster_redirect::kind::ask) {
    if (closing_ && std::none_of(links_.begin(), links_.end(),
                                 [&](const link& l) { return *l.at == redirect.target; })) {
      lanes_.settle(slot, id);
      send_ready();
      return fail_later(std::move(request.sink), request.tag, asio::error::operation_aborted,
                        fmt::format("{}: the client is shutting down", config_.address()));
    }
    const auto route = links_[link_index(redirect.target)].route;
    request.asking = true;
    lanes_.send_again_to(slot, id, route, std::move(request));
  } else {
    lanes_.send_again(slot, id, std::move(request), decltype(lanes_)::resend::to_lane_route);
  }
  watch_waiting();
  send_ready();
}

void cluster_router::route_after_refresh(lane_ticket id, waiting_request request) {
  const auto slot = *request.slot;
  lanes_.send_again(slot, id, std::move(request), decltype(lanes_)::resend::after_new_routes);
  watch_waiting();
  refresh_soon();
}

void cluster_router::send_ready() {
  // Requests it routes may fail unsent (posted), never settle inside it; still, once is enough.
  if (sending_ready_ || !lanes_.may_have_ready()) return;
  sending_ready_ = true;
  const auto now = lock_clock::now();
  while (auto go = lanes_.next([this](std::uint32_t lane) { return route_of(lane); })) {
    if (!go->request.slot) {
      // About no key, issued before the first topology: to every master, out of the lanes.
      lanes_.settle(go->lane, go->id);
      send_everywhere(go->request.payload, go->request.rules, *go->request.sink.get(),
                      go->request.tag, now);
      continue;
    }
    route(*go->request.slot, go->id, go->route, std::move(go->request), now);
  }
  sending_ready_ = false;
}

void cluster_router::route(std::uint16_t slot, lane_ticket id, std::uint64_t route,
                           waiting_request&& request, steady_clock::time_point now) {
  const auto target_link =
      std::find_if(links_.begin(), links_.end(), [&](const link& l) { return l.route == route; });
  if (route == 0 || target_link == links_.end()) {
    // No master serves the slot now (or the ASK target's link was dropped meanwhile).
    lanes_.settle(slot, id);
    refresh_soon();
    return fail_later(std::move(request.sink), request.tag, make_error_code(error::not_connected),
                      fmt::format("{}: no master serves slot {} (CLUSTERDOWN, or a failover under "
                                  "way)",
                                  config_.address(), slot));
  }
  request_options sent = request.rules;
  if (request.deadline) {
    // A redirected request keeps its first deadline; a cleanup is still written after it.
    sent.timeout = std::max(std::chrono::ceil<std::chrono::milliseconds>(*request.deadline - now),
                            std::chrono::milliseconds(1));
  }
  const auto& target = *target_link;
  const auto replicas = request.replicas;
  const bool asking = request.asking;
  request.asking = false;  // for this one attempt
  sink_ref routed(make_routed(std::move(request), id, target.at));
  // The routed request keeps its bytes while it is referenced, as here.
  const payload_ref& payload = static_cast<routed_request*>(routed.get())->payload();
  if (asking) {
    // ASKING lets the next command on this connection into the importing slot; sent with the
    // request's own rules, so that both are skipped, written or kept together.
    request_options ask_rules = sent;
    ask_rules.eval_fallback = nullptr;
    ask_rules.noscript_is_final = false;
    target.conn->exec_direct(asking_command(), ask_rules, ignore_replies(), 0, now);
  }
  if (payload.owned) {
    target.conn->exec_direct(payload.owned, sent, *routed.get(), 0, now);
  } else {
    target.conn->exec_direct(payload.bytes, sent, *routed.get(), 0, now);
  }
  if (replicas > 0) {
    request_options wait_rules = sent;
    wait_rules.eval_fallback = nullptr;
    wait_rules.noscript_is_final = false;
    target.conn->exec_direct(wait_command(replicas, sent.timeout), wait_rules, *routed.get(), 1,
                             now);
  }
}

void cluster_router::send_everywhere(const payload_ref& payload, const request_options& rules,
                                     reply_sink& sink, std::size_t tag,
                                     steady_clock::time_point now) {
  std::vector<std::uint16_t> masters;
  for (const auto owner : slot_owner_) {
    if (owner != no_master && std::find(masters.begin(), masters.end(), owner) == masters.end())
      masters.push_back(owner);
  }
  if (masters.empty()) {
    refresh_soon();
    return fail_later(sink_ref(&sink), tag, make_error_code(error::not_connected),
                      fmt::format("{}: no master serves any slot", config_.address()));
  }
  sink_ref all(new every_master(sink_ref(&sink), tag, masters.size()));
  for (const auto owner : masters) {
    if (payload.owned) {
      links_[owner].conn->exec_direct(payload.owned, rules, *all.get(), 0, now);
    } else {
      links_[owner].conn->exec_direct(payload.bytes, rules, *all.get(), 0, now);
    }
  }
}

void cluster_router::watch_waiting() {
  lanes_.expire(
      [this](std::uint32_t lane, waiting_request& request) {
        if (request.unreachable) {
          fail_later(std::move(request.sink), request.tag, make_error_code(error::not_connected),
                     fmt::format("{}; no other master of slot {} known before the deadline",
                                 *request.unreachable, lane));
        } else if (!known_) {
          fail_later(std::move(request.sink), request.tag, make_error_code(error::request_timeout),
                     fmt::format("{}: no topology yet: {}", config_.address(),
                                 last_error_.empty() ? "no seed has answered" : last_error_));
        } else {
          fail_later(std::move(request.sink), request.tag, make_error_code(error::request_timeout),
                     fmt::format("{}: the deadline passed while the request waited for an "
                                 "earlier one of slot {} to be answered (requests of one slot run "
                                 "in the order they were issued)",
                                 config_.address(), lane));
        }
      },
      [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->watch_waiting();
      });
  // Those behind the requests that left may go now.
  send_ready();
}

void cluster_router::fail_waiting(error_code ec, std::string_view why) {
  lanes_.stop();
  for (auto& request : lanes_.take_waiting()) {
    fail_later(std::move(request.sink), request.tag, ec,
               fmt::format("{}: {}", config_.address(), why));
  }
}

void cluster_router::send_waiting() {
  lanes_.routes_renewed();
  send_ready();
}

void cluster_router::report_moved(std::vector<std::uint16_t> slots) {
  if (!on_moved_ || slots.empty()) return;
  // Never inside the request or reply that taught it: the listener sends renewals.
  asio::post(executor_, [on_moved = on_moved_,
                         moved = master_moved{.every_key = false, .slots = std::move(slots)}] {
    on_moved(moved);
  });
}

}  // namespace redlock::detail
