#ifndef REDLOCK_NODES_RELEASE_SUBSCRIPTION_HPP
#define REDLOCK_NODES_RELEASE_SUBSCRIPTION_HPP

#include "net/connection.hpp"
#include "nodes/lock_node.hpp"
#include "redlock/node_config.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace redlock::detail {

// The release announcements of one server (a standalone node, a sentinel node's master): one
// subscriber connection, an ordinary connection whose handshake ends with HELLO 3 and SUBSCRIBE
// (connection_options::subscribe_channel). It counts as subscribed once that handshake has
// completed, and every reconnect subscribes again.
//
// Events go to the announcement_events given at open(), under their rules (heard inside the read
// loop, link_changed posted), and never after close().
//
// Thread safety: belongs to the client's executor.
class release_subscription : public std::enable_shared_from_this<release_subscription> {
 public:
  // Starts connecting to `server` with `settings` (a subscriber's:
  // connection_options::for_subscriber) and subscribing to `channel`.
  static std::shared_ptr<release_subscription> open(const boost::asio::any_io_executor& executor,
                                                    node_config server, connection_options settings,
                                                    std::string channel, announcement_events on);

  subscription_state state() const noexcept { return state_; }
  // Closes the connection; nothing is reported afterwards.
  void close();

 private:
  release_subscription(boost::asio::any_io_executor executor, std::string channel,
                       announcement_events on)
      : executor_(std::move(executor)), channel_(std::move(channel)), on_(std::move(on)) {}

  void on_push(const resp::value& push);
  void on_link(bool up);

  boost::asio::any_io_executor executor_;
  std::string channel_;
  announcement_events on_;
  std::shared_ptr<connection> conn_;
  subscription_state state_ = subscription_state::connecting;
  bool closed_ = false;
};

}  // namespace redlock::detail

#endif
