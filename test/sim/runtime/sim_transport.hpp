#ifndef REDLOCK_TEST_SIM_RUNTIME_SIM_TRANSPORT_HPP
#define REDLOCK_TEST_SIM_RUNTIME_SIM_TRANSPORT_HPP

// The library's lock_transport in a simulation (src/lock_transport_choice.hpp's contract): a
// connection's byte stream over the simulated network (network.hpp) to a model server, found by
// the node's host and port. The connection above it is the library's own, unchanged.

#include "net/transport.hpp"
#include "redlock/node_config.hpp"
#include "sim/runtime/network.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace redlock::sim {

class sim_transport {
 public:
  sim_transport(boost::asio::any_io_executor executor, node_config node)
      : executor_(std::move(executor)), node_(std::move(node)) {}
  ~sim_transport() { close(); }
  sim_transport(const sim_transport&) = delete;
  sim_transport& operator=(const sim_transport&) = delete;

  boost::asio::awaitable<detail::connect_failure> connect(std::string_view& stage);
  std::string_view stage_text(std::string_view stage) const noexcept { return stage; }

  template <class CompletionToken>
  auto async_write(boost::asio::const_buffer bytes, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken,
                                       void(boost::system::error_code, std::size_t)>(
        [this, bytes](auto handler) {
          boost::asio::any_io_executor executor =
              boost::asio::get_associated_executor(handler, executor_);
          network::current().write(
              link(), std::string(static_cast<const char*>(bytes.data()), bytes.size()), executor,
              io_handler(std::move(handler)));
        },
        token);
  }

  // What the simulated socket takes at once: the run's socket_writes mode decides (network.hpp),
  // so that the seeds cover the direct write, the partial one and the asynchronous one.
  std::size_t write_now(boost::asio::const_buffer bytes, boost::system::error_code& ec) {
    return network::current().write_now(link(), bytes, ec);
  }

  template <class CompletionToken>
  auto async_read_some(boost::asio::mutable_buffer into, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken,
                                       void(boost::system::error_code, std::size_t)>(
        [this, into](auto handler) {
          boost::asio::any_io_executor executor =
              boost::asio::get_associated_executor(handler, executor_);
          network::current().read(link(), into, executor, io_handler(std::move(handler)));
        },
        token);
  }

  // Completion: void(error_code); cancellable through the handler's cancellation slot (a connect
  // that a partition holds waits until the connection's timeout cancels it).
  template <class CompletionToken>
  auto async_connect(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        [this](auto handler) {
          boost::asio::any_io_executor executor =
              boost::asio::get_associated_executor(handler, executor_);
          network& net = network::current();
          net.connect(node_, net.process_of(executor_), slot_, executor,
                      connect_handler(std::move(handler)));
        },
        token);
  }

  void close() noexcept;
  bool is_open() const noexcept { return link() && !link()->client_closed && !link()->reset; }
  std::string peer() const;
  const std::string& verified_name() const noexcept { return verified_name_; }

  static bool is_tls_error(const boost::system::error_code&) noexcept { return false; }
  static bool is_tls_protocol_error(const boost::system::error_code&) noexcept { return false; }
  static std::string tls_reason(const boost::system::error_code& ec) { return ec.message(); }
  std::string describe(const boost::system::error_code& ec) const { return ec.message(); }

 private:
  std::shared_ptr<network::link> link() const noexcept { return slot_ ? slot_->made : nullptr; }

  boost::asio::any_io_executor executor_;
  node_config node_;
  std::shared_ptr<network::link_slot> slot_;
  std::string verified_name_;
};

}  // namespace redlock::sim

#endif
