#ifndef REDLOCK_NODES_CLUSTER_ROUTER_HPP
#define REDLOCK_NODES_CLUSTER_ROUTER_HPP

#include "algo/hash_slot.hpp"
#include "clock.hpp"
#include "net/connection.hpp"
#include "net/connection_options.hpp"
#include "nodes/cluster/topology.hpp"
#include "nodes/forwarded_request.hpp"
#include "nodes/lock_node.hpp"
#include "nodes/paced_task.hpp"
#include "nodes/peer_registry.hpp"
#include "redlock/node_config.hpp"
#include "resp/encoder.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;

constexpr std::uint16_t no_master = std::numeric_limits<std::uint16_t>::max();

inline shared_payload encoded(std::initializer_list<std::string_view> command) {
  std::string bytes;
  resp::encode_command(bytes, command);
  return std::make_shared<const std::string>(std::move(bytes));
}

// Everything of a cluster node that its requests may outlive the node for: the routes, the shard
// connections, the refresh. Requests in flight hold it through their sinks.
//
// Order: every request about a key is ticketed in its slot's lane (request_lanes), which decides
// when it may go and where; a request that must be sent again (a redirection, an unreachable
// master) keeps its place there, so later requests of the slot never overtake it.
class cluster_router : public std::enable_shared_from_this<cluster_router> {
 public:
  // How often one request follows MOVED or ASK at most, and how often the topology is read at
  // most (cluster_node.hpp).
  static constexpr unsigned max_redirects = 5;
  static constexpr std::chrono::milliseconds min_refresh_interval{100};

  // A request of one slot (or, before the first topology, of no key: `slot` empty) while it waits
  // in its lane or is routed.
  struct waiting_request {
    std::optional<std::uint16_t> slot;
    payload_ref payload;
    request_options rules;
    unsigned replicas = 0;
    sink_ref sink;
    std::size_t tag = 0;
    std::optional<steady_clock::time_point> deadline;
    unsigned redirects = 0;
    // Why it waits for a new topology although one is known: its slot's master was unreachable
    // (rare: held apart, so that moving a request moves a pointer, not a string).
    std::unique_ptr<const std::string> unreachable;
    // After an ASK: it alone goes to the ASK's target (its lane entry is pinned to that route),
    // behind an ASKING.
    bool asking = false;
  };
  using lane_ticket = request_lanes<waiting_request>::ticket;

  cluster_router(asio::any_io_executor executor, node_config config, connection_options settings,
                 std::shared_ptr<peer_registry> peers, std::size_t index)
      : executor_(std::move(executor)),
        config_(std::move(config)),
        settings_(std::move(settings)),
        peers_(std::move(peers)),
        index_(index),
        seeds_(address_and_seeds(config_)),
        slot_owner_(cluster_slot_count, no_master),
        lanes_(executor_),
        refresh_(executor_, min_refresh_interval) {}
  ~cluster_router();

  // A request about a key of hash slot `slot` (nullopt: about no key) as lock_node::exec.
  void exec(std::optional<std::uint16_t> slot, payload_ref payload, const request_options& rules,
            unsigned replicas, reply_sink& sink, std::size_t tag, steady_clock::time_point now);

  error_code permanent_failure() const noexcept { return known_ ? error_code{} : lasting_; }
  const std::string& last_error() const noexcept { return last_error_; }

  void close_when_idle(std::chrono::milliseconds bound) {
    closing_ = true;
    refresh_.cancel();
    fail_waiting(asio::error::operation_aborted, "the client is shutting down");
    for (auto& link : links_)
      link.conn->close_when_idle(bound);
  }

  // lock_node::watch_masters.
  void watch_masters(master_moved_fn on_moved) { on_moved_ = std::move(on_moved); }

  std::optional<cluster_endpoint> master_of(std::uint16_t slot) const {
    const auto owner = slot_owner_[slot];
    if (owner == no_master) return std::nullopt;
    return *links_[owner].at;
  }

  // Called by a routed request's sink (router.cpp), ticket `id` of its slot's lane.
  //
  // Its answer is final: what waited behind it may go.
  void settle(std::uint16_t slot, lane_ticket id) {
    lanes_.settle(slot, id);
    send_ready();
  }
  // It met a redirection: MOVED re-points its slot, and it follows there (ASK: it alone goes to
  // the target, after ASKING), in its place in the lane.
  void follow(const cluster_redirect& redirect, lane_ticket id, waiting_request request);
  // It found its slot's master unreachable (error::not_connected: it was not sent), or it is a
  // cleanup whose link broke: it waits for the next topology and is routed again by it, within
  // its deadline, in its place in the lane (after a failover the routes are stale until then,
  // and a release must still reach the new master).
  void route_after_refresh(lane_ticket id, waiting_request request);
  void route_changed() { refresh_soon(); }

  const node_config& config() const noexcept { return config_; }
  const asio::any_io_executor& executor() const noexcept { return executor_; }

