#include "nodes/release_subscription.hpp"

#include <boost/asio/post.hpp>

#include <utility>

namespace redlock::detail {

std::shared_ptr<release_subscription> release_subscription::open(
    const boost::asio::any_io_executor& executor, node_config server, connection_options settings,
    std::string channel, announcement_events on) {
  std::shared_ptr<release_subscription> self(
      new release_subscription(executor, std::move(channel), std::move(on)));
  std::weak_ptr<release_subscription> weak = self;
  settings.subscribe_channel = self->channel_;
  settings.on_push = [weak](const resp::value& push) {
    if (auto alive = weak.lock()) alive->on_push(push);
  };
  settings.on_link = [weak](bool up, boost::system::error_code) {
    if (auto alive = weak.lock()) alive->on_link(up);
  };
  self->conn_ = connection::create(executor, std::move(server), std::move(settings));
  self->conn_->start();
  return self;
}

void release_subscription::close() {
  closed_ = true;
  state_ = subscription_state::off;
  if (conn_) conn_->close();
}

void release_subscription::on_push(const resp::value& push) {
  // ["message", channel, resource]; confirmations and anything else are not announcements.
  if (closed_ || push.elements.size() != 3 || push.elements[0].text != "message" ||
      push.elements[1].text != channel_) {
    return;
  }
  if (on_.heard) on_.heard(push.elements[2].text);
}

void release_subscription::on_link(bool up) {
  // Inside the connection's run loop: the state changes, and the owner hears of it, posted.
  boost::asio::post(executor_, [weak = weak_from_this(), up] {
    const auto self = weak.lock();
    if (!self || self->closed_) return;
    self->state_ = up ? subscription_state::subscribed : subscription_state::down;
    if (self->on_.link_changed) self->on_.link_changed(up, std::nullopt);
  });
}

}  // namespace redlock::detail
