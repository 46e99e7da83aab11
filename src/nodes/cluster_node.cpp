#include "nodes/cluster_node.hpp"

#include "net/connection.hpp"
#include "nodes/cluster/hash_slot.hpp"
#include "nodes/cluster/topology.hpp"
#include "nodes/forwarded_request.hpp"
#include "nodes/replica_wait.hpp"
#include "redlock/error.hpp"
#include "resp/encoder.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <limits>
#include <optional>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;

namespace {

constexpr std::uint16_t no_master = std::numeric_limits<std::uint16_t>::max();

shared_payload encoded(std::initializer_list<std::string_view> command) {
  std::string bytes;
  resp::encode_command(bytes, command);
  return std::make_shared<const std::string>(std::move(bytes));
}

const shared_payload& asking_command() {
  static const shared_payload command = encoded({"ASKING"});
  return command;
}

const shared_payload& cluster_shards_command() {
  static const shared_payload command = encoded({"CLUSTER", "SHARDS"});
  return command;
}

const shared_payload& cluster_slots_command() {
  static const shared_payload command = encoded({"CLUSTER", "SLOTS"});
  return command;
}

}  // namespace

// Everything of a cluster node that its requests may outlive the node for: the routes, the shard
// connections, the refresh. Requests in flight hold it through their sinks.
class cluster_router : public std::enable_shared_from_this<cluster_router> {
 public:
  cluster_router(asio::any_io_executor executor, node_config config, connection_options settings,
                 std::shared_ptr<peer_registry> peers, std::size_t index)
      : executor_(std::move(executor)),
        config_(std::move(config)),
        settings_(std::move(settings)),
        peers_(std::move(peers)),
        index_(index),
        slot_owner_(cluster_slot_count, no_master),
        waiting_timer_(executor_),
        refresh_timer_(executor_) {
    if (auto first = parse_endpoint(config_.address())) seeds_.push_back(*first);
    for (const auto& seed : config_.seeds) {
      if (auto at = parse_endpoint(seed);
          at && std::find(seeds_.begin(), seeds_.end(), *at) == seeds_.end())
        seeds_.push_back(*at);
    }
  }

  // A request about `key` (empty: about no key) as lock_node::exec.
  void exec(std::string_view key, payload_ref payload, const request_options& rules,
            unsigned replicas, reply_sink& sink, std::size_t tag, steady_clock::time_point now) {
    if (closing_) {
      return fail_later(sink_ref(&sink), tag, asio::error::operation_aborted,
                        fmt::format("{}: the client is shutting down", config_.address()));
    }
    if (!known_) {
      // Only before the first topology: later, a stale route is corrected by MOVED.
      waiting_.push_back(waiting_request{key.empty() ? std::nullopt : std::optional(hash_slot(key)),
                                         payload.copied(),
                                         rules,
                                         replicas,
                                         sink_ref(&sink),
                                         tag,
                                         deadline_of(rules, now),
                                         0,
                                         {}});
      watch_waiting();
      if (!refreshing_) refresh_soon();
      return;
    }
    if (key.empty()) return send_everywhere(payload, rules, sink, tag, now);
    route(hash_slot(key), payload, rules, replicas, sink_ref(&sink), tag, now, 0, std::nullopt,
          deadline_of(rules, now));
  }

  error_code permanent_failure() const noexcept { return known_ ? error_code{} : lasting_; }
  const std::string& last_error() const noexcept { return last_error_; }

  void close_when_idle(std::chrono::milliseconds bound) {
    closing_ = true;
    waiting_timer_.cancel();
    refresh_timer_.cancel();
    fail_waiting(asio::error::operation_aborted, "the client is shutting down");
    for (auto& link : links_)
      link.conn->close_when_idle(bound);
  }

  std::optional<cluster_endpoint> master_of(std::uint16_t slot) const {
    const auto owner = slot_owner_[slot];
    if (owner == no_master) return std::nullopt;
    return links_[owner].at;
  }

  // Called by a routed request's sink (below).
  void on_redirect(const cluster_redirect& redirect) {
    // After close_when_idle no connection is opened: it would never be closed.
    if (redirect.what == cluster_redirect::kind::moved && !closing_) {
      slot_owner_[redirect.slot] = link_index(redirect.target);
      refresh_soon();
    }
  }
  void route_changed() { refresh_soon(); }

