#ifndef REDLOCK_NODES_RELEASE_LISTENER_HPP
#define REDLOCK_NODES_RELEASE_LISTENER_HPP

#include "net/connection.hpp"
#include "nodes/cluster/shard_subscriptions.hpp"
#include "nodes/cluster/topology.hpp"
#include "redlock/node_config.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace redlock::detail {

// A client's subscriptions to the channel where releases are announced
// (client_options::release_channel), open only while some acquire of the client wants
// announcements (retain / release count them), so that no subscription is left on the servers once
// nobody waits.
//
// A standalone node gets one subscriber connection: an ordinary connection whose handshake ends
// with HELLO 3 and SUBSCRIBE (connection_options::subscribe_channel). It counts as subscribed once
// that handshake has completed, and every reconnect subscribes again. A cluster node announces a
// release only on the shard that owns the key's slot (SPUBLISH; see encode_release in
// ops/lock_requests.hpp), so its subscriptions are per slot, made for the slots of the resources
// waited on and following them when they move (shard_subscriptions). Whether a resource's releases
// would be heard is asked per resource (covers).
//
// Events reach the owner posted to the executor, never inside a connection's loops, so that they
// may start requests, finish operations and release the last interest (which closes the
// connections).
//
// A channel carries every release of every client of the fleet, and an announcement is only a
// hint (a waiter that misses one sleeps no longer than the holder's TTL). So a busy channel must
// not become an unbounded queue of posted handlers on a busy executor: announcements of resources
// the owner does not wait for (events::wanted) are dropped as they are read, and the others are
// gathered, each (node, resource) once, and delivered together by one posted handler.
//
// Thread safety: belongs to the client's executor.
class release_listener : public std::enable_shared_from_this<release_listener> {
 public:
  enum class link : std::uint8_t {
    off,         // nobody wants announcements
    connecting,  // the first connect of this interest (or a slot's subscription) is under way
    subscribed,  // announcements arrive
    down,        // the last attempt failed or the link broke; reconnecting
  };

  struct events {
    // `resource` was released on `node`.
    std::function<void(std::size_t node, std::string_view resource)> released;
    // Whether `resource` is worth a `released` event now. Asked inside the connection's read loop:
    // it must only look (no requests, no completions) and must not throw. Unset: every resource.
    std::function<bool(std::string_view resource)> wanted;
    // `node`'s subscription is now in place (true) or lost, or could not be made (false): for
    // every resource, or (`slot` set, a cluster node) for the resources of one hash slot.
    std::function<void(std::size_t node, bool subscribed, std::optional<std::uint16_t> slot)>
        link_changed;
  };

  // For a cluster node, where its lock requests send a slot now (node_set::cluster_master_of):
  // where a slot's subscription is tried first.
  using slot_master_fn =
      std::function<std::optional<cluster_endpoint>(std::size_t node, std::uint16_t slot)>;

  // For a sentinel node, its master now (node_set::sentinel_master_of): where its subscriber
  // connects, and connects again when a failover moved it.
  using sentinel_master_fn = std::function<std::optional<node_config>(std::size_t node)>;

  // `nodes` and `settings` as for the client's own connections; `channel` not empty.
  static std::shared_ptr<release_listener> create(boost::asio::any_io_executor executor,
                                                  std::vector<node_config> nodes,
                                                  connection_options settings, std::string channel,
                                                  slot_master_fn slot_master,
                                                  sentinel_master_fn sentinel_master, events on);

  // One more (one fewer) operation wants announcements about `resource`. The first opens the
  // connections, the last closes them. Each release() must name the resource of its retain().
  void retain(std::string_view resource);
  void release(std::string_view resource);
  std::size_t interest() const noexcept { return interest_; }

  // Node `node`'s subscription as far as `resource` is concerned.
  link state(std::size_t node, std::string_view resource) const noexcept;
  // Every node subscribed for `resource`: a release of it anywhere will be heard.
  bool covers(std::string_view resource) const noexcept;
  // No node still in its first attempt for `resource`: each is subscribed or known to be down.
  bool settled(std::string_view resource) const noexcept;

  // Closes every connection for good (the client shuts down); retain() does nothing afterwards.
  void close();

 private:
  release_listener(boost::asio::any_io_executor executor, std::vector<node_config> nodes,
                   connection_options settings, std::string channel, slot_master_fn slot_master,
                   sentinel_master_fn sentinel_master, events on);

  struct node_link {
    node_config config;
    std::shared_ptr<connection> conn;            // a standalone node's
    std::shared_ptr<shard_subscriptions> slots;  // a cluster node's
    link state = link::off;                      // a standalone node's
    // Told apart from the connections of an earlier interest, whose events may still be queued.
    std::uint64_t generation = 0;

    bool cluster() const noexcept { return config.kind == node_kind::cluster; }
  };

  void open(std::size_t node);
  void close_all();
  void on_push(std::size_t node, std::uint64_t generation, const resp::value& push);
  // A resource announced on `node` (read on the link of `generation`), gathered for delivery.
  void heard(std::size_t node, std::uint64_t generation, std::string_view resource);
  void on_link(std::size_t node, std::uint64_t generation, bool up);
  // Delivers what heard() gathered.
  void deliver_announcements();

  boost::asio::any_io_executor executor_;
  connection_options settings_;
  std::string channel_;
  slot_master_fn slot_master_;
  sentinel_master_fn sentinel_master_;
  events on_;
  std::vector<node_link> nodes_;
  // Announcements read and not yet delivered: by node, the resources (each once), and the link
  // generation they were read on. A handler to deliver them is posted while any is here.
  struct gathered {
    std::uint64_t generation = 0;
    std::unordered_set<std::string> resources;
  };
  std::vector<gathered> gathered_;
  bool delivery_posted_ = false;
  std::size_t interest_ = 0;
  std::uint64_t generations_ = 0;
  bool closed_ = false;
};

}  // namespace redlock::detail

#endif
