#include "nodes/sentinel_node.hpp"

#include "nodes/forwarded_request.hpp"
#include "nodes/sentinel/router.hpp"

#include <memory>
#include <utility>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;

sentinel_node::sentinel_node(const asio::any_io_executor& executor, node_config config,
                             connection_options settings, std::shared_ptr<peer_registry> peers,
                             std::size_t index)
    : lock_node(config),
      router_(std::make_shared<sentinel_router>(executor, std::move(config), std::move(settings),
                                                std::move(peers), index)) {}

sentinel_node::~sentinel_node() {
  router_->unsubscribe_releases();
}

void sentinel_node::exec(const request& what, std::string_view payload, reply_sink& sink,
                         std::size_t tag, steady_clock::time_point now) {
  router_->exec(what, payload_ref::borrowed(payload), sink, tag, now);
}

void sentinel_node::exec(const request& what, const shared_payload& payload, reply_sink& sink,
                         std::size_t tag, steady_clock::time_point now) {
  router_->exec(what, payload_ref::shared(payload), sink, tag, now);
}

error_code sentinel_node::permanent_failure() const noexcept {
  return router_->permanent_failure();
}

const std::string& sentinel_node::last_error() const noexcept {
  return router_->last_error();
}

void sentinel_node::close_when_idle(std::chrono::milliseconds bound) {
  router_->close_when_idle(bound);
}

void sentinel_node::watch_masters(master_moved_fn on_moved) {
  router_->watch_masters(std::move(on_moved));
}

void sentinel_node::subscribe_releases(const std::string& channel, announcement_events on) {
  router_->subscribe_releases(channel, std::move(on));
}

void sentinel_node::unsubscribe_releases() {
  router_->unsubscribe_releases();
}

subscription_state sentinel_node::releases_subscription(std::string_view) const {
  return router_->releases_subscription();
}

std::string sentinel_node::master_address() const {
  return router_->master_address();
}

master_record sentinel_node::last_master_change() const {
  return router_->last_change();
}

bool sentinel_node::master_change_settled() const {
  return router_->record_settled();
}

}  // namespace redlock::detail