  // A request that found its slot's master unreachable (error::not_connected: it was not sent)
  // waits for the next topology and is routed again by it, within its deadline: after a failover
  // the routes are stale until then, and a release must still reach the new master.
  void route_after_refresh(std::uint16_t slot, const payload_ref& payload,
                           const request_options& rules, unsigned replicas, sink_ref sink,
                           std::size_t tag, unsigned redirects, steady_clock::time_point deadline,
                           std::string unreachable) {
    waiting_.push_back(waiting_request{slot, payload.copied(), rules, replicas, std::move(sink),
                                       tag, deadline, redirects, std::move(unreachable)});
    watch_waiting();
    refresh_soon();
  }

  void route(std::uint16_t slot, const payload_ref& payload, const request_options& rules,
             unsigned replicas, sink_ref sink, std::size_t tag, steady_clock::time_point now,
             unsigned redirects, std::optional<cluster_endpoint> asking,
             std::optional<steady_clock::time_point> deadline);

  const node_config& config() const noexcept { return config_; }
  const asio::any_io_executor& executor() const noexcept { return executor_; }

  void fail_later(sink_ref sink, std::size_t tag, error_code ec, std::string text) {
    asio::post(executor_, [sink = std::move(sink), tag, ec, text = std::move(text)]() mutable {
      sink->on_reply(tag, ec, error_reply(std::move(text)));
    });
  }

 private:
  struct link {
    cluster_endpoint at;
    std::shared_ptr<connection> conn;
    std::size_t number;  // for the peer registry; reused once the link is dropped
  };

  struct waiting_request {
    std::optional<std::uint16_t> slot;  // empty: about no key
    payload_ref payload;
    request_options rules;
    unsigned replicas;
    sink_ref sink;
    std::size_t tag;
    std::optional<steady_clock::time_point> deadline;
    unsigned redirects;
    // Why it waits for a new topology although one is known: its slot's master was unreachable.
    std::string unreachable;
  };

  static std::optional<steady_clock::time_point> deadline_of(const request_options& rules,
                                                             steady_clock::time_point now) {
    if (rules.timeout.count() <= 0) return std::nullopt;
    return now + rules.timeout;
  }

  std::uint16_t link_index(const cluster_endpoint& at) {
    for (std::size_t i = 0; i < links_.size(); ++i) {
      if (links_[i].at == at) return static_cast<std::uint16_t>(i);
    }
    auto settings = settings_;
    // Links to former masters are dropped (adopt), and their numbers reused.
    std::size_t number = links_.size();
    if (!free_numbers_.empty()) {
      number = free_numbers_.back();
      free_numbers_.pop_back();
    } else {
      for (const auto& l : links_)
        number = std::max(number, l.number + 1);
    }
    settings.admit_peer = peer_registry::check_for(peers_, index_, number);
    links_.push_back(link{
        at, connection::create(executor_, server_of(config_, at), std::move(settings)), number});
    return static_cast<std::uint16_t>(links_.size() - 1);
  }

  void send_everywhere(const payload_ref& payload, const request_options& rules, reply_sink& sink,
                       std::size_t tag, steady_clock::time_point now);

  // Fails waiting requests whose deadline has passed and keeps the timer armed for the next.
  void watch_waiting();
  void fail_waiting(error_code ec, std::string_view why);
  void send_waiting();

  void refresh_soon();
  asio::awaitable<void> refresh();
  // Reads a topology from `at`; the problem in words when it gives none.
  asio::awaitable<std::optional<std::string>> read_topology_from(const cluster_endpoint& at);
  void adopt(const cluster_topology& topology);

  asio::any_io_executor executor_;
  node_config config_;
  connection_options settings_;
  std::shared_ptr<peer_registry> peers_;
  std::size_t index_;
  std::vector<cluster_endpoint> seeds_;

  std::vector<link> links_;                // every server this node has talked to
  std::vector<std::uint16_t> slot_owner_;  // by slot: index into links_, or no_master
  bool known_ = false;                     // a topology was read at least once
  std::deque<waiting_request> waiting_;    // issued before the first topology
  asio::steady_timer waiting_timer_;

  bool refreshing_ = false;
  bool refresh_again_ = false;
  bool refresh_timer_armed_ = false;
  steady_clock::time_point last_refresh_{};
  asio::steady_timer refresh_timer_;

