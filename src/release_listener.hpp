#ifndef REDLOCK_RELEASE_LISTENER_HPP
#define REDLOCK_RELEASE_LISTENER_HPP

#include "net/connection.hpp"
#include "redlock/node_config.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace redlock::detail {

// A client's subscriptions to the channel where releases are announced
// (client_options::release_channel): one subscriber connection per node, open only while some
// acquire of the client wants announcements (retain / release count them), so that no subscription
// is left on the servers once nobody waits.
//
// A subscriber connection is an ordinary connection whose handshake ends with HELLO 3 and
// SUBSCRIBE (connection_options::subscribe_channel): a node counts as subscribed once that
// handshake has completed, and every reconnect subscribes again. Events reach the owner posted to
// the executor, never inside a connection's loops, so that they may start requests, finish
// operations and release the last interest (which closes the connections).
//
// The channel carries every release of every client of the fleet, and an announcement is only a
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
    connecting,  // the first connect of this interest is under way
    subscribed,  // announcements arrive
    down,        // the last attempt failed or the link broke; reconnecting
  };

  struct events {
    // `resource` was released on `node`.
    std::function<void(std::size_t node, std::string_view resource)> released;
    // Whether `resource` is worth a `released` event now. Asked inside the connection's read loop:
    // it must only look (no requests, no completions) and must not throw. Unset: every resource.
    std::function<bool(std::string_view resource)> wanted;
    // `node`'s subscription is now in place (true) or lost, or could not be made (false).
    std::function<void(std::size_t node, bool subscribed)> link_changed;
  };

  // `nodes` and `settings` as for the client's own connections; `channel` not empty.
  static std::shared_ptr<release_listener> create(boost::asio::any_io_executor executor,
                                                  std::vector<node_config> nodes,
                                                  connection_options settings, std::string channel,
                                                  events on);

  // One more (one fewer) operation wants announcements. The first opens the connections, the
  // last closes them.
  void retain();
  void release();
  std::size_t interest() const noexcept { return interest_; }

  link state(std::size_t node) const noexcept { return nodes_[node].state; }
  // Every node subscribed: a release anywhere will be heard.
  bool all_subscribed() const noexcept;
  // No node still in its first connect: each is subscribed or known to be down.
  bool all_settled() const noexcept;

  // Closes every connection for good (the client shuts down); retain() does nothing afterwards.
  void close();

 private:
  release_listener(boost::asio::any_io_executor executor, std::vector<node_config> nodes,
                   connection_options settings, std::string channel, events on);

  struct node_link {
    node_config config;
    std::shared_ptr<connection> conn;
    link state = link::off;
    // Told apart from the connections of an earlier interest, whose events may still be queued.
    std::uint64_t generation = 0;
  };

  void open(std::size_t node);
  void close_all();
  void on_push(std::size_t node, std::uint64_t generation, const resp::value& push);
  void on_link(std::size_t node, std::uint64_t generation, bool up);
  // Delivers what on_push gathered.
  void deliver_announcements();

  boost::asio::any_io_executor executor_;
  connection_options settings_;
  std::string channel_;
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
