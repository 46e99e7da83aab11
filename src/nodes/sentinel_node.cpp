#include "nodes/sentinel_node.hpp"

#include "log.hpp"
#include "net/connection.hpp"
#include "nodes/cluster/topology.hpp"
#include "nodes/forwarded_request.hpp"
#include "nodes/sentinel/replies.hpp"
#include "nodes/standalone_node.hpp"
#include "redlock/error.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;

namespace {

constexpr std::string_view switch_master_channel = "+switch-master";

// What a sentinel is asked with: the sentinel node's TLS settings, the sentinels' own login, no
// database (a sentinel has none).
node_config sentinel_config(const node_config& node, const cluster_endpoint& at) {
  node_config sentinel = server_of(node, at);
  sentinel.username = node.sentinel_username;
  sentinel.password = node.sentinel_password;
  sentinel.database = 0;
  sentinel.wait_replicas = 0;
  return sentinel;
}

}  // namespace

// Everything of a sentinel node that its requests may outlive the node for: the master's link,
// the sentinel link, the resolution. Requests in flight hold it through their sinks.
class sentinel_router : public std::enable_shared_from_this<sentinel_router> {
 public:
  sentinel_router(asio::any_io_executor executor, node_config config, connection_options settings,
                  std::shared_ptr<peer_registry> peers, std::size_t index)
      : executor_(std::move(executor)),
        config_(std::move(config)),
        settings_(std::move(settings)),
        peers_(std::move(peers)),
        index_(index),
        sentinels_(address_and_seeds(config_)),
        waiting_(executor_),
        resolve_timer_(executor_) {
    settings_.require_master = true;
  }

  void exec(const lock_node::request& what, payload_ref payload, reply_sink& sink, std::size_t tag,
            steady_clock::time_point now);

  error_code permanent_failure() const noexcept {
    if (master_ && master_->permanent_failure()) return master_->permanent_failure();
    return master_ ? error_code{} : lasting_;
  }
  const std::string& last_error() const noexcept {
    if (master_ && !master_->last_error().empty()) return master_->last_error();
    return last_error_;
  }

  void close_when_idle(std::chrono::milliseconds bound) {
    closing_ = true;
    resolve_timer_.cancel();
    fail_waiting(asio::error::operation_aborted, "the client is shutting down");
    if (sentinel_link_) sentinel_link_->close();
    if (master_) master_->close_when_idle(bound);
  }

  std::string master_address() const { return master_at_ ? endpoint_text(*master_at_) : ""; }
  const master_record& last_change() const noexcept { return record_; }
  const node_config& config() const noexcept { return config_; }

  // The master may have moved (READONLY, a lost or refused link): ask again, soon. With
  // `next_sentinel`, the sentinel that named it is not asked first (it may be stale).
  void master_in_doubt(bool next_sentinel) {
    if (next_sentinel) skip_sentinel_ = true;
    resolve_soon();
  }

  // A request that found the master unreachable, unsent: sent again to the master the next
  // resolution names, within its deadline.
  void send_after_resolution(const lock_node::request& what, payload_ref payload, sink_ref sink,
                             std::size_t tag, unsigned attempts, steady_clock::time_point deadline,
                             std::string unreachable) {
    if (closing_) {
      return fail_later(std::move(sink), tag, asio::error::operation_aborted,
                        fmt::format("{}: the client is shutting down", config_.address()));
    }
    waiting_.add(waiting_request{payload.copied(), what.rules, what.replicas, std::move(sink), tag,
                                 deadline, attempts, std::move(unreachable)});
    watch_waiting();
    resolve_soon();
  }

  void send(const lock_node::request& what, const payload_ref& payload, sink_ref sink,
            std::size_t tag, steady_clock::time_point now, unsigned attempts,
            std::optional<steady_clock::time_point> deadline);

 private:
  struct waiting_request {
    payload_ref payload;
    request_options rules;
    unsigned replicas;
    sink_ref sink;
    std::size_t tag;
    std::optional<steady_clock::time_point> deadline;
    unsigned attempts;
    std::string unreachable;  // why it waits although a master was known
  };

  void fail_later(sink_ref sink, std::size_t tag, error_code ec, std::string text) {
    answer_later(executor_, std::move(sink), tag, ec, std::move(text));
  }

