// What a node's connection keeps of its failures, without a socket: the cause its messages name,
// whether a failed connect is one that retrying will not fix, and how long it waits before the
// next connect attempt.

#include "backoff.hpp"
#include "net/link_failures.hpp"
#include "redlock/error.hpp"
#include "support/printing.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <random>

namespace {

namespace asio = boost::asio;
namespace rd = redlock::detail;
using namespace std::chrono_literals;
using boost::system::error_code;
using redlock::error;

}  // namespace

BOOST_AUTO_TEST_SUITE(link_failures)

BOOST_AUTO_TEST_CASE(the_last_cause_is_named_with_the_node_and_without_it) {
  rd::link_failures failures("node:6379", {});
  BOOST_TEST(failures.last_error().empty());
  failures.record(error::connect_timeout, "connect timed out after 100 ms while resolving");
  BOOST_TEST(failures.last_error() == "node:6379: connect timed out after 100 ms while resolving");
  BOOST_TEST(failures.last_cause() == "connect timed out after 100 ms while resolving");
  failures.record_internal_failure("std::bad_alloc");
  BOOST_TEST(failures.last_error() == "node:6379: internal failure: std::bad_alloc");
}

// The reader, the writer and the health check stop together: when one fails, the others are
// cancelled, and their operation_aborted must not hide the failure that ended the link.
BOOST_AUTO_TEST_CASE(a_loop_cancelled_because_another_failed_does_not_overwrite_the_cause) {
  rd::link_failures failures("node:6379", {});
  failures.record(asio::error::eof, "connection closed by the server");
  failures.record(asio::error::operation_aborted, "write failed: Operation canceled");
  BOOST_TEST(failures.last_error() == "node:6379: connection closed by the server");
  BOOST_TEST(failures.last_cause() == "connection closed by the server");
}

BOOST_AUTO_TEST_CASE(only_a_refused_handshake_is_permanent_and_a_connect_clears_it) {
  struct row {
    error_code ec;
    bool permanent;
  };
  // Which failures are permanent is is_permanent_connect_failure's, whose full table is in
  // test_handshake; here one of each kind shows that the record follows it.
  const row rows[] = {
      {error::auth_failed, true},
      {error::connect_timeout, false},
  };
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT(r.ec.message()) {
      rd::link_failures failures("node:6379", {});
      failures.connect_finished(r.ec);
      BOOST_TEST((failures.permanent_failure() == (r.permanent ? r.ec : error_code{})));
      failures.connect_finished({});
      BOOST_TEST(!failures.permanent_failure());
    }
  }
  // Every connect attempt decides anew: a passing failure after a permanent one clears it.
  rd::link_failures failures("node:6379", {});
  failures.connect_finished(error::auth_failed);
  failures.connect_finished(error::connect_timeout);
  BOOST_TEST(!failures.permanent_failure());
}

// The delays follow the retry policy's backoff (backoff.hpp) from failure to failure, and start
// again from its initial delay only once a connect has succeeded.
BOOST_AUTO_TEST_CASE(reconnect_delays_grow_until_a_connect_succeeds) {
  const redlock::retry_policy policy{10ms, 10s, 10.0};
  rd::link_failures failures("node:6379", policy, 7);
  rd::backoff expected(policy);
  std::minstd_rand jitter(7);
  for (int attempt = 0; attempt < 3; ++attempt) {
    BOOST_TEST_CONTEXT("failed attempt " << attempt) {
      failures.connect_finished(error::connect_timeout);  // no reset
      const auto ceiling = expected.ceiling();
      const auto delay = failures.next_delay();
      BOOST_TEST(delay.count() == expected.next(jitter).count());
      BOOST_TEST(delay.count() <= ceiling.count());
    }
  }
  BOOST_TEST(expected.ceiling().count() == 10000);
  failures.connect_finished({});  // the link came up, and later broke
  expected.reset();
  const auto delay = failures.next_delay();
  BOOST_TEST(delay.count() == expected.next(jitter).count());
  BOOST_TEST(delay.count() <= 10);
}

BOOST_AUTO_TEST_SUITE_END()
