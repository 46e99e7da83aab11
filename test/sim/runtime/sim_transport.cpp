#include "sim/runtime/sim_transport.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

namespace redlock::sim {

namespace asio = boost::asio;

asio::awaitable<detail::connect_failure> sim_transport::connect(std::string_view& stage) {
  close();
  slot_ = std::make_shared<network::link_slot>();
  stage = "connecting";
  auto [ec] = co_await async_connect(asio::as_tuple(asio::use_awaitable));
  if (ec) {
    co_return detail::connect_failure{ec, fmt::format("connect failed: {}", ec.message())};
  }
  co_return detail::connect_failure{};
}

void sim_transport::close() noexcept {
  auto* net = network::current_or_null();
  if (auto l = link(); l && net) net->close(l);
}

std::string sim_transport::peer() const {
  if (!link()) return {};
  return fmt::format("sim:{}:{}", node_.host, node_.port);
}

}  // namespace redlock::sim
