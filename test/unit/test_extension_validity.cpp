// A held lease's validity while extensions are sent and confirmed, and what renewal sends. No
// sockets, no clock but the one given.

#include "algo/extension_validity.hpp"
#include "algo/validity.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <optional>

namespace {

namespace rd = redlock::detail;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

const steady_clock::time_point granted_at = steady_clock::time_point{} + 1h;

// Milliseconds after granted_at, so that failed assertions print something readable. Exact for
// whole (and half) milliseconds.
double at(steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(t - granted_at).count();
}

// A lease acquired by a round that started at granted_at with a TTL of 10 s and drift factor 0.01:
// the drift allowance is 102 ms, so it is valid until granted_at + 9898 ms (a round that took no
// time).
constexpr double drift_factor = 0.01;
constexpr milliseconds lock_ttl = 10s;

rd::extension_validity acquired() {
  rd::extension_validity v;
  v.on_acquired(granted_at + 9898ms, lock_ttl);
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(extension_validity)

BOOST_AUTO_TEST_CASE(the_drift_allowance_the_cases_below_assume) {
  BOOST_TEST(rd::to_ms(rd::drift_allowance(10s, drift_factor)) == 102);
  BOOST_TEST(rd::to_ms(rd::drift_allowance(3s, drift_factor)) == 32);
  BOOST_TEST(rd::to_ms(rd::drift_allowance(5s, drift_factor)) == 52);
  BOOST_TEST(rd::to_ms(rd::drift_allowance(20s, drift_factor)) == 202);
}

BOOST_AUTO_TEST_CASE(an_acquired_lease_is_valid_until_its_round_said) {
  const auto v = acquired();
  BOOST_TEST(at(v.valid_until()) == 9898.0);
  BOOST_TEST(at(v.claimed()) == 9898.0);
  BOOST_TEST(!v.has_unconfirmed());
  BOOST_TEST(v.longest_ttl().count() == 10000);
}

BOOST_AUTO_TEST_CASE(a_sent_extension_lowers_the_validity_to_its_cap_at_once) {
  auto v = acquired();
  // A user's extension to 3 s, sent at granted_at + 1 s: cap 1000 + 3000 - 32.
  const auto sent = v.send(granted_at + 1s, 3s, drift_factor);
  BOOST_TEST(sent.id == 1u);
  BOOST_TEST(at(sent.cap) == 3968.0);
  BOOST_TEST(at(v.valid_until()) == 3968.0);
  BOOST_TEST(v.has_unconfirmed());
  // The longest TTL stays the acquire's: the key may still live 10 s on some node.
  BOOST_TEST(v.longest_ttl().count() == 10000);
}

BOOST_AUTO_TEST_CASE(a_longer_extension_raises_nothing_before_it_is_confirmed) {
  auto v = acquired();
  const auto sent = v.send(granted_at + 5s, 20s, drift_factor);  // cap 5000 + 20000 - 202
  BOOST_TEST(sent.id == 1u);
  BOOST_TEST(at(sent.cap) == 24798.0);
  BOOST_TEST(at(v.valid_until()) == 9898.0);
  // What is claimed (and what renewal must not shorten) includes the cap in flight.
  BOOST_TEST(at(v.claimed()) == 24798.0);
  BOOST_TEST(v.longest_ttl().count() == 20000);
  BOOST_TEST(v.send(granted_at + 6s, 10s, drift_factor).id == 2u);  // ids count up
}

// Sent, never confirmed: the validity is what the extension's cap allowed, and a confirmation
// that comes once that has passed is too late; the key may have been someone else's meanwhile.
BOOST_AUTO_TEST_CASE(the_validity_after_an_unconfirmed_extension) {
  auto v = acquired();
  const auto shortening = v.send(granted_at + 1s, 3s, drift_factor);
  BOOST_TEST(at(v.valid_until()) == 3968.0);
  BOOST_TEST(!v.confirm(shortening.id, granted_at + 3968ms));
  BOOST_TEST(at(v.valid_until()) == 3968.0);
  BOOST_TEST(v.has_unconfirmed());  // a late confirmation drops nothing either

  // The same with a renewal that never got its quorum: the lease ends where the acquire said.
  auto renewed = acquired();
  const auto renewal = renewed.send(granted_at + 5s, lock_ttl, drift_factor);  // cap 14898
  BOOST_TEST(at(renewed.valid_until()) == 9898.0);
  BOOST_TEST(!renewed.confirm(renewal.id, granted_at + 9898ms));
  BOOST_TEST(at(renewed.valid_until()) == 9898.0);
  BOOST_TEST(at(renewed.claimed()) == 14898.0);
}

BOOST_AUTO_TEST_CASE(a_confirmation_after_the_validity_ran_out_brings_nothing_back) {
  for (const auto late : {0us, 1us, 1'000'000us}) {
    BOOST_TEST_CONTEXT("confirmed " << late.count() << " us after valid_until") {
      auto v = acquired();
      const auto sent = v.send(granted_at + 5s, lock_ttl, drift_factor);
      BOOST_TEST(!v.confirm(sent.id, v.valid_until() + late));
      BOOST_TEST(at(v.valid_until()) == 9898.0);
    }
  }
  // One microsecond earlier it counts.
  auto v = acquired();
  const auto sent = v.send(granted_at + 5s, lock_ttl, drift_factor);
  BOOST_TEST(v.confirm(sent.id, v.valid_until() - 1us));
  BOOST_TEST(at(v.valid_until()) == 14898.0);
  BOOST_TEST(!v.has_unconfirmed());
}

BOOST_AUTO_TEST_CASE(a_confirmed_extension_raises_the_validity_to_its_cap) {
  auto v = acquired();
  const auto sent = v.send(granted_at + 5s, lock_ttl, drift_factor);
  BOOST_TEST(v.confirm(sent.id, granted_at + 5010ms));
  BOOST_TEST(at(v.valid_until()) == 14898.0);
  BOOST_TEST(!v.has_unconfirmed());
  BOOST_TEST(at(v.claimed()) == 14898.0);
}

// Extensions sent after the confirmed one may still run after it on any node of its quorum: the
// validity is the smallest of their caps.
BOOST_AUTO_TEST_CASE(confirming_an_older_extension_after_a_newer_was_sent_gives_the_smallest_cap) {
  auto v = acquired();
  const auto older = v.send(granted_at + 5s, 20s, drift_factor);  // cap 24798
  const auto newer = v.send(granted_at + 6s, 5s, drift_factor);   // cap 6000 + 5000 - 52 = 10948
  BOOST_TEST(at(v.valid_until()) == 9898.0);
  BOOST_TEST(v.confirm(older.id, granted_at + 7s));
  BOOST_TEST(at(v.valid_until()) == 10948.0);
  BOOST_TEST(v.has_unconfirmed());  // the newer one is still in flight
  BOOST_TEST(at(v.claimed()) == 10948.0);
  BOOST_TEST(v.confirm(newer.id, granted_at + 8s));
  BOOST_TEST(at(v.valid_until()) == 10948.0);
  BOOST_TEST(!v.has_unconfirmed());

  // A newer one with a later cap leaves the older one's.
  auto w = acquired();
  const auto first = w.send(granted_at + 5s, lock_ttl, drift_factor);  // cap 14898
  w.send(granted_at + 6s, lock_ttl, drift_factor);                     // cap 15898
  BOOST_TEST(w.confirm(first.id, granted_at + 7s));
  BOOST_TEST(at(w.valid_until()) == 14898.0);
  BOOST_TEST(at(w.claimed()) == 15898.0);
}

// Confirmed newer first: the older extension ran before it on that quorum, so its confirmation,
// when it comes, is no news.
BOOST_AUTO_TEST_CASE(an_older_extension_confirmed_after_a_newer_one_changes_nothing) {
  auto v = acquired();
  const auto older = v.send(granted_at + 5s, lock_ttl, drift_factor);  // cap 14898
  const auto newer = v.send(granted_at + 6s, lock_ttl, drift_factor);  // cap 15898
  BOOST_TEST(v.confirm(newer.id, granted_at + 7s));
  BOOST_TEST(at(v.valid_until()) == 15898.0);
  BOOST_TEST(!v.has_unconfirmed());  // the older one is forgotten with it
  BOOST_TEST(v.confirm(older.id, granted_at + 8s));
  BOOST_TEST(at(v.valid_until()) == 15898.0);
  BOOST_TEST(v.confirm(newer.id, granted_at + 9s));  // twice: no news either
  BOOST_TEST(at(v.valid_until()) == 15898.0);
}

// ttl - (ttl * drift_factor + 2 ms) >= until - now, in whole milliseconds, rounded up, plus one.
BOOST_AUTO_TEST_CASE(ttl_covering_rounds_up_with_a_millisecond_to_spare) {
  struct row {
    steady_clock::duration left;  // until - now
    double drift_factor;
    long long ttl_ms;
  };
  const row rows[] = {
      {10s, 0.0, 10003},       // 10002 / 1, + 1
      {10s, 0.01, 10105},      // 10002 / 0.99 = 10103.03 -> 10104, + 1
      {500us, 0.0, 4},         // 2.5 -> 3, + 1
      {1us, 0.0, 4},           // 2.001 -> 3, + 1
      {0us, 0.0, 3},           // 2 exactly, + 1
      {-1ms, 0.0, 2},          // 1, + 1
      {-10s, 0.01, 1},         // long gone: at least 1 ms
      {55398ms, 0.01, 55961},  // 55400 / 0.99 = 55959.6 -> 55960, + 1
  };
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT("until - now = " << at(granted_at + r.left) << " ms, drift factor "
                                        << r.drift_factor) {
      const auto now = granted_at + 1h;
      const auto ttl = rd::ttl_covering(now + r.left, now, r.drift_factor);
      BOOST_TEST(ttl.count() == r.ttl_ms);
      if (r.left >= steady_clock::duration::zero()) {
        BOOST_TEST((now + ttl - rd::drift_allowance(ttl, r.drift_factor) >= now + r.left));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_failed_renewal_is_retried_after_a_tenth_of_the_ttl_within_10_to_500_ms) {
  struct row {
    milliseconds ttl;
    milliseconds delay;
  };
  const row rows[] = {
      {30s, 500ms},  {5s, 500ms},   {4990ms, 499ms},
      {1s, 100ms},   {155ms, 15ms},  // whole milliseconds, rounded down
      {100ms, 10ms}, {50ms, 10ms},  {1ms, 10ms},
  };
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT("ttl " << r.ttl.count() << " ms") {
      BOOST_TEST(rd::to_ms(rd::renewal_retry_delay(r.ttl)) == r.delay.count());
      BOOST_TEST((rd::renewal_retry_delay(r.ttl) == r.delay));
    }
  }
}

// Later than the validity a retry is useless: the lease is reported lost then.
BOOST_AUTO_TEST_CASE(a_renewal_retry_is_planned_only_before_the_validity_runs_out) {
  const auto retry = rd::renewal_retry_at(granted_at, 1s, granted_at + 101ms);
  BOOST_TEST_REQUIRE(retry.has_value());
  // 100 ms later, at the start of its 15 ms tick (the epoch's hour is 240 000 ticks).
  BOOST_TEST(at(*retry) == 90.0);
  BOOST_TEST(!rd::renewal_retry_at(granted_at, 1s, granted_at + 100ms).has_value());
  BOOST_TEST(!rd::renewal_retry_at(granted_at, 1s, granted_at + 50ms).has_value());
}

BOOST_AUTO_TEST_CASE(a_renewal_is_due_half_a_ttl_before_the_validity_runs_out) {
  BOOST_TEST(at(rd::renewal_due(granted_at + 9898ms, lock_ttl)) == 4898.0);
  BOOST_TEST(at(rd::renewal_due(granted_at + 1000ms, 1001ms)) == 500.0);  // half of 1001 ms: 500 ms
}

// Renewals falling due within one tick go out together: each moves to its tick's start, never
// later, and the ticks are the clock's, whichever lease asks.
BOOST_AUTO_TEST_CASE(a_renewal_moves_to_the_start_of_its_tick) {
  BOOST_TEST(rd::renewal_tick(10s).count() == 25);  // a 64th is 156 ms: at most 25 ms
  BOOST_TEST(rd::renewal_tick(640ms).count() == 10);
  BOOST_TEST(rd::renewal_tick(20ms).count() == 1);  // at least 1 ms
  const steady_clock::time_point epoch{};
  BOOST_TEST((rd::renewal_tick_start(epoch + 1'000'024ms, 10s) == epoch + 1'000'000ms));
  BOOST_TEST((rd::renewal_tick_start(epoch + 1'000'025ms, 10s) == epoch + 1'000'025ms));
  BOOST_TEST((rd::renewal_tick_start(epoch + 1'000'025ms + 1ns, 10s) == epoch + 1'000'025ms));
  BOOST_TEST((rd::renewal_tick_start(epoch - 1ms, 10s) == epoch - 25ms));
  // Two leases whose renewals fall due 20 ms apart within a tick renew at the same instant.
  BOOST_TEST((rd::renewal_tick_start(epoch + 50'001ms, 10s) ==
              rd::renewal_tick_start(epoch + 50'021ms, 10s)));
}

// Retries of renewals that failed within one tick go out together, as first renewals do.
BOOST_AUTO_TEST_CASE(a_renewal_retry_moves_to_the_start_of_its_tick) {
  const auto first = rd::renewal_retry_at(granted_at + 1ms, 10s, granted_at + 5s);
  const auto second = rd::renewal_retry_at(granted_at + 20ms, 10s, granted_at + 5s);
  BOOST_TEST_REQUIRE((first && second));
  BOOST_TEST((*first == *second));
  BOOST_TEST(at(*first) == 500.0);  // 500 ms after 1 ms, at the start of its 25 ms tick
  // Never at or before now, even when the tick is longer than the delay.
  const auto soon = rd::renewal_retry_at(granted_at + 1ms, 100ms, granted_at + 1s);
  BOOST_TEST_REQUIRE(soon.has_value());
  BOOST_TEST(at(*soon) > 1.0);
  // Not past the validity for the sake of a tick: the retry then keeps its own moment.
  const auto late = rd::renewal_retry_at(granted_at + 80ms, 1s, granted_at + 181ms);
  BOOST_TEST_REQUIRE(late.has_value());
  BOOST_TEST(at(*late) <= 180.0);
}

BOOST_AUTO_TEST_CASE(a_renewal_sends_the_lock_ttl_when_that_covers_what_is_claimed) {
  const auto v = acquired();
  // 4898 ms claimed from now: 4951 ms would do, the lock's TTL is more.
  const auto plan = rd::plan_renewal(v, granted_at + 5s, lock_ttl, std::nullopt, drift_factor);
  BOOST_TEST(plan.ttl.count() == 10000);
  BOOST_TEST(!plan.last);
  BOOST_TEST(!plan.none);
}

// An extension in flight may give the key its cap: a renewal that sent less could run after it
// and shorten the key.
BOOST_AUTO_TEST_CASE(a_renewal_never_shortens_what_an_extension_in_flight_claims) {
  auto v = acquired();
  v.send(granted_at + 1s, 60s, drift_factor);  // cap 1000 + 60000 - 602 = 60398
  BOOST_TEST(at(v.valid_until()) == 9898.0);
  const auto now = granted_at + 5s;
  const auto plan = rd::plan_renewal(v, now, lock_ttl, std::nullopt, drift_factor);
  BOOST_TEST(plan.ttl.count() == 55961);  // ttl_covering(60398 - 5000 ms)
  BOOST_TEST((now + plan.ttl - rd::drift_allowance(plan.ttl, drift_factor) >= v.claimed()));
  BOOST_TEST(!plan.last);
}

// max_hold: the extension that reaches acquired_at + max_hold is capped there and is the last.
BOOST_AUTO_TEST_CASE(max_hold_caps_the_last_extension) {
  struct row {
    const char* rule;
    steady_clock::duration now;           // after granted_at
    steady_clock::duration max_hold_end;  // after granted_at
    long long ttl_ms;
    bool last;
  };
  const row rows[] = {
      {"more than a TTL left: an ordinary renewal", 5s, 15001ms, 10000, false},
      {"exactly a TTL left: the last one, at full length", 5s, 15s, 10000, true},
      {"less than a TTL left: capped", 5s, 12s, 7000, true},
      {"what is left counts in whole milliseconds, rounded down", 5s, 12000ms + 999us, 7000, true},
  };
  const auto v = acquired();
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT(r.rule) {
      const auto plan = rd::plan_renewal(v, granted_at + r.now, lock_ttl,
                                         granted_at + r.max_hold_end, drift_factor);
      BOOST_TEST(plan.ttl.count() == r.ttl_ms);
      BOOST_TEST(plan.last == r.last);
      BOOST_TEST(!plan.none);
    }
  }
}

// A capped extension is sent only if it still lengthens the validity held now.
BOOST_AUTO_TEST_CASE(nothing_is_left_to_send_near_max_hold) {
  {BOOST_TEST_CONTEXT("max_hold has passed"){const auto v = acquired();
  for (const auto end : {granted_at + 5s, granted_at + 4s, granted_at + 5s + 999us}) {
    const auto plan = rd::plan_renewal(v, granted_at + 5s, lock_ttl, end, drift_factor);
    BOOST_TEST(plan.last);
    BOOST_TEST(plan.none);
  }
}
}
{BOOST_TEST_CONTEXT("a user extension already reaches past max_hold"){auto v = acquired();
const auto user = v.send(granted_at + 1s, 30s, drift_factor);  // cap 1000 + 30000 - 302
BOOST_TEST(v.confirm(user.id, granted_at + 1010ms));
BOOST_TEST(at(v.valid_until()) == 30698.0);
// 3 s left to max_hold: 25000 + 3000 - 32 does not reach 30698.
const auto plan = rd::plan_renewal(v, granted_at + 25s, lock_ttl, granted_at + 28s, drift_factor);
BOOST_TEST(plan.ttl.count() == 3000);
BOOST_TEST(plan.last);
BOOST_TEST(plan.none);
}
}
{
  BOOST_TEST_CONTEXT("the capped extension would end exactly where the validity does") {
    // Drift factor 0: the allowance is 2 ms. Valid until 9998 ms; at 5000 ms, 5000 ms left
    // give 9998 ms (nothing gained), 5001 ms give 9999 ms.
    rd::extension_validity v;
    v.on_acquired(granted_at + 9998ms, lock_ttl);
    const auto even = rd::plan_renewal(v, granted_at + 5s, lock_ttl, granted_at + 10000ms, 0.0);
    BOOST_TEST(even.ttl.count() == 5000);
    BOOST_TEST(even.last);
    BOOST_TEST(even.none);
    const auto gains = rd::plan_renewal(v, granted_at + 5s, lock_ttl, granted_at + 10001ms, 0.0);
    BOOST_TEST(gains.ttl.count() == 5001);
    BOOST_TEST(gains.last);
    BOOST_TEST(!gains.none);
  }
}
}

BOOST_AUTO_TEST_SUITE_END()
