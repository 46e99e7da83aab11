// Quorum tallies, validity and drift maths, lock tokens: pure logic behind every lock decision.

#include "algo/quorum.hpp"
#include "algo/validity.hpp"
#include "block_cache.hpp"
#include "token.hpp"

#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <set>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {
namespace rd = redlock::detail;
using namespace std::chrono_literals;
}  // namespace

BOOST_AUTO_TEST_SUITE(quorum)

BOOST_AUTO_TEST_CASE(majority_of_n) {
  const std::size_t expected[][2] = {{1, 1}, {2, 2}, {3, 2}, {4, 3}, {5, 3}, {6, 4}, {7, 4}};
  for (const auto& [n, q] : expected) {
    BOOST_TEST_CONTEXT("N = " << n) {
      BOOST_TEST(rd::quorum_of(n) == q);
    }
  }
}

BOOST_AUTO_TEST_CASE(grant_quorum_is_decided_at_the_third_yes_of_five) {
  rd::tally t(5);
  t.yes();
  t.yes();
  BOOST_TEST(!t.yes_quorum());
  BOOST_TEST(!t.yes_quorum_impossible());
  t.yes();
  BOOST_TEST(t.yes_quorum());
  BOOST_TEST(t.pending() == 2u);  // decided without the two slowest nodes
}

BOOST_AUTO_TEST_CASE(quorum_becomes_impossible_as_soon_as_it_is) {
  rd::tally t(5);
  t.no();
  t.failed();
  BOOST_TEST(!t.yes_quorum_impossible());  // 3 pending could still grant
  t.no();
  BOOST_TEST(t.yes_quorum_impossible());  // 2 pending cannot make 3
  BOOST_TEST(!t.too_many_failed());       // so this is contention, not unreachability
}

// What extensions and releases (of a lease, or by token) conclude from their tallies.
BOOST_AUTO_TEST_CASE(extension_and_release_outcomes) {
  using redlock::error;
  rd::tally extended(3);
  extended.yes();
  BOOST_TEST(!rd::extension_outcome(extended).has_value());
  extended.yes();
  BOOST_TEST((rd::extension_outcome(extended) == boost::system::error_code{}));
  rd::tally foreign(3);
  foreign.no();
  foreign.no();
  BOOST_TEST((rd::extension_outcome(foreign) == make_error_code(error::not_held)));
  BOOST_TEST((rd::release_outcome(foreign) == make_error_code(error::not_held)));
  rd::tally silent(3);
  silent.failed();
  silent.yes();
  BOOST_TEST(!rd::extension_outcome(silent).has_value());
  silent.failed();
  BOOST_TEST((rd::extension_outcome(silent) == make_error_code(error::no_quorum)));
  BOOST_TEST((rd::release_outcome(silent) == make_error_code(error::no_quorum)));
  // A release succeeds once neither a quorum of "not ours" nor of failures can come.
  rd::tally released(5);
  released.yes();
  released.yes();
  released.failed();
  BOOST_TEST(!rd::release_outcome(released).has_value());
  released.no();
  BOOST_TEST((rd::release_outcome(released) == boost::system::error_code{}));
}

BOOST_AUTO_TEST_CASE(too_many_failures_means_no_quorum) {
  rd::tally t(5);
  t.failed();
  t.failed();
  BOOST_TEST(!t.too_many_failed());
  BOOST_TEST(!t.too_many_failed_impossible());
  t.failed();
  BOOST_TEST(t.too_many_failed());
  BOOST_TEST(t.yes_quorum_impossible());
}

BOOST_AUTO_TEST_CASE(release_style_success_is_certain_only_when_no_bad_outcome_can_follow) {
  rd::tally t(5);
  t.yes();
  t.yes();
  t.yes();
  // no + pending = 2 < 3 and failed + pending = 2 <= 2: neither "not ours" nor "unreachable" can
  // still happen.
  BOOST_TEST(t.no_quorum_impossible());
  BOOST_TEST(t.too_many_failed_impossible());
}

