#include "lock_space.hpp"

#include "entropy.hpp"
#include "lock_handshake.hpp"
#include "net/writer_turns.hpp"

namespace redlock::detail {

namespace {

// The settings of a client's lock connections: the client's, with the handshake that loads the
// lock scripts and checks the user's permissions. They share their writers' turns: a lock round
// wakes every node's connection at once.
connection_options lock_connections(const client_options& options) {
  auto settings = connection_options::from(options);
  prepare_for_lock(settings);
  settings.shared_turns = std::make_shared<writer_turns>();
  return settings;
}

}  // namespace

lock_space::lock_space(boost::asio::any_io_executor executor, std::vector<node_config> nodes,
                       client_options options)
    : lock_home(executor, options, lock_random_seed()),
      nodes_(std::move(executor), std::move(nodes), options, lock_connections(options)) {}

release_announcements* lock_space::listener() {
  if (!announces_releases()) return nullptr;
  if (!listener_) {
    std::weak_ptr<lock_space> weak = weak_from_this();
    release_announcements::events on;
    on.released = [weak](std::size_t node, std::string_view resource) {
      if (auto self = weak.lock()) self->queues().on_release_announced(node, resource);
    };
    on.link_changed = [weak](std::size_t /*node*/, bool subscribed,
                             std::optional<std::uint16_t> slot) {
      if (auto self = weak.lock()) self->queues().on_subscription_changed(subscribed, slot);
    };
    on.wanted = [weak](std::string_view resource) {
      const auto self = weak.lock();
      return self && self->queues().any_waiting(resource);
    };
    listener_ = nodes_.listen_for_releases(options().release_channel, std::move(on));
  }
  return listener_.get();
}

void lock_space::close(std::chrono::milliseconds drain_bound) {
  mark_closed();
  if (listener_) listener_->close();
  nodes_.close_when_idle(drain_bound);
}

}  // namespace redlock::detail
