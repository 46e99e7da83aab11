#ifndef REDLOCK_TEST_SUPPORT_ACQUIRE_ONCE_HPP
#define REDLOCK_TEST_SUPPORT_ACQUIRE_ONCE_HPP

// One acquire on a fresh client, and the check that a node's configuration error ended it at once:
// shared by the suites that feed the client misconfigured nodes (node_errors, tls, unix_sockets).

#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/text_contains.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace redlock::test {

// With `wait` unset an acquire retries until cancelled: a permanent error must end it anyway.
inline lock_options default_wait() {
  lock_options options;
  options.ttl = std::chrono::seconds(5);
  return options;
}

inline lock_options long_wait() {
  auto options = default_wait();
  options.wait = std::chrono::seconds(30);
  return options;
}

struct acquire_outcome_summary {
  boost::system::error_code ec;
  std::string diagnostics;
  long long took_ms = 0;
  std::size_t granted = 0;
};

// One async_acquire (or try) on a fresh client, released at once if it succeeded; the test's own
// time limit stops a hang.
inline acquire_outcome_summary acquire_once(std::vector<node_config> nodes,
                                            const lock_options& options, bool try_only = false,
                                            std::string resource = "orders:42",
                                            client_options settings = fast_client_options()) {
  acquire_outcome_summary result;
  run_async(
      [&](boost::asio::io_context& io) -> boost::asio::awaitable<void> {
        client locks(io.get_executor(), nodes, settings);
        const auto start = std::chrono::steady_clock::now();
        // Not a ?: of two co_awaits: GCC 12 destroys the result of such an expression too early.
        std::tuple<boost::system::error_code, lease> done;
        if (try_only) {
          done = co_await locks.async_try_acquire(resource, options, tuple_awaitable);
        } else {
          done = co_await locks.async_acquire(resource, options, tuple_awaitable);
        }
        auto& [ec, held] = done;
        result.took_ms = ms_since(start);
        result.ec = ec;
        result.diagnostics = held.diagnostics();
        result.granted = held.granted_nodes();
        if (held.held()) co_await held.async_release(tuple_awaitable);
      },
      std::chrono::seconds(20));
  BOOST_TEST_MESSAGE(result.ec.message()
                     << " after " << result.took_ms << " ms: " << result.diagnostics);
  return result;
}

// Completed with `code` at once (no retry until `wait`), as a node failure, naming `node` and
// saying `says`.
inline void check_fails_at_once(const acquire_outcome_summary& result, error code,
                                const std::string& node, std::string_view says) {
  BOOST_TEST(result.ec == code, result.ec.message());
  BOOST_TEST((result.ec == condition::node_failure));
  BOOST_TEST(result.took_ms < 5000);
  BOOST_TEST(contains(result.diagnostics, node), result.diagnostics);
  BOOST_TEST(contains(result.diagnostics, says), result.diagnostics);
  BOOST_TEST(contains(result.diagnostics, "not retried"), result.diagnostics);
  BOOST_TEST(result.granted == 0u);
}

}  // namespace redlock::test

#endif
