#include "nodes/cluster_node.hpp"

#include "algo/hash_slot.hpp"
#include "nodes/cluster/router.hpp"

#include <memory>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;

cluster_node::cluster_node(const asio::any_io_executor& executor, node_config config,
                           connection_options settings, std::shared_ptr<peer_registry> peers,
                           std::size_t index)
    : lock_node(config),
      router_(std::make_shared<cluster_router>(executor, std::move(config), std::move(settings),
                                               std::move(peers), index)) {}

cluster_node::~cluster_node() = default;

void cluster_node::exec(const request& what, std::string_view payload, reply_sink& sink,
                        std::size_t tag, steady_clock::time_point now) {
  router_->exec(what.key, payload_ref::borrowed(payload), what.rules, what.replicas, sink, tag,
                now);
}

void cluster_node::exec(const request& what, const shared_payload& payload, reply_sink& sink,
                        std::size_t tag, steady_clock::time_point now) {
  router_->exec(what.key, payload_ref::shared(payload), what.rules, what.replicas, sink, tag, now);
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

}  // namespace redlock::detail