  error_code lasting_;  // why no topology can be read until a configuration changes
  std::vector<std::size_t> free_numbers_;  // of dropped links
  std::string last_error_;
  bool closing_ = false;
};

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
    const auto result = after_replica_wait(written_->first, written_->second, waited_->first,
                                           waited_->second, replicas_, endpoint_text(sent_to_));
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
  const auto now = steady_clock::now();
  std::optional<steady_clock::time_point> next;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->deadline && *it->deadline <= now) {
      if (!it->unreachable.empty()) {
        fail_later(std::move(it->sink), it->tag, make_error_code(error::not_connected),
                   fmt::format("{}; no other master of slot {} known before the deadline",
                               it->unreachable, *it->slot));
      } else {
        fail_later(std::move(it->sink), it->tag, make_error_code(error::request_timeout),
                   fmt::format("{}: no topology yet: {}", config_.address(),
                               last_error_.empty() ? "no seed has answered" : last_error_));
      }
      it = waiting_.erase(it);
      continue;
    }
    if (it->deadline && (!next || *it->deadline < *next)) next = it->deadline;
    ++it;
  }
  if (!next) return;
  waiting_timer_.expires_at(*next);
  waiting_timer_.async_wait([weak = weak_from_this()](error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->watch_waiting();
  });
}

void cluster_router::fail_waiting(error_code ec, std::string_view why) {
  for (auto& request : waiting_) {
    fail_later(std::move(request.sink), request.tag, ec,
               fmt::format("{}: {}", config_.address(), why));
  }
  waiting_.clear();
  waiting_timer_.cancel();
}

void cluster_router::send_waiting() {
  waiting_timer_.cancel();
  auto ready = std::move(waiting_);
  waiting_.clear();
  const auto now = steady_clock::now();
  for (auto& request : ready) {
    if (!request.slot) {
      send_everywhere(request.payload, request.rules, *request.sink.get(), request.tag, now);
      continue;
    }
    route(*request.slot, request.payload, request.rules, request.replicas, std::move(request.sink),
          request.tag, now, request.redirects, std::nullopt, request.deadline);
  }
}

void cluster_router::refresh_soon() {
  if (closing_) return;
  if (refreshing_) {
    refresh_again_ = true;
    return;
  }
  if (refresh_timer_armed_) return;
  const auto now = steady_clock::now();
  const auto earliest = last_refresh_ + cluster_node::min_refresh_interval;
  if (known_ && now < earliest) {
    refresh_timer_armed_ = true;
    refresh_timer_.expires_at(earliest);
    refresh_timer_.async_wait([weak = weak_from_this()](error_code ec) {
      auto self = weak.lock();
      if (!self) return;
      self->refresh_timer_armed_ = false;
      if (!ec) self->refresh_soon();
    });
    return;
  }
  refreshing_ = true;
  // The function object lives as long as the coroutine, and with it the router.
  asio::co_spawn(
      executor_, [self = shared_from_this()] { return self->refresh(); }, asio::detached);
}

asio::awaitable<void> cluster_router::refresh() {
  // Known masters first (they answer fastest and know the newest epoch), then the seeds.
  std::vector<cluster_endpoint> candidates;
  for (const auto owner : slot_owner_) {
    if (owner == no_master) continue;
    const auto& at = links_[owner].at;
    if (std::find(candidates.begin(), candidates.end(), at) == candidates.end())
      candidates.push_back(at);
  }
  for (const auto& seed : seeds_) {
    if (std::find(candidates.begin(), candidates.end(), seed) == candidates.end())
      candidates.push_back(seed);
  }
  std::vector<std::string> problems;
  bool adopted = false;
  for (const auto& at : candidates) {
    if (closing_) break;
    auto problem = co_await read_topology_from(at);
    if (!problem) {
      adopted = true;
      break;
    }
    problems.push_back(std::move(*problem));
  }
  refreshing_ = false;
  last_refresh_ = steady_clock::now();
  if (closing_) co_return;
  if (adopted) {
    lasting_ = {};
    send_waiting();
  } else {
    last_error_ = fmt::format("no seed gave the cluster's topology: {}", fmt::join(problems, "; "));
    if (!known_)
      fail_waiting(lasting_ ? lasting_ : make_error_code(error::not_connected), last_error_);
  }
  // Not again by itself when it failed: the next request that meets a stale route asks for it.
  if (std::exchange(refresh_again_, false)) refresh_soon();
}