  void fail_later(sink_ref sink, std::size_t tag, error_code ec, std::string text) {
    answer_later(executor_, std::move(sink), tag, ec, std::move(text));
  }

 private:
  // The sink of one routed request (router.cpp); spares are reused.
  class routed_request;
  struct routed_request_deleter {
    void operator()(routed_request* spare) const noexcept;
  };
  routed_request* make_routed(waiting_request&& request, lane_ticket id,
                              const std::shared_ptr<const cluster_endpoint>& sent_to);
  void keep_spare(routed_request* spare) noexcept;
  // As many as requests in flight at once need, within reason.
  static constexpr std::size_t max_spare_routed = 1024;

  // Requests about no key issued before the first topology wait in this lane, which no slot has.
  static constexpr std::uint32_t keyless_lane = cluster_slot_count;

  struct link {
    // Shared with the requests sent on it: they name it in errors and redirections, also after
    // the link was dropped.
    std::shared_ptr<const cluster_endpoint> at;
    std::shared_ptr<connection> conn;
    std::uint64_t route;       // its number as a route of the lanes; never reused
    std::size_t number;        // for the peer registry; reused once the link is dropped
    std::optional<bool> up{};  // as its last connect or break said; empty before the first
    error_code why{};          // of its last break or failed connect
  };

  static std::optional<steady_clock::time_point> deadline_of(const request_options& rules,
                                                             steady_clock::time_point now) {
    if (rules.timeout.count() <= 0) return std::nullopt;
    return now + rules.timeout;
  }

  std::uint16_t link_index(const cluster_endpoint& at) {
    for (std::size_t i = 0; i < links_.size(); ++i) {
      if (*links_[i].at == at) return static_cast<std::uint16_t>(i);
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
    settings.expect = server_kind::cluster;
    if (settings_.on_link) {
      settings.on_link = [weak = weak_from_this(), at](bool up, error_code why) {
        if (auto self = weak.lock()) self->on_server_link(at, up, why);
      };
    }
    links_.push_back(
        link{std::make_shared<const cluster_endpoint>(at),
             connection::create(executor_, server_of(config_, at), std::move(settings)),
             ++routes_opened_, number});
    return static_cast<std::uint16_t>(links_.size() - 1);
  }

  void send_everywhere(const payload_ref& payload, const request_options& rules, reply_sink& sink,
                       std::size_t tag, steady_clock::time_point now);
  // Sends ticket `id` of `slot`'s lane, in flight on `route` (request_lanes) from now on.
  void route(std::uint16_t slot, lane_ticket id, std::uint64_t route, waiting_request&& request,
             steady_clock::time_point now);
  // The route of a lane now: its slot's master's link, or 0 when none serves it.
  std::uint64_t route_of(std::uint32_t lane) const noexcept;
  // Sends every waiting request whose turn has come (request_lanes::next).
  void send_ready();

  // Fails waiting requests whose deadline has passed and keeps the timer armed for the next.
  void watch_waiting();
  void fail_waiting(error_code ec, std::string_view why);
  // A new topology: requests waiting for one go in their turn.
  void send_waiting();
  // Tells on_moved_ (posted) of slots whose master changed from one known to another.
  void report_moved(std::vector<std::uint16_t> slots);

  void refresh_soon();
  asio::awaitable<void> refresh();
  // Reads a topology from `at`; the problem in words when it gives none.
  asio::awaitable<std::optional<std::string>> read_topology_from(const cluster_endpoint& at);
  void adopt(const cluster_topology& topology);

  // The node's link state (connection_options::on_link of the node, set only when someone
  // listens) is its servers': down while any server it routes to is unreachable, up once every
  // one that has tried is connected. Links dropped by adopt() no longer count.
  void on_server_link(const cluster_endpoint& at, bool up, error_code why);
  void report_links() const;

  asio::any_io_executor executor_;
  node_config config_;
  connection_options settings_;
  std::shared_ptr<peer_registry> peers_;
  std::size_t index_;
  std::vector<cluster_endpoint> seeds_;

  std::vector<link> links_;                // every server this node has talked to
  std::vector<std::uint16_t> slot_owner_;  // by slot: index into links_, or no_master
  bool known_ = false;                     // a topology was read at least once
  std::uint64_t routes_opened_ = 0;
  // The order of each slot's requests: those waiting for their turn, for the first topology, or
  // for a new one after an unreachable master.
  timed_lanes<waiting_request> lanes_;
  bool sending_ready_ = false;  // in send_ready()
  master_moved_fn on_moved_;

  paced_task refresh_;  // the topology's refresh (topology_refresh.cpp)

  error_code lasting_;  // why no topology can be read until a configuration changes
  // Sinks of requests answered, for the next ones (routed_request).
  std::vector<std::unique_ptr<routed_request, routed_request_deleter>> spare_routed_;
  std::vector<std::size_t> free_numbers_;  // of dropped links
  std::string last_error_;
  bool closing_ = false;
};

}  // namespace redlock::detail

#endif
