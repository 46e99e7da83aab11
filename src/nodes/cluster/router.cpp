#include "nodes/cluster/router.hpp"

#include "nodes/cluster_node.hpp"
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

namespace {

// One request sent to a shard master: reads its reply for redirections and refusals before the
// operation's sink sees it, and with replicas_ pairs it with the WAIT sent behind it.
class routed_request final : public reply_sink {
 public:
  routed_request(std::shared_ptr<cluster_router> router, payload_ref payload,
                 const request_options& rules, unsigned replicas, sink_ref inner, std::size_t tag,
                 std::uint16_t slot, cluster_endpoint sent_to, unsigned redirects,
                 std::optional<steady_clock::time_point> deadline)
      : router_(std::move(router)),
        payload_(std::move(payload)),
        rules_(rules),
        replicas_(replicas),
        inner_(std::move(inner)),
        tag_(tag),
        slot_(slot),
        sent_to_(std::move(sent_to)),
        redirects_(redirects),
        deadline_(deadline) {}

  // `which`: 0 for the request, 1 for the WAIT sent behind it (replicas_ > 0).
  void on_reply(std::size_t which, error_code ec, const resp::value& reply) override {
    if (done_) return;  // answered, or handed to the route a redirection gave
    if (which == 1) {
      waited_.emplace(ec, reply);
      if (written_) finish_replicated();
      return;
    }
    if (ec) {
      // The shard's master may be gone (a failover): look again, coalesced with other requests.
      // A request that was not sent tries the slot's master the new topology names.
      if (may_send_again(ec, rules_) && deadline_ && redirects_ < cluster_node::max_redirects &&
          steady_clock::now() < *deadline_) {
        done_ = true;
        return router_->route_after_refresh(slot_, payload_, rules_, replicas_, std::move(inner_),
                                            tag_, redirects_ + 1, *deadline_, reply.text);
      }
      if (ec != asio::error::operation_aborted) router_->route_changed();
      return answer(ec, reply);
    }
    if (!reply.is_error()) {
      if (replicas_ == 0) return answer(ec, reply);
      written_.emplace(ec, reply);
      if (waited_) finish_replicated();
      return;
    }
    if (const auto redirect = read_redirect(reply, sent_to_.host)) return follow(*redirect, reply);
    if (const auto refusal = cluster_refusal(reply); !refusal.empty()) {
      if (refusal == "READONLY") router_->route_changed();  // a master demoted to replica
      return answer(ec, error_reply(fmt::format("{} (cluster node {}, slot {})", reply.text,
                                                endpoint_text(sent_to_), slot_)));
    }
    answer(ec, reply);
  }

  void add_ref() noexcept override { ++refs_; }
  void drop_ref() noexcept override {
    if (--refs_ == 0) delete this;
  }

 private:
  void answer(error_code ec, const resp::value& reply) {
    done_ = true;
    inner_->on_reply(tag_, ec, reply);
  }

  void finish_replicated() {
    const auto result =
        after_replica_wait(written_->first, written_->second, waited_->first, waited_->second,
                           replicas_, endpoint_text(sent_to_), rules_.counts_once_replicated);
    answer(result.ec, result.reply);
  }

  void follow(const cluster_redirect& redirect, const resp::value& reply) {
    router_->on_redirect(redirect);
    const auto now = steady_clock::now();
    const bool cleanup = rules_.deliver_for.count() > 0;
    if (redirects_ >= cluster_node::max_redirects) {
      return answer(make_error_code(error::server_error),
                    error_reply(fmt::format("{}: slot {} redirected {} times, the last time by {} "
                                            "({})",
                                            router_->config().address(), slot_, redirects_ + 1,
                                            endpoint_text(sent_to_), reply.text)));
    }
    if (deadline_ && now >= *deadline_ && !cleanup) {
      return answer(make_error_code(error::request_timeout),
                    error_reply(fmt::format("{}: the deadline passed while slot {} was redirected "
                                            "({})",
                                            router_->config().address(), slot_, reply.text)));
    }
    done_ = true;
    std::optional<cluster_endpoint> asking;
    if (redirect.what == cluster_redirect::kind::ask) asking = redirect.target;
    router_->route(slot_, payload_, rules_, replicas_, std::move(inner_), tag_, now, redirects_ + 1,
                   asking, deadline_);
  }