asio::awaitable<std::optional<std::string>> cluster_router::read_topology_from(
    const cluster_endpoint& at) {
  const auto shared_conn = links_[link_index(at)].conn;  // links_ may grow meanwhile
  request_options rules;
  rules.timeout = settings_.connect_timeout + std::chrono::milliseconds(1000);
  auto [ec, reply] = co_await shared_conn->async_exec_shared(cluster_shards_command(), rules,
                                                             asio::as_tuple(asio::use_awaitable));
  // Closed meanwhile: adopting would open connections that nobody closes.
  if (closing_) co_return "the client is shutting down";
  const std::string where = endpoint_text(at);
  if (ec) {
    if (ec == condition::node_failure || ec == error::invalid_argument) lasting_ = ec;
    co_return reply.text.empty() ? fmt::format("{}: {}", where, ec.message()) : reply.text;
  }
  std::optional<topology_or_problem> read;
  if (reply.is_error() && reply.text.find("cluster support disabled") != std::string::npos) {
    lasting_ = make_error_code(error::invalid_argument);
    co_return fmt::format("{} is not a cluster ({}): use redis:// for a standalone server", where,
                          reply.text);
  }
  if (reply.is_error()) {
    // A server older than Redis 7 knows CLUSTER SLOTS only.
    std::tie(ec, reply) = co_await shared_conn->async_exec_shared(
        cluster_slots_command(), rules, asio::as_tuple(asio::use_awaitable));
    if (closing_) co_return "the client is shutting down";
    if (ec || reply.is_error())
      co_return fmt::format("{}: CLUSTER SHARDS and SLOTS failed: {}", where, reply.text);
    read = read_cluster_slots(reply, at.host);
  } else {
    read = read_cluster_shards(reply, at.host, config_.tls.enabled);
  }
  if (const auto* problem = std::get_if<std::string>(&*read))
    co_return fmt::format("{}: {}", where, *problem);
  const auto& topology = std::get<cluster_topology>(*read);
  if (topology.masters().empty()) co_return fmt::format("{}: no master serves any slot yet", where);
  adopt(topology);
  co_return std::nullopt;
}

void cluster_router::adopt(const cluster_topology& topology) {
  // A server that is no longer a master (it failed over, or left) gets no new requests: its link
  // closes once the requests it carries are answered, instead of reconnecting until shutdown.
  // A seed that is a replica is dropped too, and opened again by the next refresh that asks it.
  const auto& masters = topology.masters();
  std::erase_if(links_, [&](const link& l) {
    if (std::find(masters.begin(), masters.end(), l.at) != masters.end()) return false;
    l.conn->close_when_idle(settings_.connect_timeout + std::chrono::milliseconds(1000));
    peers_->forget(index_, l.number);
    free_numbers_.push_back(l.number);
    return true;
  });
  std::fill(slot_owner_.begin(), slot_owner_.end(), no_master);
  for (std::size_t slot = 0; slot < cluster_slot_count; ++slot) {
    if (const auto* master = topology.master_of(static_cast<std::uint16_t>(slot)))
      slot_owner_[slot] = link_index(*master);
  }
  known_ = true;
}

cluster_node::cluster_node(const asio::any_io_executor& executor, node_config config,
                           connection_options settings, std::shared_ptr<peer_registry> peers,
                           std::size_t index)
    : lock_node(config),
      router_(std::make_shared<cluster_router>(executor, std::move(config), std::move(settings),
                                               std::move(peers), index)) {}

cluster_node::~cluster_node() = default;

void cluster_node::exec(const request& what, std::string_view payload, reply_sink& sink,
                        std::size_t tag, steady_clock::time_point now) {
  router_->exec(what.key, payload_ref::borrowed(payload), what.rules, what.replicas, sink, tag,
                now);
}

void cluster_node::exec(const request& what, const shared_payload& payload, reply_sink& sink,
                        std::size_t tag, steady_clock::time_point now) {
  router_->exec(what.key, payload_ref::shared(payload), what.rules, what.replicas, sink, tag, now);
}

error_code cluster_node::permanent_failure() const noexcept {
  return router_->permanent_failure();
}

const std::string& cluster_node::last_error() const noexcept {
  return router_->last_error();
}

void cluster_node::close_when_idle(std::chrono::milliseconds bound) {
  router_->close_when_idle(bound);
}

std::string cluster_node::master_for(std::string_view key) const {
  const auto master = router_->master_of(hash_slot(key));
  return master ? endpoint_text(*master) : std::string();
}

std::optional<cluster_endpoint> cluster_node::master_of(std::uint16_t slot) const {
  return router_->master_of(slot);
}

}  // namespace redlock::detail