BOOST_AUTO_TEST_CASE(single_node) {
  rd::tally t(1);
  BOOST_TEST(t.quorum() == 1u);
  t.no();
  BOOST_TEST(t.yes_quorum_impossible());
  BOOST_TEST(t.no_quorum());
}

BOOST_AUTO_TEST_CASE(drift_and_validity) {
  BOOST_TEST(
      std::chrono::duration_cast<std::chrono::microseconds>(rd::drift_allowance(10000ms, 0.01))
          .count() == 102000);  // 1% of 10 s + 2 ms
  BOOST_TEST(std::chrono::duration_cast<std::chrono::microseconds>(rd::drift_allowance(100ms, 0.0))
                 .count() == 2000);
  const auto start = std::chrono::steady_clock::now();
  const auto left = rd::validity(10000ms, 0.01, start, start + 50ms);
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(left).count() ==
             10000 - 50 - 102);
  BOOST_TEST(rd::validity(100ms, 0.01, start, start + 99ms).count() < 0);  // 100 - 99 - 3 < 0
}

BOOST_AUTO_TEST_CASE(tokens_are_160_bit_hex_and_unique) {
  std::set<std::string> seen;
  for (int i = 0; i < 20000; ++i) {
    const std::string token = rd::make_lock_token();
    BOOST_TEST_REQUIRE(token.size() == 40u);
    BOOST_TEST_REQUIRE(token.find_first_not_of("0123456789abcdef") == std::string::npos);
    BOOST_TEST_REQUIRE(seen.insert(token).second);
  }
  // Every digit, high nibble and low, about equally often: 160 random bits, all of them shown.
  std::array<std::array<int, 16>, 2> counts{};
  for (const std::string& token : seen) {
    for (std::size_t i = 0; i < token.size(); ++i) {
      const char c = token[i];
      ++counts[i % 2][static_cast<std::size_t>(c <= '9' ? c - '0' : c - 'a' + 10)];
    }
  }
  const int expected = 20000 * 20 / 16;  // per digit and nibble position
  for (const auto& by_digit : counts) {
    for (const int n : by_digit) {
      BOOST_TEST(n > expected * 9 / 10);
      BOOST_TEST(n < expected * 11 / 10);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_forked_child_does_not_reuse_the_parents_random_bytes) {
  (void)rd::make_lock_token();  // fills this thread's pool
  int pipe_fds[2];
  BOOST_TEST_REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  BOOST_TEST_REQUIRE(child >= 0);
  if (child == 0) {
    const std::string token = rd::make_lock_token();
    const auto written = ::write(pipe_fds[1], token.data(), token.size());
    ::_exit(written == 40 ? 0 : 1);
  }
  const std::string parent_next = rd::make_lock_token();
  char buffer[40];
  BOOST_TEST_REQUIRE(::read(pipe_fds[0], buffer, sizeof buffer) == 40);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  BOOST_TEST(std::string(buffer, 40) != parent_next);
}

// A token given back lends its storage to a later token of this thread (where recycling is on),
// which still gets fresh random digits; a string of any other size is not kept.
BOOST_AUTO_TEST_CASE(a_recycled_token_lends_its_storage_and_nothing_else) {
  std::string first = rd::make_lock_token();
  const std::string first_text = first;
  const char* const storage = first.data();
  rd::recycle_lock_token(std::move(first));
  const std::string second = rd::make_lock_token();
  BOOST_TEST(second.size() == 40u);
  BOOST_TEST(second.find_first_not_of("0123456789abcdef") == std::string::npos);
  BOOST_TEST(second != first_text);
  BOOST_TEST((second.data() == storage) == rd::block_cache_recycles);

  std::string other(64, 'x');
  const char* const other_storage = other.data();
  rd::recycle_lock_token(std::move(other));
  BOOST_TEST(other == std::string(64, 'x'));  // left as it was
  BOOST_TEST(other.data() == other_storage);
  BOOST_TEST(rd::make_lock_token().data() != other_storage);
}

BOOST_AUTO_TEST_SUITE_END()