  void watch_waiting();
  void fail_waiting(error_code ec, std::string_view why);
  void send_waiting();
  void resolve_soon();
  asio::awaitable<void> resolve();
  // Asks sentinel `at`; its link becomes the subscriber when it answers. Empty when it named the
  // master, else what went wrong.
  asio::awaitable<std::optional<std::string>> ask(const cluster_endpoint& at);
  // A subscriber link to sentinel `at`, numbered `generation` (its events name it).
  std::shared_ptr<connection> open_sentinel_link(const cluster_endpoint& at,
                                                 std::uint64_t& generation);
  void on_sentinel_push(std::uint64_t generation, const resp::value& push);
  void on_sentinel_link(std::uint64_t generation, bool up);
  // The current master's link is the node's (connection_options::on_link of the node, if any).
  void on_master_link(std::uint64_t generation, bool up, error_code why);
  // Moves the node to `master`; false when it is there already (or closing).
  bool adopt(const cluster_endpoint& master);
  // Since when the followed sentinel names the master (SENTINEL MASTER), into record_.
  void learn_record_soon();
  asio::awaitable<void> learn_record(std::shared_ptr<connection> link, cluster_endpoint master);

  asio::any_io_executor executor_;
  node_config config_;
  connection_options settings_;
  std::shared_ptr<peer_registry> peers_;
  std::size_t index_;
  std::vector<cluster_endpoint> sentinels_;
  std::size_t next_sentinel_ = 0;  // the one asked first by the next resolution
  bool skip_sentinel_ = false;

  std::shared_ptr<connection> sentinel_link_;
  std::uint64_t sentinel_links_opened_ = 0;
  std::uint64_t followed_generation_ = 0;  // sentinel_link_'s number
  std::unique_ptr<standalone_node> master_;
  std::uint64_t master_generation_ = 0;
  std::optional<cluster_endpoint> master_at_;
  master_record record_;

  // Issued before the first answer of a sentinel, or unsent for an unreachable master.
  waiting_room<waiting_request> waiting_;
  asio::steady_timer resolve_timer_;
  bool resolving_ = false;
  bool resolve_again_ = false;
  bool resolve_timer_armed_ = false;
  steady_clock::time_point last_resolve_{};
  bool closing_ = false;
  error_code lasting_;
  std::string last_error_;
};

namespace {

// One request sent to the master: reads its answer for signs that the master moved before the
// operation's sink sees it.
class master_request final : public reply_sink {
 public:
  master_request(std::shared_ptr<sentinel_router> router, payload_ref payload,
                 const request_options& rules, unsigned replicas, sink_ref inner, std::size_t tag,
                 unsigned attempts, std::optional<steady_clock::time_point> deadline)
      : router_(std::move(router)),
        payload_(std::move(payload)),
        rules_(rules),
        replicas_(replicas),
        inner_(std::move(inner)),
        tag_(tag),
        attempts_(attempts),
        deadline_(deadline) {}

  void on_reply(std::size_t, error_code ec, const resp::value& reply) override {
    if (ec) {
      if (may_send_again(ec, rules_) && deadline_ && attempts_ < max_attempts &&
          steady_clock::now() < *deadline_) {
        return router_->send_after_resolution({.key = {}, .rules = rules_, .replicas = replicas_},
                                              payload_, std::move(inner_), tag_, attempts_ + 1,
                                              *deadline_, reply.text);
      }
      if (ec == error::connection_lost || sent_nowhere(ec)) router_->master_in_doubt(false);
      return inner_->on_reply(tag_, ec, reply);
    }
    if (reply.is_error() && reply.error_code_word() == "READONLY") {
      // A master demoted to replica: the vote fails, and the sentinels are asked again.
      router_->master_in_doubt(false);
    }
    inner_->on_reply(tag_, ec, reply);
  }

  void add_ref() noexcept override { ++refs_; }
  void drop_ref() noexcept override {
    if (--refs_ == 0) delete this;
  }

 private:
  static constexpr unsigned max_attempts = 3;

  std::shared_ptr<sentinel_router> router_;
  payload_ref payload_;
  request_options rules_;
  unsigned replicas_;
  sink_ref inner_;
  std::size_t tag_;
  unsigned attempts_;
  std::optional<steady_clock::time_point> deadline_;
  unsigned refs_ = 0;
};

}  // namespace

void sentinel_router::exec(const lock_node::request& what, payload_ref payload, reply_sink& sink,
                           std::size_t tag, steady_clock::time_point now) {
  if (closing_) {
    return fail_later(sink_ref(&sink), tag, asio::error::operation_aborted,
                      fmt::format("{}: the client is shutting down", config_.address()));
  }
  std::optional<steady_clock::time_point> deadline;
  if (what.rules.timeout.count() > 0) deadline = now + what.rules.timeout;
  if (!master_) {
    // Only before the first answer of a sentinel: later, requests go to the last master named.
    waiting_.add(waiting_request{
        payload.copied(), what.rules, what.replicas, sink_ref(&sink), tag, deadline, 0, {}});
    watch_waiting();
    resolve_soon();
    return;
  }
  send(what, payload, sink_ref(&sink), tag, now, 0, deadline);
}

