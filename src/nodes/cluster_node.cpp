#include "nodes/cluster_node.hpp"

#include "algo/hash_slot.hpp"
#include "nodes/cluster/router.hpp"
#include "nodes/cluster/shard_subscriptions.hpp"

#include <memory>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;

cluster_node::cluster_node(const asio::any_io_executor& executor, node_config config,
                           connection_options settings, std::shared_ptr<peer_registry> peers,
                           std::size_t index)
    : lock_node(config),
      executor_(executor),
      subscriber_settings_(connection_options::for_subscriber(settings)),
      router_(std::make_shared<cluster_router>(executor, std::move(config), std::move(settings),
                                               std::move(peers), index)) {}

cluster_node::~cluster_node() {
  unsubscribe_releases();
}

namespace {

std::optional<std::uint16_t> slot_of(const lock_node::request& what) noexcept {
  if (what.key.empty()) return std::nullopt;
  return what.slot ? *what.slot : hash_slot(what.key);
}

}  // namespace

void cluster_node::exec(const request& what, std::string_view payload, reply_sink& sink,
                        std::size_t tag, steady_clock::time_point now) {
  router_->exec(slot_of(what), payload_ref::borrowed(payload), what.rules, what.replicas, sink, tag,
                now);
}

void cluster_node::exec(const request& what, const shared_payload& payload, reply_sink& sink,
                        std::size_t tag, steady_clock::time_point now) {
  router_->exec(slot_of(what), payload_ref::shared(payload), what.rules, what.replicas, sink, tag,
                now);
}

error_code cluster_node::permanent_failure() const noexcept {
  return router_->permanent_failure();
}

const std::string& cluster_node::last_error() const noexcept {
  return router_->last_error();
}

void cluster_node::close_when_idle(std::chrono::milliseconds bound) {
  router_->close_when_idle(bound);
}

void cluster_node::watch_masters(master_moved_fn on_moved) {
  router_->watch_masters(std::move(on_moved));
}

std::string cluster_node::master_for(std::string_view key) const {
  const auto master = router_->master_of(hash_slot(key));
  return master ? endpoint_text(*master) : std::string();
}

std::optional<cluster_endpoint> cluster_node::master_of(std::uint16_t slot) const {
  return router_->master_of(slot);
}

void cluster_node::subscribe_releases(const std::string& channel, announcement_events on) {
  unsubscribe_releases();
  shard_subscriptions::events events;
  events.heard = std::move(on.heard);
  events.slot_changed = [changed = std::move(on.link_changed)](std::uint16_t slot,
                                                               bool subscribed) {
    if (changed) changed(subscribed, slot);
  };
  // The subscriptions follow the slots where this node's requests go; they may outlive the node
  // while they close.
  auto slot_master = [weak = std::weak_ptr<cluster_router>(router_)](std::uint16_t slot) {
    const auto router = weak.lock();
    return router ? router->master_of(slot) : std::nullopt;
  };
  releases_ = shard_subscriptions::create(executor_, config(), subscriber_settings_, channel,
                                          std::move(slot_master), std::move(events));
}

void cluster_node::unsubscribe_releases() {
  if (releases_) releases_->close();
  releases_.reset();
}

void cluster_node::want_releases(std::string_view resource) {
  if (releases_) releases_->want(hash_slot(resource));
}

void cluster_node::unwant_releases(std::string_view resource) {
  if (releases_) releases_->unwant(hash_slot(resource));
}

subscription_state cluster_node::releases_subscription(std::string_view resource) const {
  if (!releases_) return subscription_state::off;
  return releases_->of(hash_slot(resource));
}

}  // namespace redlock::detail
