// How a waiting acquire plans its next round: the round-trip unit, the wake-up jitter, the
// collision backoff, when a sleeping acquire wakes, and what news heard mid-round does.

#include "algo/release_watch.hpp"
#include "algo/wait_plan.hpp"
#include "unit/answer_kinds.hpp"
#include "unit/answers_of.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <random>
#include <vector>

using namespace std::chrono_literals;
using redlock::detail::node_answer;
using redlock::detail::release_watch;
using redlock::detail::round_news;
using redlock::detail::round_trip_average;
using redlock::detail::sleep_facts;
using redlock::detail::steady_clock;
using redlock::test::answers_of;
namespace rd = redlock::detail;

namespace {

using redlock::test::answers::no;
using redlock::test::answers::yes;

// The largest of many draws: a random delay's ceiling shows as the draws' maximum.
template <typename Draw>
steady_clock::duration largest_of(Draw draw) {
  steady_clock::duration most{0};
  for (int i = 0; i < 2000; ++i)
    most = std::max(most, draw());
  return most;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(wait_plan)

BOOST_AUTO_TEST_CASE(the_first_round_replaces_the_guess_and_later_ones_move_it_by_an_eighth) {
  round_trip_average rtt;
  BOOST_TEST((rtt.bounded() == 1ms));  // the guess
  rtt.note(8ms);
  BOOST_TEST((rtt.bounded() == 8ms));
  rtt.note(16ms);
  BOOST_TEST((rtt.bounded() == 9ms));  // (8 * 7 + 16) / 8
}

BOOST_AUTO_TEST_CASE(the_round_trip_unit_is_kept_between_50_us_and_20_ms) {
  round_trip_average fast;
  fast.note(1us);
  BOOST_TEST((fast.bounded() == 50us));
  round_trip_average slow;
  slow.note(3s);
  BOOST_TEST((slow.bounded() == 20ms));
}

BOOST_AUTO_TEST_CASE(competitions_lost_are_the_rounds_after_the_first_two) {
  BOOST_TEST(rd::competitions_lost(0) == 0u);
  BOOST_TEST(rd::competitions_lost(2) == 0u);
  BOOST_TEST(rd::competitions_lost(3) == 1u);
  BOOST_TEST(rd::competitions_lost(10) == 8u);
}

BOOST_AUTO_TEST_CASE(the_wake_jitter_is_at_most_a_round_trip_halved_per_competition_lost) {
  std::minstd_rand random(7);
  for (unsigned lost : {0u, 1u, 3u, 6u, 9u}) {
    BOOST_TEST_CONTEXT("lost " << lost) {
      const auto ceiling = 6400us / (1 << std::min(lost, 6u));
      const auto most = largest_of([&] { return rd::wake_jitter(6400us, lost, random); });
      BOOST_TEST((most <= ceiling));
      // Spread over the whole range, not stuck at zero.
      BOOST_TEST((most >= ceiling * 9 / 10));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_collision_window_doubles_per_wake_up_up_to_32_round_trips) {
  std::minstd_rand random(11);
  for (unsigned wakes : {0u, 1u, 4u, 5u, 12u}) {
    BOOST_TEST_CONTEXT("wake-up " << wakes) {
      const auto window = 1ms * (1 << std::min(wakes, 5u));
      const auto most = largest_of([&] { return rd::collision_delay(1ms, wakes, 0ms, random); });
      BOOST_TEST((most <= window));
      BOOST_TEST((most >= window * 9 / 10));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_collision_window_never_passes_the_retry_ceiling) {
  std::minstd_rand random(13);
  const auto most = largest_of([&] { return rd::collision_delay(2ms, 5, 10ms, random); });
  BOOST_TEST((most <= 10ms));
  BOOST_TEST((most >= 9ms));
}

BOOST_AUTO_TEST_CASE(a_known_expiry_wakes_the_waiter_when_releases_are_heard) {
  const auto now = steady_clock::now();
  sleep_facts facts{.free_by = now + 300ms,
                    .may_be_free = false,
                    .announcements_cover = true,
                    .backoff_until = now + 40ms};
  // Every release would be heard: no need to look before the holder's key can have expired.
  BOOST_TEST((rd::wake_at(facts, now, std::nullopt) == now + 300ms));
  // A node not subscribed: a release there goes unheard, so the backoff bounds the wait too.
  facts.announcements_cover = false;
  BOOST_TEST((rd::wake_at(facts, now, std::nullopt) == now + 40ms));
  facts.free_by = now + 10ms;
  BOOST_TEST((rd::wake_at(facts, now, std::nullopt) == now + 10ms));
}

BOOST_AUTO_TEST_CASE(without_a_known_expiry_the_backoff_decides) {
  const auto now = steady_clock::now();
  const sleep_facts unknown{.free_by = std::nullopt,
                            .may_be_free = false,
                            .announcements_cover = true,
                            .backoff_until = now + 40ms};
  BOOST_TEST((rd::wake_at(unknown, now, std::nullopt) == now + 40ms));
  // Free already as far as anyone knows (the round that follows will say): the backoff.
  const sleep_facts free_now{.free_by = now - 1ms,
                             .may_be_free = true,
                             .announcements_cover = true,
                             .backoff_until = now + 40ms};
  BOOST_TEST((rd::wake_at(free_now, now, std::nullopt) == now + 40ms));
}

BOOST_AUTO_TEST_CASE(a_waiter_never_wakes_before_now_nor_after_its_deadline) {
  const auto now = steady_clock::now();
  const sleep_facts past{.free_by = now - 5ms,
                         .may_be_free = false,
                         .announcements_cover = true,
                         .backoff_until = now + 40ms};
  BOOST_TEST((rd::wake_at(past, now, std::nullopt) == now));
  const sleep_facts late{.free_by = now + 300ms,
                         .may_be_free = false,
                         .announcements_cover = true,
                         .backoff_until = now + 40ms};
  BOOST_TEST((rd::wake_at(late, now, now + 100ms) == now + 100ms));
  // The same rule for every delay: the next round starts after it, but never after the deadline.
  BOOST_TEST((rd::until_deadline(now + 50ms, std::nullopt) == now + 50ms));
  BOOST_TEST((rd::until_deadline(now + 50ms, now + 80ms) == now + 50ms));
  BOOST_TEST((rd::until_deadline(now + 50ms, now + 20ms) == now + 20ms));
}

BOOST_AUTO_TEST_CASE(an_announcement_that_arrives_mid_round_wakes_the_waiter_once_it_lost) {
  // Our round: a third party holds nodes 0..2 and refuses us there. While our SETs are in flight
  // the holder releases: the announcements from nodes 0 and 1 arrive before our refusals do.
  round_news heard;
  heard.released(0, 0);
  heard.released(0, 1);
  heard.released(0, 1);  // a copy of the same release, kept once
  // The round is lost; its answers come first, then the news.
  release_watch watch;
  watch.reset(answers_of({no, no, no, yes, yes}), 3);
  BOOST_TEST(!watch.may_be_free());
  std::vector<std::size_t> forgotten;
  const bool due = heard.apply(
      [&](std::size_t slot, std::size_t node) {
        BOOST_TEST(slot == 0u);
        forgotten.push_back(node);
        watch.released(node);
      },
      [&] { return watch.may_be_free(); });
  BOOST_TEST(due);  // not asleep until the holder's TTL
  BOOST_TEST(forgotten == (std::vector<std::size_t>{0, 1}));
  BOOST_TEST(watch.may_be_free());
}

BOOST_AUTO_TEST_CASE(news_applied_before_the_answers_would_have_been_lost) {
  // The same news applied at once, then overwritten by the round's own refusals: the waiter would
  // sleep. This is why the news is kept until the round is decided.
  release_watch watch;
  watch.reset(answers_of({no, no, no, no, no}), 3);
  watch.released(0);
  watch.released(1);
  watch.reset(answers_of({no, no, no, yes, yes}), 3);  // the refusals arrive
  BOOST_TEST(!watch.may_be_free());
}

BOOST_AUTO_TEST_CASE(news_that_cannot_free_a_quorum_does_not_wake_the_waiter) {
  // Another loser's cleanup on the nodes that granted us changes nothing (release_watch).
  round_news heard;
  heard.released(0, 3);
  release_watch watch;
  watch.reset(answers_of({no, no, no, yes, yes}), 3);
  BOOST_TEST(!heard.apply([&](std::size_t, std::size_t node) { watch.released(node); },
                          [&] { return watch.may_be_free(); }));
}

BOOST_AUTO_TEST_CASE(a_subscription_that_came_back_mid_round_makes_the_next_round_due) {
  round_news heard;
  heard.resubscribed();
  bool asked = false;
  BOOST_TEST(heard.apply([](std::size_t, std::size_t) {},
                         [&] {
                           asked = true;
                           return false;
                         }));
  BOOST_TEST(!asked);  // announcements may have been lost: look again whatever the watch says
  // Applied news is gone: the next round starts clean.
  BOOST_TEST(!heard.apply([](std::size_t, std::size_t) {}, [] { return true; }));
}

BOOST_AUTO_TEST_SUITE_END()
