#include "nodes/release_announcements.hpp"

#include <boost/asio/post.hpp>

#include <utility>

namespace redlock::detail {

namespace asio = boost::asio;

std::shared_ptr<release_announcements> release_announcements::create(asio::any_io_executor executor,
                                                                     std::vector<lock_node*> nodes,
                                                                     std::string channel,
                                                                     events on) {
  return std::shared_ptr<release_announcements>(new release_announcements(
      std::move(executor), std::move(nodes), std::move(channel), std::move(on)));
}

release_announcements::release_announcements(asio::any_io_executor executor,
                                             std::vector<lock_node*> nodes, std::string channel,
                                             events on)
    : executor_(std::move(executor)),
      nodes_(std::move(nodes)),
      channel_(std::move(channel)),
      on_(std::move(on)),
      generation_(nodes_.size()),
      gathered_(nodes_.size()) {}

void release_announcements::retain(std::string_view resource) {
  if (closed_) return;
  if (interest_++ == 0) {
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      open(i);
  }
  for (auto* node : nodes_)
    node->want_releases(resource);
}

void release_announcements::release(std::string_view resource) {
  if (interest_ == 0) return;
  for (auto* node : nodes_)
    node->unwant_releases(resource);
  if (--interest_ == 0) close_all();
}

subscription_state release_announcements::state(std::size_t node,
                                                std::string_view resource) const noexcept {
  if (interest_ == 0) return subscription_state::off;
  return nodes_[node]->releases_subscription(resource);
}

bool release_announcements::covers(std::string_view resource) const noexcept {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (state(i, resource) != subscription_state::subscribed) return false;
  }
  return true;
}

bool release_announcements::settled(std::string_view resource) const noexcept {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (state(i, resource) == subscription_state::connecting) return false;
  }
  return true;
}

void release_announcements::close() {
  closed_ = true;
  interest_ = 0;
  close_all();
}

void release_announcements::open(std::size_t node) {
  const auto generation = generation_[node] = ++generations_;
  std::weak_ptr<release_announcements> weak = weak_from_this();
  announcement_events on;
  on.heard = [weak, node, generation](std::string_view resource) {
    if (auto self = weak.lock()) self->heard(node, generation, resource);
  };
  on.link_changed = [weak, node, generation](bool up, std::optional<std::uint16_t> slot) {
    if (auto self = weak.lock()) self->on_link(node, generation, up, slot);
  };
  nodes_[node]->subscribe_releases(channel_, std::move(on));
}

void release_announcements::close_all() {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->unsubscribe_releases();
    generation_[i] = ++generations_;  // events of the closed subscriptions are ignored
  }
}

void release_announcements::heard(std::size_t node, std::uint64_t generation,
                                  std::string_view resource) {
  if (on_.wanted && !on_.wanted(resource)) return;
  auto& here = gathered_[node];
  if (here.generation != generation) {
    here.resources.clear();  // read on an earlier subscription, whose events are void
    here.generation = generation;
  }
  here.resources.emplace(resource);
  if (std::exchange(delivery_posted_, true)) return;
  asio::post(executor_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->deliver_announcements();
  });
}

void release_announcements::deliver_announcements() {
  delivery_posted_ = false;
  // Taken out first: a delivery may unsubscribe or let new announcements be gathered.
  std::vector<gathered> batch(gathered_.size());
  batch.swap(gathered_);
  for (std::size_t node = 0; node < batch.size(); ++node) {
    for (const auto& resource : batch[node].resources) {
      // A node unsubscribed or subscribed again meanwhile: those announcements are void.
      if (generation_[node] != batch[node].generation) break;
      if (on_.released) on_.released(node, resource);
    }
  }
}

void release_announcements::on_link(std::size_t node, std::uint64_t generation, bool up,
                                    std::optional<std::uint16_t> slot) {
  // Posted by the node already (announcement_events::link_changed).
  if (generation_[node] != generation) return;
  if (on_.link_changed) on_.link_changed(node, up, slot);
}

}  // namespace redlock::detail