void sentinel_router::send(const lock_node::request& what, const payload_ref& payload,
                           sink_ref sink, std::size_t tag, steady_clock::time_point now,
                           unsigned attempts, std::optional<steady_clock::time_point> deadline) {
  request_options sent = what.rules;
  if (deadline) {
    // A request sent again keeps its first deadline; a cleanup is still written after it.
    sent.timeout = std::max(std::chrono::ceil<std::chrono::milliseconds>(*deadline - now),
                            std::chrono::milliseconds(1));
  }
  sink_ref watched(new master_request(shared_from_this(), payload, what.rules, what.replicas,
                                      std::move(sink), tag, attempts, deadline));
  const lock_node::request forwarded{.key = what.key, .rules = sent, .replicas = what.replicas};
  if (payload.owned) {
    master_->exec(forwarded, payload.owned, *watched.get(), 0, now);
  } else {
    master_->exec(forwarded, payload.bytes, *watched.get(), 0, now);
  }
}

void sentinel_router::watch_waiting() {
  waiting_.expire(
      [this](waiting_request& request) {
        if (!request.unreachable.empty()) {
          fail_later(std::move(request.sink), request.tag, make_error_code(error::not_connected),
                     fmt::format("{}; the sentinels named no other master before the deadline",
                                 request.unreachable));
        } else {
          fail_later(std::move(request.sink), request.tag, make_error_code(error::request_timeout),
                     fmt::format("{}: no master known yet: {}", config_.address(),
                                 last_error_.empty() ? "no sentinel has answered" : last_error_));
        }
      },
      [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->watch_waiting();
      });
}

void sentinel_router::fail_waiting(error_code ec, std::string_view why) {
  for (auto& request : waiting_.take_all()) {
    fail_later(std::move(request.sink), request.tag, ec,
               fmt::format("{}: {}", config_.address(), why));
  }
}

void sentinel_router::send_waiting() {
  const auto now = steady_clock::now();
  for (auto& request : waiting_.take_all()) {
    const lock_node::request what{.key = {}, .rules = request.rules, .replicas = request.replicas};
    send(what, request.payload, std::move(request.sink), request.tag, now, request.attempts,
         request.deadline);
  }
}

void sentinel_router::resolve_soon() {
  if (closing_) return;
  if (resolving_) {
    resolve_again_ = true;
    return;
  }
  if (resolve_timer_armed_) return;
  const auto earliest = last_resolve_ + sentinel_node::min_resolve_interval;
  if (steady_clock::now() < earliest) {
    resolve_timer_armed_ = true;
    resolve_timer_.expires_at(earliest);
    resolve_timer_.async_wait([weak = weak_from_this()](error_code ec) {
      auto self = weak.lock();
      if (!self) return;
      self->resolve_timer_armed_ = false;
      if (!ec) self->resolve_soon();
    });
    return;
  }
  resolving_ = true;
  // The function object lives as long as the coroutine, and with it the router.
  asio::co_spawn(
      executor_, [self = shared_from_this()] { return self->resolve(); }, asio::detached);
}

asio::awaitable<void> sentinel_router::resolve() {
  if (std::exchange(skip_sentinel_, false)) ++next_sentinel_;
  std::vector<std::string> problems;
  bool named = false;
  for (std::size_t tried = 0; tried < sentinels_.size() && !closing_; ++tried) {
    const auto at = sentinels_[(next_sentinel_ + tried) % sentinels_.size()];
    auto problem = co_await ask(at);
    if (!problem) {
      next_sentinel_ = (next_sentinel_ + tried) % sentinels_.size();
      named = true;
      break;
    }
    problems.push_back(std::move(*problem));
  }
  resolving_ = false;
  last_resolve_ = steady_clock::now();
  if (closing_) co_return;
  if (named) {
    lasting_ = {};
    send_waiting();
  } else {
    last_error_ = fmt::format("no sentinel named master \"{}\": {}", config_.sentinel_master,
                              fmt::join(problems, "; "));
    if (!master_) {
      const auto ec = lasting_ ? lasting_ : make_error_code(error::not_connected);
      // No master to follow, and no link of one that could say so.
      if (settings_.on_link) settings_.on_link(false, ec);
      fail_waiting(ec, last_error_);
    }
  }
  if (std::exchange(resolve_again_, false) || !named) {
    // Unanswered: again after the reconnect backoff's ceiling, while anyone may still need it.
    resolve_timer_armed_ = true;
    resolve_timer_.expires_after(named ? sentinel_node::min_resolve_interval
                                       : settings_.reconnect.max_delay);
    resolve_timer_.async_wait([weak = weak_from_this()](error_code ec) {
      auto self = weak.lock();
      if (!self) return;
      self->resolve_timer_armed_ = false;
      if (!ec) self->resolve_soon();
    });
  }
}

