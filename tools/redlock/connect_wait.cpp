#include "connect_wait.hpp"

#include <boost/asio/error.hpp>

#include <algorithm>

namespace redlock::cli {

bool still_connecting(error_code ec, const inspection& seen) {
  if (ec == error::invalid_argument || ec == boost::asio::error::operation_aborted) return false;
  return std::any_of(seen.nodes.begin(), seen.nodes.end(), [](const node_holding& node) {
    return node.error == error::request_timeout || node.error == error::node_unresponsive;
  });
}

bool quorum_connected_or_settled(error_code ec, const inspection& seen) {
  return !ec || !still_connecting(ec, seen);
}

}  // namespace redlock::cli
