#include "nodes/replica_wait.hpp"

#include "resp/encoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace redlock::detail {

shared_payload wait_command(unsigned wanted, std::chrono::milliseconds node_timeout) {
  const auto server_timeout = std::max<long long>(node_timeout.count() * 3 / 4, 1);
  std::string bytes;
  resp::encode_command(bytes, {"WAIT", std::to_string(wanted), std::to_string(server_timeout)});
  return std::make_shared<const std::string>(std::move(bytes));
}

write_answer after_replica_wait(boost::system::error_code write_ec, const resp::value& write_reply,
                                boost::system::error_code wait_ec, const resp::value& wait_reply,
                                unsigned wanted, std::string_view server,
                                bool (*counts)(const resp::value&)) {
  if (write_ec || write_reply.is_error()) return {write_ec, write_reply};
  if (counts != nullptr && !counts(write_reply)) return {{}, write_reply};
  if (!wait_ec && wait_reply.kind == resp::type::integer &&
      wait_reply.integer >= static_cast<long long>(wanted)) {
    return {{}, write_reply};
  }
  resp::value failure;
  failure.kind = resp::type::simple_error;
  if (wait_ec) {
    failure.text = fmt::format("NOREPLICAS {}: WAIT for {} replicas failed: {}", server, wanted,
                               wait_reply.text.empty() ? wait_ec.message() : wait_reply.text);
  } else if (wait_reply.kind == resp::type::integer) {
    failure.text = fmt::format(
        "NOREPLICAS {}: {} of the {} replicas wanted (wait_replicas) acknowledged the write in "
        "time",
        server, wait_reply.integer, wanted);
  } else {
    failure.text =
        fmt::format("NOREPLICAS {}: WAIT answered {}", server, resp::to_debug_string(wait_reply));
  }
  return {{}, std::move(failure)};
}

}  // namespace redlock::detail