std::shared_ptr<connection> sentinel_router::open_sentinel_link(const cluster_endpoint& at,
                                                                std::uint64_t& generation) {
  auto settings = settings_;
  settings.require_master = false;
  settings.preload.clear();  // a sentinel runs no scripts
  settings.permission_probes.clear();
  settings.admit_peer = nullptr;
  settings.subscribe_channel = std::string(switch_master_channel);
  generation = ++sentinel_links_opened_;
  std::weak_ptr<sentinel_router> weak = weak_from_this();
  settings.on_push = [weak, generation](const resp::value& push) {
    if (auto self = weak.lock()) self->on_sentinel_push(generation, push);
  };
  settings.on_link = [weak, generation](bool up, error_code) {
    if (auto self = weak.lock()) self->on_sentinel_link(generation, up);
  };
  return connection::create(executor_, sentinel_config(config_, at), std::move(settings));
}

asio::awaitable<std::optional<std::string>> sentinel_router::ask(const cluster_endpoint& at) {
  std::uint64_t generation = followed_generation_;
  auto link = (sentinel_link_ && sentinel_link_->node().host == at.host &&
               sentinel_link_->node().port == at.port)
                  ? sentinel_link_
                  : open_sentinel_link(at, generation);
  request_options rules;
  rules.timeout = settings_.connect_timeout + std::chrono::milliseconds(1000);
  const std::string_view command[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                                      config_.sentinel_master};
  auto [ec, reply] = co_await link->async_exec(std::span<const std::string_view>(command), rules,
                                               asio::as_tuple(asio::use_awaitable));
  const std::string where = endpoint_text(at);
  const auto give_up = [&](std::string why) -> std::optional<std::string> {
    if (link != sentinel_link_) link->close();
    return why;
  };
  if (closing_) co_return give_up("the client is shutting down");
  if (ec) {
    if (ec == condition::node_failure || ec == error::invalid_argument) lasting_ = ec;
    co_return give_up(reply.text.empty() ? fmt::format("{}: {}", where, ec.message()) : reply.text);
  }
  auto answer = read_master_answer(reply, where, config_.sentinel_master);
  if (!answer.master) {
    if (answer.unknown_name) lasting_ = make_error_code(error::invalid_argument);
    co_return give_up(std::move(answer.problem));
  }
  const cluster_endpoint master = *answer.master;
  if (link != sentinel_link_) {
    // This sentinel answers: it is the one whose +switch-master we follow from now on.
    if (sentinel_link_) sentinel_link_->close();
    sentinel_link_ = std::move(link);
    followed_generation_ = generation;
  }
  if (adopt(master)) learn_record_soon();
  co_return std::nullopt;
}

void sentinel_router::learn_record_soon() {
  if (!sentinel_link_ || !master_at_) return;
  // Since when the sentinels name the master only informs people (status): asked beside the
  // requests waiting for the master, never in their way.
  asio::co_spawn(
      executor_,
      [self = shared_from_this(), link = sentinel_link_, master = *master_at_] {
        return self->learn_record(link, master);
      },
      asio::detached);
}

asio::awaitable<void> sentinel_router::learn_record(std::shared_ptr<connection> link,
                                                    cluster_endpoint master) {
  request_options rules;
  rules.timeout = settings_.connect_timeout + std::chrono::milliseconds(1000);
  const std::string_view command[] = {"SENTINEL", "MASTER", config_.sentinel_master};
  auto [ec, reply] = co_await link->async_exec(std::span<const std::string_view>(command), rules,
                                               asio::as_tuple(asio::use_awaitable));
  if (ec || closing_ || master_at_ != master) co_return;  // moved on meanwhile: not its record
  if (auto record = read_master_record(reply, master, std::chrono::system_clock::now())) {
    record_ = *record;
  }
}

