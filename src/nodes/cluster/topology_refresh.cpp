#include "clock.hpp"
#include "net/server_kind.hpp"
#include "nodes/cluster/router.hpp"
#include "redlock/error.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;

namespace {

const shared_payload& cluster_shards_command() {
  static const shared_payload command = encoded({"CLUSTER", "SHARDS"});
  return command;
}

const shared_payload& cluster_slots_command() {
  static const shared_payload command = encoded({"CLUSTER", "SLOTS"});
  return command;
}

}  // namespace

void cluster_router::refresh_soon() {
  if (closing_) return;
  // Paced once a topology is known: before that, every request waits for one.
  const std::weak_ptr<cluster_router> weak = weak_from_this();
  if (!refresh_.ask(known_, weak, [](cluster_router& self) { self.refresh_soon(); })) return;
  // The function object lives as long as the coroutine, and with it the router.
  asio::co_spawn(
      executor_, [self = shared_from_this()] { return self->refresh(); }, asio::detached);
}

asio::awaitable<void> cluster_router::refresh() {
  // Known masters first (they answer fastest and know the newest epoch), then the seeds.
  std::vector<cluster_endpoint> candidates;
  for (const auto owner : slot_owner_) {
    if (owner == no_master) continue;
    const auto& at = *links_[owner].at;
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
  const bool again = refresh_.ended();
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
  if (again) refresh_soon();
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
    // A server that did not say its mode in the handshake (no HELLO).
    lasting_ = make_error_code(error::wrong_node_kind);
    co_return fmt::format("{}: the server is not a Redis Cluster node ({}): use {}", where,
                          reply.text, url_as(server_of(config_, at), node_kind::standalone));
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
  // Slots whose master changed from one known to another (a failover, a migration): leases held
  // there renew at once (lock_node::watch_masters).
  const auto owners = topology.masters_by_slot();
  std::vector<std::uint16_t> moved;
  if (on_moved_) {
    // Consecutive slots mostly share both owners: each pair's endpoints are compared once.
    std::uint16_t before_seen = no_master;
    std::uint32_t now_seen = cluster_topology::unserved;
    bool differs = false;
    for (std::size_t slot = 0; slot < cluster_slot_count; ++slot) {
      const auto before = slot_owner_[slot];
      const auto now = owners[slot];
      if (before == no_master || now == cluster_topology::unserved) continue;
      if (before != before_seen || now != now_seen) {
        before_seen = before;
        now_seen = now;
        differs = masters[now] != *links_[before].at;
      }
      if (differs) moved.push_back(static_cast<std::uint16_t>(slot));
    }
  }
  std::erase_if(links_, [&](const link& l) {
    if (std::find(masters.begin(), masters.end(), *l.at) != masters.end()) return false;
    l.conn->close_when_idle(settings_.connect_timeout + std::chrono::milliseconds(1000));
    peers_->forget(index_, l.number);
    free_numbers_.push_back(l.number);
    return true;
  });
  // Each master's link is looked up (or opened) once, in slot order as before.
  std::vector<std::uint16_t> link_of_master(masters.size(), no_master);
  for (std::size_t slot = 0; slot < cluster_slot_count; ++slot) {
    const auto owner = owners[slot];
    if (owner == cluster_topology::unserved) {
      slot_owner_[slot] = no_master;
      continue;
    }
    if (link_of_master[owner] == no_master) link_of_master[owner] = link_index(masters[owner]);
    slot_owner_[slot] = link_of_master[owner];
  }
  known_ = true;
  if (settings_.on_link) report_links();
  report_moved(std::move(moved));
}

void cluster_router::on_server_link(const cluster_endpoint& at, bool up, error_code why) {
  const auto known =
      std::find_if(links_.begin(), links_.end(), [&](const link& l) { return *l.at == at; });
  if (known == links_.end()) return;  // dropped: draining its last requests
  known->up = up;
  known->why = why;
  report_links();
}

void cluster_router::report_links() const {
  const link* down = nullptr;
  bool any_up = false;
  for (const auto& l : links_) {
    if (l.up == false && down == nullptr) down = &l;
    any_up = any_up || l.up == true;
  }
  if (down != nullptr) return settings_.on_link(false, down->why);
  if (any_up) settings_.on_link(true, error_code{});
}

}  // namespace redlock::detail
