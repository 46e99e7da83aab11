#ifndef REDLOCK_NODES_STANDALONE_NODE_HPP
#define REDLOCK_NODES_STANDALONE_NODE_HPP

#include "net/connection.hpp"
#include "nodes/lock_node.hpp"
#include "nodes/release_subscription.hpp"

#include <memory>

namespace redlock::detail {

// A node that is one Redis server: every request goes to its one pipelined connection.
class standalone_node final : public lock_node {
 public:
  standalone_node(const boost::asio::any_io_executor& executor, node_config config,
                  connection_options settings);
  ~standalone_node() override;
  standalone_node(const standalone_node&) = delete;
  standalone_node& operator=(const standalone_node&) = delete;

  void exec(const request& what, std::string_view payload, reply_sink& sink, std::size_t tag,
            std::chrono::steady_clock::time_point now) override;
  void exec(const request& what, const shared_payload& payload, reply_sink& sink, std::size_t tag,
            std::chrono::steady_clock::time_point now) override;

  boost::system::error_code permanent_failure() const noexcept override {
    return conn_->permanent_failure();
  }
  const std::string& last_error() const noexcept override { return conn_->last_error(); }
  void close_when_idle(std::chrono::milliseconds bound) override { conn_->close_when_idle(bound); }

  // One subscriber connection to the server (release_subscription).
  void subscribe_releases(const std::string& channel, announcement_events on) override;
  void unsubscribe_releases() override;
  subscription_state releases_subscription(std::string_view resource) const override;

  const connection& link() const noexcept { return *conn_; }

 private:
  template <typename Payload>
  void send(const request& what, const Payload& payload, reply_sink& sink, std::size_t tag,
            std::chrono::steady_clock::time_point now);

  boost::asio::any_io_executor executor_;
  connection_options subscriber_settings_;
  std::shared_ptr<connection> conn_;
  std::shared_ptr<release_subscription> releases_;
};

}  // namespace redlock::detail

#endif
