// Which semaphore slot a waiting acquire tries next, and when one can be free: the refusals'
// per-slot TTLs, the client's own permits, announcements.

#include "algo/slot_watch.hpp"
#include "unit/answer_kinds.hpp"
#include "unit/answers_of.hpp"

#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <random>
#include <set>
#include <vector>

using namespace std::chrono_literals;
using redlock::detail::node_answer;
using redlock::detail::slot_watch;
using redlock::detail::steady_clock;
using redlock::test::answers_of;

namespace {

using redlock::test::answers::failed;
using redlock::test::answers::no;
using redlock::test::answers::yes;
constexpr long long free_slot = -2;

const std::vector<bool> none_here(8, false);

std::vector<bool> held_here(std::initializer_list<std::size_t> slots) {
  std::vector<bool> out(8, false);
  for (auto s : slots)
    out[s] = true;
  return out;
}

std::set<std::size_t> choices(const slot_watch& w, const std::vector<bool>& here, int draws = 400) {
  std::mt19937 random(7);
  std::set<std::size_t> seen;
  for (int i = 0; i < draws; ++i) {
    if (auto slot = w.choose(here, random)) seen.insert(*slot);
  }
  return seen;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(slot_watch_rules)

BOOST_AUTO_TEST_CASE(before_any_report_every_slot_not_held_here_is_a_candidate) {
  slot_watch w;
  w.reset_unknown(4);
  BOOST_TEST((choices(w, none_here) == std::set<std::size_t>{0, 1, 2, 3}));
  BOOST_TEST((choices(w, held_here({1, 3})) == std::set<std::size_t>{0, 2}));
  BOOST_TEST(!w.all_held(none_here));
  BOOST_TEST((w.free_by(none_here) == steady_clock::time_point::min()));
}

BOOST_AUTO_TEST_CASE(a_refused_round_points_at_the_slots_free_on_a_quorum) {
  // 3 nodes, 4 slots. Slot 0 was tried and refused everywhere. Slot 2 is free on nodes 0 and 1
  // (a quorum), slot 3 only on node 2, slot 1 nowhere.
  slot_watch w;
  w.reset_unknown(4);
  const auto now = steady_clock::now();
  const std::vector<slot_watch::slot_ttls> reports = {
      {500, 800, free_slot, 900},
      {400, 700, free_slot, 900},
      {600, 800, 300, free_slot},
  };
  w.reset(0, answers_of({no, no, no}), reports, 2, now, 0.0);
  BOOST_TEST(!w.may_be_free(0));
  BOOST_TEST(!w.may_be_free(1));
  BOOST_TEST(w.may_be_free(2));
  BOOST_TEST(!w.may_be_free(3));
  BOOST_TEST((choices(w, none_here) == std::set<std::size_t>{2}));
  BOOST_TEST(!w.all_held(none_here));
  // This client holds slot 2 itself: nothing else may be free now.
  BOOST_TEST(choices(w, held_here({2})).empty());
  // Then the earliest slot to be free on a quorum: slot 0, whose second-earliest expiry is
  // node 0's 500 ms (the TTLs are read at `now`; +1 ms for the PTTL's rounding).
  const auto by = w.free_by(held_here({2}));
  BOOST_TEST_REQUIRE(by.has_value());
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(*by - now).count() == 501);
}

BOOST_AUTO_TEST_CASE(contenders_reading_the_same_reports_spread_over_the_free_slots) {
  slot_watch w;
  w.reset_unknown(5);
  const std::vector<slot_watch::slot_ttls> reports(
      3, slot_watch::slot_ttls{100, free_slot, free_slot, 100, free_slot});
  w.reset(0, answers_of({no, no, no}), reports, 2, steady_clock::now(), 0.0);
  std::mt19937 random(11);
  std::array<int, 5> picked{};
  for (int i = 0; i < 3000; ++i)
    ++picked[*w.choose(none_here, random)];
  BOOST_TEST(picked[0] == 0);
  BOOST_TEST(picked[3] == 0);
  for (std::size_t slot : {1u, 2u, 4u})
    BOOST_TEST((picked[slot] > 800 && picked[slot] < 1200),
               "slot " << slot << ": " << picked[slot]);
}

BOOST_AUTO_TEST_CASE(every_slot_held_on_a_quorum_is_contended_and_a_gap_is_not) {
  slot_watch w;
  w.reset_unknown(2);
  const auto now = steady_clock::now();
  w.reset(0, answers_of({no, no, no}),
          std::vector<slot_watch::slot_ttls>{{10, 20}, {10, 20}, {10, -1}}, 2, now, 0.0);
  BOOST_TEST(w.all_held(none_here));
  BOOST_TEST(choices(w, none_here).empty());
  // Slot 1 held on one node only, free on the two others: not contended.
  w.reset(0, answers_of({no, no, no}),
          std::vector<slot_watch::slot_ttls>{{10, free_slot}, {10, free_slot}, {10, 20}}, 2, now,
          0.0);
  BOOST_TEST(!w.all_held(none_here));
  // A slot this client holds counts as held.
  w.reset(0, answers_of({no, no, no}),
          std::vector<slot_watch::slot_ttls>{{10, free_slot}, {10, free_slot}, {10, free_slot}}, 2,
          now, 0.0);
  BOOST_TEST(w.all_held(held_here({1})));
}

BOOST_AUTO_TEST_CASE(nodes_that_granted_or_failed_said_nothing_of_the_other_slots) {
  // The tried slot 0 was granted by node 0 and refused by node 1; node 2 failed. Only node 1
  // reported: slot 1 free there is one node, not a quorum of 2 among 3.
  slot_watch w;
  w.reset_unknown(2);
  const auto now = steady_clock::now();
  w.reset(0, answers_of({yes, no, failed}),
          std::vector<slot_watch::slot_ttls>{{}, {100, free_slot}, {}}, 2, now, 0.0);
  BOOST_TEST(!w.may_be_free(1));
  // Slot 0: node 0 was cleaned up by the failed round, so node 1's key expiring frees a quorum.
  BOOST_TEST(!w.may_be_free(0));
  const auto by = w.free_by(none_here);
  BOOST_TEST_REQUIRE(by.has_value());
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(*by - now).count() == 101);
  // Not enough known to call it contended, and no slot is known held by a quorum: both are worth
  // a try.
  BOOST_TEST(!w.all_held(none_here));
  BOOST_TEST(!w.known_held(1));
  BOOST_TEST((choices(w, none_here) == std::set<std::size_t>{0, 1}));
  // An announcement for slot 1 from node 2 makes it free on a quorum.
  w.released(1, 2);
  BOOST_TEST(w.may_be_free(1));
}

BOOST_AUTO_TEST_CASE(unreadable_or_endless_ttls_never_expire) {
  slot_watch w;
  w.reset_unknown(1);
  w.reset(0, answers_of({no, no, no}), std::vector<slot_watch::slot_ttls>{{-1}, {-3}, {-3}}, 2,
          steady_clock::now(), 0.0);
  BOOST_TEST(!w.free_by(none_here).has_value());
  BOOST_TEST(!w.all_held(none_here));  // -3: not known to be held
}

BOOST_AUTO_TEST_SUITE_END()
