#ifndef REDLOCK_TEST_SUPPORT_TOKEN_ORDER_HPP
#define REDLOCK_TEST_SUPPORT_TOKEN_ORDER_HPP

// What the fencing tests judge with: the order of the tokens leases were granted, the counters on
// the nodes, and the unsafe variant without the fencing write-back.

#include "lock/key_names.hpp"
#include "support/client_options.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"
#include "unsafe_switches.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace redlock::test {

inline lock_options fenced_lock(std::chrono::milliseconds ttl = std::chrono::seconds(10)) {
  auto options = lock_for(ttl);
  options.fencing = true;
  return options;
}

// The fencing counter of `resource` on a node, 0 when it has none.
inline std::uint64_t counter_on(redis_server& server, const std::string& resource) {
  sync_client c(server.port());
  const auto reply = c.command({"GET", detail::fencing_counter_key(resource)});
  return reply.is_null() ? 0 : std::stoull(reply.text);
}

// Fencing tokens in the order their leases were granted: each must exceed every one before it.
class token_order {
 public:
  void granted(std::uint64_t token) {
    if (!tokens_.empty() && token <= highest_ && !violation_) {
      violation_ = fmt::format("lease {} got token {} after a lease with token {}",
                               tokens_.size() + 1, token, highest_);
    }
    highest_ = std::max(highest_, token);
    tokens_.push_back(token);
  }
  const std::optional<std::string>& violation() const noexcept { return violation_; }
  std::size_t size() const noexcept { return tokens_.size(); }

 private:
  std::vector<std::uint64_t> tokens_;
  std::uint64_t highest_ = 0;
  std::optional<std::string> violation_;
};

// Sets the unsafe test hook (no fencing write-back) for one scope.
struct without_write_back {
  without_write_back() { detail::skip_fence_write_back_for_tests = true; }
  ~without_write_back() { detail::skip_fence_write_back_for_tests = false; }
  without_write_back(const without_write_back&) = delete;
  without_write_back& operator=(const without_write_back&) = delete;
};

}  // namespace redlock::test

#endif