  std::shared_ptr<cluster_router> router_;
  payload_ref payload_;
  request_options rules_;
  unsigned replicas_;
  sink_ref inner_;
  std::size_t tag_;
  std::uint16_t slot_;
  cluster_endpoint sent_to_;
  unsigned redirects_;
  std::optional<steady_clock::time_point> deadline_;
  bool done_ = false;
  std::optional<std::pair<error_code, resp::value>> written_, waited_;
  unsigned refs_ = 0;
};

// A request about no key sent to every master: answered once, when all have answered, with the
// first failure or, when none failed, the last reply.
class every_master final : public reply_sink {
 public:
  every_master(sink_ref inner, std::size_t tag, std::size_t expected)
      : inner_(std::move(inner)), tag_(tag), expected_(expected) {}

  void on_reply(std::size_t, error_code ec, const resp::value& reply) override {
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
  void add_ref() noexcept override { ++refs_; }
  void drop_ref() noexcept override {
    if (--refs_ == 0) delete this;
  }

 private:
  sink_ref inner_;
  std::size_t tag_;
  std::size_t expected_;
  std::size_t answered_ = 0;
  bool failed_ = false;
  error_code failure_ec_;
  resp::value failure_;
  resp::value last_;
  unsigned refs_ = 0;
};

}  // namespace

void cluster_router::route(std::uint16_t slot, const payload_ref& payload,
                           const request_options& rules, unsigned replicas, sink_ref sink,
                           std::size_t tag, steady_clock::time_point now, unsigned redirects,
                           std::optional<cluster_endpoint> asking,
                           std::optional<steady_clock::time_point> deadline) {
  if (closing_ && asking) {
    // After close_when_idle no connection is opened: it would never be closed.
    const auto known =
        std::find_if(links_.begin(), links_.end(), [&](const link& l) { return l.at == *asking; });
    if (known == links_.end()) {
      return fail_later(std::move(sink), tag, asio::error::operation_aborted,
                        fmt::format("{}: the client is shutting down", config_.address()));
    }
  }
  const std::uint16_t owner = asking ? link_index(*asking) : slot_owner_[slot];
  if (owner == no_master) {
    refresh_soon();
    return fail_later(std::move(sink), tag, make_error_code(error::not_connected),
                      fmt::format("{}: no master serves slot {} (CLUSTERDOWN, or a failover under "
                                  "way)",
                                  config_.address(), slot));
  }
  request_options sent = rules;
  if (deadline) {
    // A redirected request keeps its first deadline; a cleanup is still written after it.
    sent.timeout = std::max(std::chrono::ceil<std::chrono::milliseconds>(*deadline - now),
                            std::chrono::milliseconds(1));
  }
  auto& target = links_[owner];
  sink_ref routed(new routed_request(shared_from_this(), payload, rules, replicas, std::move(sink),
                                     tag, slot, target.at, redirects, deadline));
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
  waiting_.expire(
      [this](waiting_request& request) {
        if (!request.unreachable.empty()) {
          fail_later(std::move(request.sink), request.tag, make_error_code(error::not_connected),
                     fmt::format("{}; no other master of slot {} known before the deadline",
                                 request.unreachable, *request.slot));
        } else {
          fail_later(std::move(request.sink), request.tag, make_error_code(error::request_timeout),
                     fmt::format("{}: no topology yet: {}", config_.address(),
                                 last_error_.empty() ? "no seed has answered" : last_error_));
        }
      },
      [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->watch_waiting();
      });
}

void cluster_router::fail_waiting(error_code ec, std::string_view why) {
  for (auto& request : waiting_.take_all()) {
    fail_later(std::move(request.sink), request.tag, ec,
               fmt::format("{}: {}", config_.address(), why));
  }
}

void cluster_router::send_waiting() {
  const auto now = steady_clock::now();
  for (auto& request : waiting_.take_all()) {
    if (!request.slot) {
      send_everywhere(request.payload, request.rules, *request.sink.get(), request.tag, now);
      continue;
    }
    route(*request.slot, request.payload, request.rules, request.replicas, std::move(request.sink),
          request.tag, now, request.redirects, std::nullopt, request.deadline);
  }
}

}  // namespace redlock::detail
