#include "nodes/release_listener.hpp"

#include "algo/hash_slot.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <utility>

namespace redlock::detail {

namespace asio = boost::asio;

std::shared_ptr<release_listener> release_listener::create(
    asio::any_io_executor executor, std::vector<node_config> nodes, connection_options settings,
    std::string channel, slot_master_fn slot_master, sentinel_master_fn sentinel_master,
    events on) {
  return std::shared_ptr<release_listener>(new release_listener(
      std::move(executor), std::move(nodes), std::move(settings), std::move(channel),
      std::move(slot_master), std::move(sentinel_master), std::move(on)));
}

release_listener::release_listener(asio::any_io_executor executor, std::vector<node_config> nodes,
                                   connection_options settings, std::string channel,
                                   slot_master_fn slot_master, sentinel_master_fn sentinel_master,
                                   events on)
    : executor_(std::move(executor)),
      settings_(std::move(settings)),
      channel_(std::move(channel)),
      slot_master_(std::move(slot_master)),
      sentinel_master_(std::move(sentinel_master)),
      on_(std::move(on)) {
  // A subscriber runs no scripts and needs no permission probes: its handshake is AUTH, SELECT,
  // the name, HELLO 3 and SUBSCRIBE.
  settings_.preload.clear();
  settings_.permission_probes.clear();
  nodes_.reserve(nodes.size());
  for (auto& node : nodes) {
    nodes_.emplace_back();
    nodes_.back().config = std::move(node);
  }
  gathered_.resize(nodes_.size());
}

void release_listener::retain(std::string_view resource) {
  if (closed_) return;
  if (interest_++ == 0) {
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      open(i);
  }
  for (auto& n : nodes_) {
    if (n.slots) n.slots->want(hash_slot(resource));
  }
}

void release_listener::release(std::string_view resource) {
  if (interest_ == 0) return;
  for (auto& n : nodes_) {
    if (n.slots) n.slots->unwant(hash_slot(resource));
  }
  if (--interest_ == 0) close_all();
}

release_listener::link release_listener::state(std::size_t node,
                                               std::string_view resource) const noexcept {
  const auto& n = nodes_[node];
  if (!n.cluster()) return n.state;
  if (!n.slots) return link::off;
  switch (n.slots->of(hash_slot(resource))) {
    case shard_subscriptions::state::none:
      return link::off;
    case shard_subscriptions::state::connecting:
      return link::connecting;
    case shard_subscriptions::state::subscribed:
      return link::subscribed;
    case shard_subscriptions::state::down:
      return link::down;
  }
  return link::off;
}

bool release_listener::covers(std::string_view resource) const noexcept {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (state(i, resource) != link::subscribed) return false;
  }
  return true;
}

bool release_listener::settled(std::string_view resource) const noexcept {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (state(i, resource) == link::connecting) return false;
  }
  return true;
}

void release_listener::close() {
  closed_ = true;
  interest_ = 0;
  close_all();
}

void release_listener::open(std::size_t node) {
  auto& n = nodes_[node];
  n.generation = ++generations_;
  n.state = link::connecting;
  std::weak_ptr<release_listener> weak = weak_from_this();
  const auto generation = n.generation;
  if (n.cluster()) {
    shard_subscriptions::events on;
    on.heard = [weak, node, generation](std::string_view resource) {
      if (auto self = weak.lock()) self->heard(node, generation, resource);
    };
    on.slot_changed = [weak, node, generation](std::uint16_t slot, bool subscribed) {
      const auto self = weak.lock();
      if (!self || self->nodes_[node].generation != generation) return;
      if (self->on_.link_changed) self->on_.link_changed(node, subscribed, slot);
    };
    auto slot_master = [weak, node](std::uint16_t slot) -> std::optional<cluster_endpoint> {
      const auto self = weak.lock();
      if (!self || !self->slot_master_) return std::nullopt;
      return self->slot_master_(node, slot);
    };
    n.slots = shard_subscriptions::create(executor_, n.config, settings_, channel_,
                                          std::move(slot_master), std::move(on));
    return;
  }
  auto settings = settings_;
  settings.subscribe_channel = channel_;
  settings.on_push = [weak, node, generation](const resp::value& push) {
    if (auto self = weak.lock()) self->on_push(node, generation, push);
  };
  settings.on_link = [weak, node, generation](bool up, boost::system::error_code) {
    if (auto self = weak.lock()) self->on_link(node, generation, up);
  };
  // A sentinel node's releases are announced on its master, wherever the sentinels put it.
  auto server = n.config;
  if (n.config.kind == node_kind::sentinel) {
    auto master = sentinel_master_ ? sentinel_master_(node) : std::nullopt;
    if (!master) {
      n.state = link::down;  // not resolved yet: looked for again at the next interest
      return;
    }
    server = std::move(*master);
  }
  n.conn = connection::create(executor_, std::move(server), std::move(settings));
  n.conn->start();
}

void release_listener::close_all() {
  for (auto& n : nodes_) {
    if (n.conn) n.conn->close();
    n.conn.reset();
    if (n.slots) n.slots->close();
    n.slots.reset();
    n.state = link::off;
    n.generation = ++generations_;  // events of the closed connections are ignored
  }
}

void release_listener::on_push(std::size_t node, std::uint64_t generation,
                               const resp::value& push) {
  // ["message", channel, resource]; confirmations and anything else are not announcements.
  if (push.elements.size() != 3 || push.elements[0].text != "message" ||
      push.elements[1].text != channel_) {
    return;
  }
  heard(node, generation, push.elements[2].text);
}

void release_listener::heard(std::size_t node, std::uint64_t generation,
                             std::string_view resource) {
  if (on_.wanted && !on_.wanted(resource)) return;
  auto& here = gathered_[node];
  if (here.generation != generation) {
    here.resources.clear();  // read on an earlier link, whose events are void
    here.generation = generation;
  }
  here.resources.emplace(resource);
  if (std::exchange(delivery_posted_, true)) return;
  asio::post(executor_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->deliver_announcements();
  });
}

void release_listener::deliver_announcements() {
  delivery_posted_ = false;
  // Taken out first: a delivery may close the connections or let new announcements be gathered.
  std::vector<gathered> batch(gathered_.size());
  batch.swap(gathered_);
  for (std::size_t node = 0; node < batch.size(); ++node) {
    for (const auto& resource : batch[node].resources) {
      // A node closed or reconnected meanwhile: those announcements are void.
      if (nodes_[node].generation != batch[node].generation) break;
      if (on_.released) on_.released(node, resource);
    }
  }
}

void release_listener::on_link(std::size_t node, std::uint64_t generation, bool up) {
  asio::post(executor_, [weak = weak_from_this(), node, generation, up] {
    auto self = weak.lock();
    if (!self || self->nodes_[node].generation != generation) return;
    auto& n = self->nodes_[node];
    n.state = up ? link::subscribed : link::down;
    if (self->on_.link_changed) self->on_.link_changed(node, up, std::nullopt);
    if (!up && n.config.kind == node_kind::sentinel && self->sentinel_master_) {
      // Its master may have moved: subscribe where the sentinels say it is now.
      const auto master = self->sentinel_master_(node);
      if (master && n.conn &&
          (master->host != n.conn->node().host || master->port != n.conn->node().port)) {
        n.conn->close();
        self->open(node);
      }
    }
  });
}

}  // namespace redlock::detail
