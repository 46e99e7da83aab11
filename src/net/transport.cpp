#include "net/transport.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <string>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

asio::awaitable<error_code> transport::connect(const node_config& node) {
  close();
  asio::ip::tcp::resolver resolver(socket_.get_executor());
  auto [resolve_error, endpoints] = co_await resolver.async_resolve(
      node.host, std::to_string(node.port), asio::ip::resolver_base::numeric_service,
      asio::as_tuple(asio::use_awaitable));
  if (resolve_error) co_return resolve_error;

  auto [connect_error, endpoint] =
      co_await asio::async_connect(socket_, endpoints, asio::as_tuple(asio::use_awaitable));
  if (connect_error) co_return connect_error;

  // Commands are small and latency-bound; Nagle would hold a pipelined batch back for the
  // previous batch's ACK.
  error_code option_error;
  socket_.set_option(asio::ip::tcp::no_delay(true), option_error);
  co_return option_error;
}

std::string transport::peer() const {
  error_code ec;
  auto endpoint = socket_.remote_endpoint(ec);
  if (ec) return {};
  auto address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  const std::string host = address.is_loopback() ? "loopback" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

void transport::close() noexcept {
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

}  // namespace redlock::detail
