// The mutual-exclusion checker over lock histories. It must find every real overlap (it is what
// the fault scenarios rely on to fail), and it must not blame a history that is only ambiguous.

#include "support/history.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {
namespace rt = redlock::test;
using namespace std::chrono_literals;

constexpr rt::mono_ns ms = 1'000'000;

rt::event acquired(std::string process, std::string token, rt::mono_ns invoke, rt::mono_ns complete,
                   rt::mono_ns valid_until) {
  return {std::move(process),
          "r",
          std::move(token),
          rt::op_kind::acquire,
          rt::op_result::ok,
          invoke,
          complete,
          valid_until,
          0};
}

rt::event acquire_unknown(std::string process, rt::mono_ns invoke, rt::mono_ns ttl) {
  return {std::move(process), "r", "", rt::op_kind::acquire, rt::op_result::unknown, invoke,
          invoke + 100 * ms,  0,   ttl};
}

rt::event released(std::string process, std::string token, rt::mono_ns invoke) {
  return {std::move(process),
          "r",
          std::move(token),
          rt::op_kind::release,
          rt::op_result::ok,
          invoke,
          invoke + ms,
          0,
          0};
}

rt::event extended(std::string process, std::string token, rt::mono_ns complete,
                   rt::mono_ns valid_until, rt::op_result result = rt::op_result::ok) {
  return {std::move(process),
          "r",
          std::move(token),
          rt::op_kind::extend,
          result,
          complete - ms,
          complete,
          valid_until,
          0};
}

rt::event lost(std::string process, std::string token, rt::mono_ns at) {
  return {std::move(process),
          "r",
          std::move(token),
          rt::op_kind::lost,
          rt::op_result::ok,
          at,
          at,
          0,
          0};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(history)

BOOST_AUTO_TEST_CASE(holds_one_after_another_are_fine) {
  const std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 100 * ms),
      released("a", "t1", 50 * ms),
      acquired("b", "t2", 10 * ms, 52 * ms, 150 * ms),  // waited for a's release
      released("b", "t2", 90 * ms),
  };
  const auto result = rt::check_mutual_exclusion(events);
  BOOST_TEST(result.ok(), result.describe());
  BOOST_TEST(result.holds.size() == 2u);
  BOOST_TEST(result.holds[0].end == 50 * ms);  // cut at the release call, not at validity
}

BOOST_AUTO_TEST_CASE(two_holders_at_once_are_a_violation) {
  const std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 100 * ms),
      acquired("b", "t2", 30 * ms, 32 * ms, 130 * ms),  // a never released and was still valid
      released("a", "t1", 60 * ms),
  };
  const auto result = rt::check_mutual_exclusion(events);
  BOOST_TEST(!result.ok());
  BOOST_REQUIRE(result.violations.size() == 1u);
  BOOST_TEST(result.violations[0].by == 28 * ms);
  BOOST_TEST(result.describe().find("both held \"r\" for 28.000 ms") != std::string::npos,
             result.describe());
}

BOOST_AUTO_TEST_CASE(an_extension_in_time_moves_the_end_and_exposes_a_rival) {
  std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 100 * ms),
      extended("a", "t1", 50 * ms, 200 * ms),
      acquired("b", "t2", 110 * ms, 120 * ms, 300 * ms),
  };
  auto result = rt::check_mutual_exclusion(events);
  BOOST_REQUIRE(result.violations.size() == 1u);
  BOOST_TEST(result.violations[0].by == 80 * ms);

  // The same extension confirmed after the validity ran out does not count: the rival is fine.
  events[1] = extended("a", "t1", 105 * ms, 200 * ms);
  result = rt::check_mutual_exclusion(events);
  BOOST_TEST(result.ok(), result.describe());

  // A failed extension never moves the end later.
  events[1] = extended("a", "t1", 50 * ms, 200 * ms, rt::op_result::failed);
  BOOST_TEST(rt::check_mutual_exclusion(events).ok());
}

