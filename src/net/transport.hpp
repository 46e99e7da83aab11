#ifndef REDLOCK_NET_TRANSPORT_HPP
#define REDLOCK_NET_TRANSPORT_HPP

#include "redlock/node_config.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <string>
#include <utility>

namespace redlock::detail {

// The byte stream to one node. Everything that depends on how bytes travel (TCP today; TLS for
// rediss:// or a unix socket later) lives here, so the pipelining in connection.cpp only ever sees
// connect / write / read_some / close.
class transport {
 public:
  explicit transport(boost::asio::any_io_executor executor) : socket_(std::move(executor)) {}

  // Resolves the node's host, connects to the first address that accepts and turns on TCP_NODELAY.
  // No timeout of its own: the caller bounds it (and cancels it through per-operation
  // cancellation).
  boost::asio::awaitable<boost::system::error_code> connect(const node_config& node);

  // Writes all of `bytes`. Completion: void(error_code, std::size_t).
  template <class CompletionToken>
  auto async_write(boost::asio::const_buffer bytes, CompletionToken&& token) {
    return boost::asio::async_write(socket_, bytes, std::forward<CompletionToken>(token));
  }

  // Reads what is available, at least one byte. Completion: void(error_code, std::size_t).
  template <class CompletionToken>
  auto async_read_some(boost::asio::mutable_buffer into, CompletionToken&& token) {
    return socket_.async_read_some(into, std::forward<CompletionToken>(token));
  }

  // Idempotent; pending operations complete with operation_aborted.
  void close() noexcept;

  bool is_open() const noexcept { return socket_.is_open(); }

  // The connected peer as "address:port", with IPv4-mapped IPv6 addresses in IPv4 form and every
  // loopback address (127.0.0.0/8, ::1) written "loopback", so that two names of one local server
  // read the same. Empty when not connected.
  std::string peer() const;

 private:
  boost::asio::ip::tcp::socket socket_;
};

}  // namespace redlock::detail

#endif
