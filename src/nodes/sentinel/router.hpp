#ifndef REDLOCK_NODES_SENTINEL_ROUTER_HPP
#define REDLOCK_NODES_SENTINEL_ROUTER_HPP

#include "clock.hpp"
#include "net/connection.hpp"
#include "net/connection_options.hpp"
#include "nodes/cluster/topology.hpp"
#include "nodes/forwarded_request.hpp"
#include "nodes/lock_node.hpp"
#include "nodes/paced_task.hpp"
#include "nodes/peer_registry.hpp"
#include "nodes/sentinel/replies.hpp"
#include "nodes/standalone_node.hpp"
#include "redlock/node_config.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

// Everything of a sentinel node (sentinel_node.hpp) that its requests may outlive the node for:
// the master's link, the sentinel link, the resolution. Requests in flight hold it through their
// sinks. Requests go out in the order issued (request_lanes, one lane: the master): one that waits
// for a master (the first one, or a new one after the link failed it unsent) keeps every later
// one behind it, and after a switch new requests wait until those in flight on the former
// master are answered.
//
// router.cpp sends the requests; resolution.cpp finds the master and follows it.
class sentinel_router : public std::enable_shared_from_this<sentinel_router> {
 public:
  // How often the sentinels are asked for the master at most (sentinel_node.hpp).
  static constexpr std::chrono::milliseconds min_resolve_interval{100};

  // A request while it waits in the lane or is in flight.
  struct waiting_request {
    payload_ref payload;
    request_options rules;
    unsigned replicas = 0;
    sink_ref sink;
    std::size_t tag = 0;
    std::optional<std::chrono::steady_clock::time_point> deadline;
    unsigned attempts = 0;
    std::string unreachable;  // why it waits although a master was known
  };
  using lane_ticket = request_lanes<waiting_request>::ticket;

  sentinel_router(boost::asio::any_io_executor executor, node_config config,
                  connection_options settings, std::shared_ptr<peer_registry> peers,
                  std::size_t index);

  void exec(const lock_node::request& what, payload_ref payload, reply_sink& sink, std::size_t tag,
            std::chrono::steady_clock::time_point now);

  boost::system::error_code permanent_failure() const noexcept {
    if (master_ && master_->permanent_failure()) return master_->permanent_failure();
    return master_ ? boost::system::error_code{} : lasting_;
  }
  const std::string& last_error() const noexcept {
    if (master_ && !master_->last_error().empty()) return master_->last_error();
    return last_error_;
  }

  void close_when_idle(std::chrono::milliseconds bound);
  // lock_node::watch_masters: told of every switch to another master (every key moved).
  void watch_masters(master_moved_fn on_moved) { on_moved_ = std::move(on_moved); }

  // lock_node's release subscription: on the master named now (release_subscription), and on each
  // one named after it, from the moment it is adopted. Down while no master is known yet.
  void subscribe_releases(const std::string& channel, announcement_events on);
  void unsubscribe_releases();
  subscription_state releases_subscription() const;

  std::string master_address() const { return master_at_ ? endpoint_text(*master_at_) : ""; }
  const master_record& last_change() const noexcept { return record_; }
  // Whether last_change() is as the sentinels told it for the master named now (their answer to
  // SENTINEL MASTER came, or could not come), rather than the moment this client adopted it.
  bool record_settled() const noexcept { return record_settled_; }
  const node_config& config() const noexcept { return config_; }

  // The master may have moved (READONLY, a lost or refused link): ask again, soon. With
  // `next_sentinel`, the sentinel that named it is not asked first (it may be stale).
  void master_in_doubt(bool next_sentinel) {
    if (next_sentinel) skip_sentinel_ = true;
    resolve_soon();
  }

  // Called by a request's sink (router.cpp), ticket `id` of the lane.
  //
  // Its answer is final: what waited behind it may go.
  void settle(lane_ticket id) {
    lanes_.settle(0, id);
    send_ready();
  }
  // It found the master unreachable, unsent (or it is a cleanup whose link broke): sent again,
  // in its place, to the master the next resolution names, within its deadline.
  void send_after_resolution(lane_ticket id, waiting_request request);

 private:
  void fail_later(sink_ref sink, std::size_t tag, boost::system::error_code ec, std::string text) {
    answer_later(executor_, std::move(sink), tag, ec, std::move(text));
  }

  // Sends ticket `id`, in flight on the current master's link from now on.
  void send(lane_ticket id, waiting_request request, std::chrono::steady_clock::time_point now);
  // Sends every waiting request whose turn has come (request_lanes::next).
  void send_ready();
  void watch_waiting();
  void fail_waiting(boost::system::error_code ec, std::string_view why);
  // A master was named (again): requests waiting for one go in their turn.
  void send_waiting();

  void resolve_soon();
  boost::asio::awaitable<void> resolve();
  // Asks sentinel `at`; its link becomes the subscriber when it answers. Empty when it named the
  // master, else what went wrong.
  boost::asio::awaitable<std::optional<std::string>> ask(const cluster_endpoint& at);
  // A subscriber link to sentinel `at`, numbered `generation` (its events name it).
  std::shared_ptr<connection> open_sentinel_link(const cluster_endpoint& at,
                                                 std::uint64_t& generation);
  void on_sentinel_push(std::uint64_t generation, const resp::value& push);
  void on_sentinel_link(std::uint64_t generation, bool up);
  // The current master's link is the node's (connection_options::on_link of the node, if any).
  void on_master_link(std::uint64_t generation, bool up, boost::system::error_code why);
  // Moves the node to `master`; false when it is there already (or closing).
  bool adopt(const cluster_endpoint& master);
  // Since when the followed sentinel names the master (SENTINEL MASTER), into record_.
  void learn_record_soon();
  boost::asio::awaitable<void> learn_record(std::shared_ptr<connection> link,
                                            cluster_endpoint master);

  boost::asio::any_io_executor executor_;
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
  // master_'s number, the route of the lane; 0 before the first master.
  std::uint64_t master_generation_ = 0;
  std::optional<cluster_endpoint> master_at_;
  master_record record_;
  bool record_settled_ = false;  // record_settled()
  master_moved_fn on_moved_;
  struct release_wish {
    std::string channel;
    announcement_events on;
  };
  std::optional<release_wish> releases_wanted_;   // subscribe_releases, until unsubscribed
  std::uint64_t releases_wanted_generation_ = 0;  // events of an earlier wish are void

  // The order of the requests: those waiting for their turn, for the first master, or for a new
  // one after the master was unreachable.
  timed_lanes<waiting_request> lanes_;
  bool sending_ready_ = false;  // in send_ready()
  paced_task resolution_;       // asking the sentinels for the master (resolution.cpp)
  bool closing_ = false;
  boost::system::error_code lasting_;
  std::string last_error_;
};

}  // namespace redlock::detail

#endif
