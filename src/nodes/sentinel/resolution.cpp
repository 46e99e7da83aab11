#include "clock.hpp"
#include "log.hpp"
#include "net/server_kind.hpp"
#include "nodes/sentinel/router.hpp"
#include "redlock/error.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <span>

// Finding the master through the sentinels and following it (sentinel_node.hpp).

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

void sentinel_router::resolve_soon() {
  if (closing_) return;
  const std::weak_ptr<sentinel_router> weak = weak_from_this();
  if (!resolution_.ask(true, weak, [](sentinel_router& self) { self.resolve_soon(); })) return;
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
  const bool again = resolution_.ended();
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
  if (again || !named) {
    // Unanswered: again after the reconnect backoff's ceiling, while anyone may still need it.
    const std::weak_ptr<sentinel_router> weak = weak_from_this();
    resolution_.retry_at(
        lock_clock::now() + (named ? min_resolve_interval : settings_.reconnect.max_delay), weak,
        [](sentinel_router& self) { self.resolve_soon(); });
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
  settings.expect = server_kind::sentinel;
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
  std::optional<std::string> problem;
  std::optional<cluster_endpoint> master;
  if (closing_) {
    problem = "the client is shutting down";
  } else if (ec) {
    if (ec == condition::node_failure || ec == error::invalid_argument) lasting_ = ec;
    problem = reply.text.empty() ? fmt::format("{}: {}", where, ec.message()) : reply.text;
  } else {
    auto answer = read_master_answer(reply, where, config_.sentinel_master);
    // A name the sentinels do not monitor: the URL names a master that is not there.
    if (!answer.master && answer.unknown_name) lasting_ = make_error_code(error::wrong_node_kind);
    master = answer.master;
    if (!master) problem = std::move(answer.problem);
  }
  if (problem) {
    // A link opened only to ask this sentinel is not kept.
    if (link != sentinel_link_) link->close();
    co_return problem;
  }
  if (link != sentinel_link_) {
    // This sentinel answers: it is the one whose +switch-master we follow from now on.
    if (sentinel_link_) sentinel_link_->close();
    sentinel_link_ = std::move(link);
    followed_generation_ = generation;
  }
  if (adopt(*master)) learn_record_soon();
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
  if (closing_ || master_at_ != master) co_return;  // moved on meanwhile: not its record
  if (auto record = ec ? std::nullopt : read_master_record(reply, master, lock_wall_now())) {
    record_ = *record;
  }
  record_settled_ = true;
}

bool sentinel_router::adopt(const cluster_endpoint& master) {
  if (master_at_ == master || closing_) return false;
  if (master_) {
    // Its requests are answered first; releases it keeps wait for a reconnect within their
    // lifetime, where the key is ours or gone. Its announcements are no longer ours.
    master_->unsubscribe_releases();
    master_->close_when_idle(settings_.connect_timeout + std::chrono::milliseconds(1000));
  }
  auto settings = settings_;
  settings.admit_peer = peer_registry::check_for(peers_, index_, 0);
  settings.expect = server_kind::standalone;
  const auto generation = ++master_generation_;
  std::weak_ptr<sentinel_router> weak = weak_from_this();
  settings.on_link = [weak, generation](bool up, error_code why) {
    if (auto self = weak.lock()) self->on_master_link(generation, up, why);
  };
  master_ =
      std::make_unique<standalone_node>(executor_, server_of(config_, master), std::move(settings));
  const bool first = !master_at_;
  master_at_ = master;
  record_ = master_record{.since = lock_wall_now(), .config_epoch = std::nullopt};
  record_settled_ = false;  // until learn_record has the sentinels' answer
  if (settings_.logger) {
    call_logger(
        settings_.logger, executor_, log_level::info,
        fmt::format("{}: the sentinels name {} as master \"{}\"{}", config_.address(),
                    endpoint_text(master), config_.sentinel_master, first ? "" : " (it moved)"));
  }
  if (releases_wanted_) {
    // Releases here are announced on the new master from now on. Until its subscription is in
    // place, a release there may go unheard: the subscription counts as lost meanwhile.
    master_->subscribe_releases(releases_wanted_->channel, releases_wanted_->on);
    if (!first && releases_wanted_->on.link_changed) {
      asio::post(executor_, [weak, wish = releases_wanted_generation_] {
        const auto self = weak.lock();
        if (self && self->releases_wanted_ && self->releases_wanted_generation_ == wish)
          self->releases_wanted_->on.link_changed(false, std::nullopt);
      });
    }
  }
  if (!first && on_moved_) {
    // Leases held here renew on the new master at once (lock_node::watch_masters); posted, never
    // inside the resolution or the push that taught it.
    asio::post(executor_,
               [on_moved = on_moved_] { on_moved(master_moved{.every_key = true, .slots = {}}); });
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

}  // namespace redlock::detail
