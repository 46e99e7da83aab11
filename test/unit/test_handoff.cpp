// How a held lease's release treats the local waiters: a silent hand-off, or an announced release
// that the first waiter competes for.

#include "algo/handoff.hpp"
#include "unit/instants.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <sstream>
#include <string>

namespace {

namespace rd = redlock::detail;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

using redlock::test::t0;

// The holder of a queue with a single lock to take it, after `in_a_row` hand-offs, limit 4 (the
// default).
rd::handoff_inputs release_while_waiting(unsigned in_a_row, unsigned local_handoffs = 4) {
  return {.holder = true,
          .waiting = true,
          .certain = true,
          .handoffs_in_a_row = in_a_row,
          .local_handoffs = local_handoffs,
          .longest_ttl = 10s,
          .drift_factor = 0.01,
          .now = t0};
}

// The whole decision on one line, e.g. "announce, next competes, key gone by 10101 ms, count 0":
//   announce / silent: whether the release announces itself;
//   next wakes / next competes: how the first waiter (if any) starts once the holder is gone;
//   key gone by: milliseconds after t0; count: the queue's hand-offs in a row from now on.
std::string describe(const rd::handoff& h) {
  std::ostringstream out;
  out << (h.announce ? "announce" : "silent");
  out << (h.next_waiter_competes ? ", next competes" : ", next wakes");
  if (h.key_gone_by) {
    out << ", key gone by "
        << std::chrono::duration<double, std::milli>(*h.key_gone_by - t0).count() << " ms";
  }
  out << ", count " << h.handoffs_in_a_row;
  return out.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(handoff)

BOOST_AUTO_TEST_CASE(with_nobody_waiting_the_release_announces_and_the_count_starts_again) {
  auto in = release_while_waiting(3);
  in.waiting = false;
  BOOST_TEST(describe(rd::decide_handoff(in)) == "announce, next wakes, count 0");
}

BOOST_AUTO_TEST_CASE(below_the_limit_the_resource_is_handed_on_silently_and_counted) {
  const char* expected[] = {
      "silent, next wakes, count 1",
      "silent, next wakes, count 2",
      "silent, next wakes, count 3",
      "silent, next wakes, count 4",
  };
  for (unsigned in_a_row = 0; in_a_row < 4; ++in_a_row) {
    BOOST_TEST_CONTEXT(in_a_row << " hand-offs in a row before") {
      BOOST_TEST(describe(rd::decide_handoff(release_while_waiting(in_a_row))) ==
                 expected[in_a_row]);
    }
  }
}

// The waiter must not sleep past the key's life: now + longest_ttl * (1 + drift_factor) + 1 ms.
BOOST_AUTO_TEST_CASE(at_the_limit_the_release_announces_and_the_next_waiter_competes) {
  for (const unsigned in_a_row : {4u, 5u}) {
    BOOST_TEST_CONTEXT(in_a_row << " hand-offs in a row before, limit 4") {
      BOOST_TEST(describe(rd::decide_handoff(release_while_waiting(in_a_row))) ==
                 "announce, next competes, key gone by 10101 ms, count 0");
    }
  }
  struct row {
    std::chrono::milliseconds longest_ttl;
    double drift_factor;
    const char* decision;  // released at t0 + 5 s
  };
  const row rows[] = {
      {10s, 0.0, "announce, next competes, key gone by 15001 ms, count 0"},
      // A user extension gave the key longer than the lock's TTL.
      {30s, 0.01, "announce, next competes, key gone by 35301 ms, count 0"},
      {0ms, 0.01, "announce, next competes, key gone by 5001 ms, count 0"},
  };
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT("longest TTL " << r.longest_ttl.count() << " ms, drift factor "
                                      << r.drift_factor) {
      auto in = release_while_waiting(4);
      in.longest_ttl = r.longest_ttl;
      in.drift_factor = r.drift_factor;
      in.now = t0 + 5s;
      BOOST_TEST(describe(rd::decide_handoff(in)) == r.decision);
    }
  }
}

// A set that would take the resource may still lose its round, because another of its resources
// is held elsewhere; and sets handed on within a process would keep their resources from other
// processes. The release is announced, and the set competes with the waiters elsewhere, below the
// limit as well as at it.
BOOST_AUTO_TEST_CASE(a_set_is_never_handed_a_resource_it_competes_for_it) {
  for (const unsigned in_a_row : {0u, 1u, 4u}) {
    BOOST_TEST_CONTEXT(in_a_row << " hand-offs in a row before") {
      auto in = release_while_waiting(in_a_row);
      in.certain = false;
      BOOST_TEST(describe(rd::decide_handoff(in)) ==
                 "announce, next competes, key gone by 10101 ms, count 0");
    }
  }
}

BOOST_AUTO_TEST_CASE(a_release_that_is_not_the_holders_announces_and_changes_nothing) {
  for (const bool waiting : {false, true}) {
    BOOST_TEST_CONTEXT((waiting ? "someone waits" : "nobody waits")) {
      auto in = release_while_waiting(2);
      in.holder = false;
      in.waiting = waiting;
      BOOST_TEST(describe(rd::decide_handoff(in)) == "announce, next wakes, count 2");
    }
  }
}

BOOST_AUTO_TEST_CASE(with_no_local_handoffs_every_waiter_competes) {
  unsigned in_a_row = 0;
  for (int release = 0; release < 3; ++release) {
    const auto out = rd::decide_handoff(release_while_waiting(in_a_row, 0));
    BOOST_TEST(describe(out) == "announce, next competes, key gone by 10101 ms, count 0");
    in_a_row = out.handoffs_in_a_row;
  }
}

// Releases while someone always waits, limit 2: two silent hand-offs, then one competes, and the
// count starts again.
BOOST_AUTO_TEST_CASE(a_run_of_releases_hands_off_local_handoffs_times_then_competes) {
  const char* expected = "hhchhch";  // h: handed off silently, c: competes
  unsigned in_a_row = 0;
  for (const char* step = expected; *step != '\0'; ++step) {
    BOOST_TEST_CONTEXT("release " << (step - expected) + 1) {
      const auto out = rd::decide_handoff(release_while_waiting(in_a_row, 2));
      BOOST_TEST(out.next_waiter_competes == (*step == 'c'));
      BOOST_TEST(out.announce == (*step == 'c'));
      in_a_row = out.handoffs_in_a_row;
    }
  }
  BOOST_TEST(in_a_row == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
