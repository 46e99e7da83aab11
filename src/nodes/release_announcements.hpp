#ifndef REDLOCK_NODES_RELEASE_ANNOUNCEMENTS_HPP
#define REDLOCK_NODES_RELEASE_ANNOUNCEMENTS_HPP

#include "nodes/lock_node.hpp"

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

// The release announcements of a client's nodes (client_options::release_channel), heard while
// some acquire of the client wants them (retain / release count them), so that no subscription
// is left on the servers once nobody waits. Each node owns its subscriptions and makes them where
// its releases are announced, following failovers and slot moves itself
// (lock_node::subscribe_releases); what this class adds is the interest, the answer to "would a
// release of this resource be heard" (covers, settled), and the delivery.
//
// Events reach the owner posted to the executor, never inside a connection's loops, so that they
// may start requests, finish operations and release the last interest (which closes the
// subscriptions).
//
// A channel carries every release of every client of the fleet, and an announcement is only a
// hint (a waiter that misses one sleeps no longer than the holder's TTL). So a busy channel must
// not become an unbounded queue of posted handlers on a busy executor: announcements of resources
// the owner does not wait for (events::wanted) are dropped as they are read, and the others are
// gathered, each (node, resource) once, and delivered together by one posted handler.
//
// Thread safety: belongs to the client's executor.
class release_announcements : public std::enable_shared_from_this<release_announcements> {
 public:
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

  // `nodes` (number i is node i) must outlive this object's last call; `channel` not empty.
  static std::shared_ptr<release_announcements> create(boost::asio::any_io_executor executor,
                                                       std::vector<lock_node*> nodes,
                                                       std::string channel, events on);

  // One more (one fewer) operation wants announcements about `resource`. The first subscribes
  // every node, the last unsubscribes them. Each release() must name the resource of its retain().
  void retain(std::string_view resource);
  void release(std::string_view resource);
  std::size_t interest() const noexcept { return interest_; }

  // Node `node`'s subscription as far as `resource` is concerned.
  subscription_state state(std::size_t node, std::string_view resource) const noexcept;
  // Every node subscribed for `resource`: a release of it anywhere will be heard.
  bool covers(std::string_view resource) const noexcept;
  // No node still in its first attempt for `resource`: each is subscribed or known to be down.
  bool settled(std::string_view resource) const noexcept;

  // Unsubscribes for good (the client shuts down); retain() does nothing afterwards.
  void close();

 private:
  release_announcements(boost::asio::any_io_executor executor, std::vector<lock_node*> nodes,
                        std::string channel, events on);

  void open(std::size_t node);
  void close_all();
  // A resource announced on `node` (read on its subscription of `generation`), gathered for
  // delivery.
  void heard(std::size_t node, std::uint64_t generation, std::string_view resource);
  void on_link(std::size_t node, std::uint64_t generation, bool up,
               std::optional<std::uint16_t> slot);
  // Delivers what heard() gathered.
  void deliver_announcements();

  boost::asio::any_io_executor executor_;
  std::vector<lock_node*> nodes_;
  std::string channel_;
  events on_;
  // By node: the number of its current subscription, told apart from those of an earlier
  // interest, whose events may still be queued.
  std::vector<std::uint64_t> generation_;
  // Announcements read and not yet delivered: by node, the resources (each once), and the
  // subscription they were read on. A handler to deliver them is posted while any is here.
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