bool sentinel_router::adopt(const cluster_endpoint& master) {
  if (master_at_ == master || closing_) return false;
  if (master_) {
    // Its requests are answered first; releases it keeps wait for a reconnect within their
    // lifetime, where the key is ours or gone.
    master_->close_when_idle(settings_.connect_timeout + std::chrono::milliseconds(1000));
  }
  auto settings = settings_;
  settings.admit_peer = peer_registry::check_for(peers_, index_, 0);
  const auto generation = ++master_generation_;
  std::weak_ptr<sentinel_router> weak = weak_from_this();
  settings.on_link = [weak, generation](bool up, error_code why) {
    if (auto self = weak.lock()) self->on_master_link(generation, up, why);
  };
  master_ =
      std::make_unique<standalone_node>(executor_, server_of(config_, master), std::move(settings));
  const bool first = !master_at_;
  master_at_ = master;
  record_ = master_record{.since = std::chrono::system_clock::now(), .config_epoch = std::nullopt};
  if (settings_.logger) {
    call_logger(
        settings_.logger, executor_, log_level::info,
        fmt::format("{}: the sentinels name {} as master \"{}\"{}", config_.address(),
                    endpoint_text(master), config_.sentinel_master, first ? "" : " (it moved)"));
  }
  return true;
}

void sentinel_router::on_sentinel_push(std::uint64_t generation, const resp::value& push) {
  // ["message", "+switch-master", "NAME old-ip old-port new-ip new-port"]
  if (push.elements.size() != 3 || push.elements[0].text != "message" ||
      push.elements[1].text != switch_master_channel) {
    return;
  }
  auto master = switched_to(push.elements[2].text, config_.sentinel_master);
  if (!master) return;
  // Outside the connection's read loop: adopting closes and opens connections.
  asio::post(executor_, [weak = weak_from_this(), generation, master = std::move(*master)] {
    const auto self = weak.lock();
    if (!self || self->closing_ || generation != self->followed_generation_ ||
        !self->sentinel_link_)
      return;
    if (self->adopt(master)) self->learn_record_soon();
    self->send_waiting();
  });
}

void sentinel_router::on_sentinel_link(std::uint64_t generation, bool up) {
  if (up) return;
  asio::post(executor_, [weak = weak_from_this(), generation] {
    const auto self = weak.lock();
    if (!self || self->closing_ || generation != self->followed_generation_ ||
        !self->sentinel_link_)
      return;
    // Switches are no longer heard from that sentinel: another one is asked, and followed.
    self->sentinel_link_->close();
    self->sentinel_link_.reset();
    self->master_in_doubt(true);
  });
}

void sentinel_router::on_master_link(std::uint64_t generation, bool up, error_code why) {
  if (generation != master_generation_) return;  // a former master's link, draining
  if (settings_.on_link) settings_.on_link(up, why);
  if (up) return;
  asio::post(executor_, [weak = weak_from_this(), generation] {
    const auto self = weak.lock();
    if (!self || self->closing_ || generation != self->master_generation_) return;
    // A replica where the sentinel said master: that sentinel may be stale.
    const bool refused_as_replica =
        self->master_->last_error().find("ROLE says") != std::string::npos;
    self->master_in_doubt(refused_as_replica);
  });
}

sentinel_node::sentinel_node(const asio::any_io_executor& executor, node_config config,
                             connection_options settings, std::shared_ptr<peer_registry> peers,
                             std::size_t index)
    : lock_node(config),
      router_(std::make_shared<sentinel_router>(executor, std::move(config), std::move(settings),
                                                std::move(peers), index)) {}

sentinel_node::~sentinel_node() = default;

void sentinel_node::exec(const request& what, std::string_view payload, reply_sink& sink,
                         std::size_t tag, steady_clock::time_point now) {
  router_->exec(what, payload_ref::borrowed(payload), sink, tag, now);
}

void sentinel_node::exec(const request& what, const shared_payload& payload, reply_sink& sink,
                         std::size_t tag, steady_clock::time_point now) {
  router_->exec(what, payload_ref::shared(payload), sink, tag, now);
}

error_code sentinel_node::permanent_failure() const noexcept {
  return router_->permanent_failure();
}

const std::string& sentinel_node::last_error() const noexcept {
  return router_->last_error();
}

void sentinel_node::close_when_idle(std::chrono::milliseconds bound) {
  router_->close_when_idle(bound);
}

std::string sentinel_node::master_address() const {
  return router_->master_address();
}

master_record sentinel_node::last_master_change() const {
  return router_->last_change();
}

}  // namespace redlock::detail