// An extension that may have run shortens what its holder may believe, whatever its answer: the
// validity the client reported after it is where the hold ends, also when that is earlier.
BOOST_AUTO_TEST_CASE(an_extension_that_shortened_the_validity_ends_the_hold_earlier) {
  std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 300 * ms),
      extended("a", "t1", 50 * ms, 80 * ms, rt::op_result::failed),
      acquired("b", "t2", 90 * ms, 100 * ms, 300 * ms),
  };
  auto result = rt::check_mutual_exclusion(events);
  BOOST_TEST(result.ok(), result.describe());
  BOOST_TEST(result.holds[0].end == 80 * ms);

  // Confirmed, the shorter validity counts just the same.
  events[1] = extended("a", "t1", 50 * ms, 80 * ms);
  result = rt::check_mutual_exclusion(events);
  BOOST_TEST(result.ok(), result.describe());

  // A holder that kept believing its old validity overlaps the rival.
  events[1] = extended("a", "t1", 50 * ms, 300 * ms, rt::op_result::failed);
  result = rt::check_mutual_exclusion(events);
  BOOST_REQUIRE(result.violations.size() == 1u);
  BOOST_TEST(result.violations[0].by == 200 * ms);
}

BOOST_AUTO_TEST_CASE(a_signalled_loss_ends_the_hold) {
  const std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 100 * ms),
      lost("a", "t1", 40 * ms),
      acquired("b", "t2", 41 * ms, 45 * ms, 150 * ms),
  };
  BOOST_TEST(rt::check_mutual_exclusion(events).ok());
}

BOOST_AUTO_TEST_CASE(overlaps_within_epsilon_are_tolerated) {
  const std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 100 * ms), released("a", "t1", 50 * ms),
      acquired("b", "t2", 40 * ms, 47 * ms, 150 * ms),  // 3 ms before a's release call
  };
  BOOST_TEST(rt::check_mutual_exclusion(events, 5ms).ok());
  BOOST_TEST(!rt::check_mutual_exclusion(events, 1ms).ok());
}

BOOST_AUTO_TEST_CASE(an_unknown_acquire_is_ambiguous_not_a_violation) {
  const std::vector<rt::event> events = {
      acquire_unknown("a", 0, 100 * ms),
      acquired("b", "t2", 20 * ms, 25 * ms, 120 * ms),
  };
  const auto result = rt::check_mutual_exclusion(events);
  BOOST_TEST(result.ok(), result.describe());
  BOOST_TEST(result.ambiguous.size() == 1u);
  BOOST_TEST(result.holds[0].maybe);
  BOOST_TEST(result.holds[0].end == 100 * ms);  // invoke + ttl
}

BOOST_AUTO_TEST_CASE(resources_are_checked_separately) {
  auto other = acquired("b", "t2", 10 * ms, 12 * ms, 90 * ms);
  other.resource = "s";
  const std::vector<rt::event> events = {acquired("a", "t1", 0, 2 * ms, 100 * ms), other};
  BOOST_TEST(rt::check_mutual_exclusion(events).ok());
}

BOOST_AUTO_TEST_CASE(histories_of_several_processes_merge_through_text) {
  rt::history first;
  rt::history second;
  first.record(acquired("p1/c0", "t1", 0, 2 * ms, 100 * ms));
  auto odd = acquired("p2 c1%~\n", "t2", 30 * ms, 32 * ms, 130 * ms);  // needs escaping
  odd.resource = "r";
  second.record(odd);
  std::stringstream files;
  first.write(files);
  second.write(files);
  const auto merged = rt::history::read_lines(files);
  BOOST_REQUIRE(merged.size() == 2u);
  BOOST_TEST(merged[1].process == "p2 c1%~\n");
  BOOST_TEST(merged[1].valid_until == 130 * ms);
  BOOST_TEST(!rt::check_mutual_exclusion(merged).ok());

  rt::event empty_token = released("p", "", 5);
  BOOST_TEST(rt::event::from_line(empty_token.to_line()).token.empty());
}

BOOST_AUTO_TEST_CASE(malformed_lines_are_refused_with_the_field_named) {
  auto expect_error = [](std::string_view line, std::string_view words) {
    try {
      (void)rt::event::from_line(line);
      BOOST_ERROR("accepted: " << line);
    } catch (const std::invalid_argument& e) {
      BOOST_TEST(std::string(e.what()).find(words) != std::string::npos, e.what());
    }
  };
  expect_error("lock-event/1 p r t acquire ok 1 2 3", "9 fields");
  expect_error("lock-event/1 p r t grab ok 1 2 3 4", "unknown kind 'grab'");
  expect_error("lock-event/1 p r t acquire ok x 2 3 4", "field invoke");
  expect_error("lock-event/1 p%4 r t acquire ok 1 2 3 4", "escape in field process");
}

BOOST_AUTO_TEST_SUITE_END()
