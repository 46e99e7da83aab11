// The lease machine driven by hand: renewal, expiry, max_hold and unconfirmed extensions, with
// the time chosen by the test and the actions read back.
#include "lock/lease_machine.hpp"
#include "redlock/error.hpp"
#include "unit/instants.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <optional>
#include <ostream>
#include <vector>

namespace redlock::detail {

std::ostream& operator<<(std::ostream& out, lease_action::kind what) {
  switch (what) {
    case lease_action::kind::arm_timer:
      return out << "arm_timer";
    case lease_action::kind::send_extension:
      return out << "send_extension";
    case lease_action::kind::expire:
      return out << "expire";
  }
  return out;
}

namespace {

using namespace std::chrono_literals;
using lease_kind = lease_action::kind;
using boost::system::error_code;

using redlock::test::t0;

std::vector<lease_action> actions_of(lease_machine& machine) {
  std::vector<lease_action> out;
  while (auto action = machine.next_action())
    out.push_back(*action);
  return out;
}

lease_machine renewing(std::optional<std::chrono::milliseconds> max_hold = std::nullopt) {
  return lease_machine({.ttl = 10s, .auto_renew = true, .max_hold = max_hold});
}

// The timer the actions ask for last.
steady_clock::time_point armed_at(const std::vector<lease_action>& actions) {
  std::optional<steady_clock::time_point> at;
  for (const auto& action : actions)
    if (action.what == lease_kind::arm_timer) at = action.at;
  BOOST_REQUIRE(at.has_value());
  return *at;
}

// The extension the actions ask to send, if any (a copy: the actions are often a temporary).
std::optional<lease_action> sent(const std::vector<lease_action>& actions) {
  for (const auto& action : actions)
    if (action.what == lease_kind::send_extension) return action;
  return std::nullopt;
}

BOOST_AUTO_TEST_SUITE(lease_machine_tests)

BOOST_AUTO_TEST_CASE(renewal_is_due_at_half_life_and_confirmed_moves_the_validity) {
  auto machine = renewing();
  const auto valid_until = t0 + 10s - 102ms;
  machine.held(t0, valid_until);
  auto actions = actions_of(machine);
  BOOST_TEST(actions.size() == 1u);
  // Armed for the renewal: half a TTL before the validity ends, at the start of its tick.
  const auto due = renewal_tick_start(valid_until - 5s, 10s);
  BOOST_TEST((due <= valid_until - 5s && due > valid_until - 5s - renewal_tick(10s)));
  BOOST_TEST((armed_at(actions) == due));
  BOOST_TEST((machine.next_renewal() == due));

  auto now = due;
  machine.timer(now);
  actions = actions_of(machine);
  const auto extension = sent(actions);
  BOOST_REQUIRE(extension.has_value());
  BOOST_TEST(extension->from_renewal);
  BOOST_TEST(extension->ttl >= 10s);
  // In flight: no renewal is due until it is decided, and the timer watches the validity.
  BOOST_TEST((machine.next_renewal() == steady_clock::time_point::max()));
  BOOST_TEST((armed_at(actions) == machine.validity().valid_until()));

  now += 3ms;
  BOOST_TEST(!machine.extension_decided(extension->id, true, {}, now));
  machine.plan_after_extension(true, false, now);
  actions = actions_of(machine);
  BOOST_TEST((machine.validity().valid_until() > valid_until));
  BOOST_TEST((armed_at(actions) == renewal_tick_start(machine.validity().valid_until() - 5s, 10s)));
}

BOOST_AUTO_TEST_CASE(without_renewal_the_lease_expires_at_its_validity) {
  lease_machine machine({.ttl = 10s, .auto_renew = false});
  const auto valid_until = t0 + 9s;
  machine.held(t0, valid_until);
  BOOST_TEST((armed_at(actions_of(machine)) == valid_until));
  machine.timer(valid_until - 1ms);  // early (a timer may fire late, never early; still)
  BOOST_TEST((armed_at(actions_of(machine)) == valid_until));
  machine.timer(valid_until);
  const auto actions = actions_of(machine);
  BOOST_REQUIRE(actions.size() == 1u);
  BOOST_TEST(actions[0].what == lease_kind::expire);
  BOOST_TEST((machine.why_expired() == lease_machine::expiry::ttl_without_renewal));
}

BOOST_AUTO_TEST_CASE(a_failed_renewal_is_tried_again_soon_while_the_validity_lasts) {
  auto machine = renewing();
  const auto valid_until = t0 + 10s;
  machine.held(t0, valid_until);
  actions_of(machine);
  auto now = valid_until - 5s;
  machine.timer(now);
  const auto extension = sent(actions_of(machine));
  BOOST_REQUIRE(extension.has_value());
  const auto id = extension->id;
  now += 2ms;
  const error_code ec = machine.extension_decided(id, true, error::no_quorum, now);
  BOOST_TEST((ec == error::no_quorum));
  machine.plan_after_extension(true, true, now);
  actions_of(machine);
  // A tenth of the TTL later, within [10 ms, 500 ms], at the start of its tick.
  BOOST_TEST((machine.next_renewal() == redlock::detail::renewal_tick_start(now + 500ms, 10s)));
  BOOST_TEST((machine.next_renewal() > now + 475ms));
}

BOOST_AUTO_TEST_CASE(an_unconfirmed_extension_caps_the_validity_and_the_lease_expires) {
  auto machine = renewing();
  machine.held(t0, t0 + 10s);
  actions_of(machine);
  // A user's extension by 2 s: the validity drops to its cap at once.
  machine.extend(2s, t0 + 1s);
  auto actions = actions_of(machine);
  const auto extension = sent(actions);
  BOOST_REQUIRE(extension.has_value());
  BOOST_TEST(!extension->from_renewal);
  const auto cap = t0 + 1s + 2s - 22ms;  // drift: 2 s * 0.01 + 2 ms
  BOOST_TEST((machine.validity().valid_until() == cap));
  // A shorter validity needs an earlier renewal, which is due at once.
  BOOST_TEST((armed_at(actions) <= cap));
  // Its confirmation never comes; at the cap the lease is lost.
  machine.timer(cap);
  actions = actions_of(machine);
  BOOST_TEST(actions.front().what == lease_kind::expire);
  BOOST_TEST((machine.why_expired() == lease_machine::expiry::extension_unconfirmed));
}

BOOST_AUTO_TEST_CASE(a_confirmation_after_the_validity_ran_out_does_not_count) {
  lease_machine machine({.ttl = 10s, .auto_renew = false});
  machine.held(t0, t0 + 10s);
  actions_of(machine);
  machine.extend(1s, t0 + 1s);
  const auto extension = sent(actions_of(machine));
  BOOST_REQUIRE(extension.has_value());
  const auto id = extension->id;
  const error_code ec = machine.extension_decided(id, false, {}, t0 + 5s);
  BOOST_TEST((ec == error::no_quorum));
}

BOOST_AUTO_TEST_CASE(max_hold_makes_the_last_renewal_and_then_the_lease_runs_out) {
  auto machine = renewing(12s);
  machine.held(t0, t0 + 10s);
  actions_of(machine);
  // The first renewal at half-life would reach past max_hold (t0 + 12 s): capped there, the last.
  auto now = t0 + 5s;
  machine.timer(now);
  auto actions = actions_of(machine);
  const auto extension = sent(actions);
  BOOST_REQUIRE(extension.has_value());
  BOOST_TEST(extension->ttl <= 7s);
  const auto id = extension->id;
  machine.extension_decided(id, true, {}, now + 2ms);
  machine.plan_after_extension(true, false, now + 2ms);
  actions = actions_of(machine);
  // No renewal after it: the timer waits for the end of the validity.
  BOOST_TEST((machine.next_renewal() == steady_clock::time_point::max()));
  const auto end = armed_at(actions);
  BOOST_TEST((end <= t0 + 12s));
  BOOST_TEST((end > t0 + 11s));
  machine.timer(end);
  BOOST_TEST(actions_of(machine).front().what == lease_kind::expire);
  BOOST_TEST((machine.why_expired() == lease_machine::expiry::max_hold));
}

BOOST_AUTO_TEST_CASE(renewing_at_once_beside_a_renewal_in_flight_sends_one_more) {
  auto machine = renewing();
  machine.held(t0, t0 + 10s);
  actions_of(machine);
  machine.timer(t0 + 5s);
  const auto first = sent(actions_of(machine));
  BOOST_REQUIRE(first.has_value());
  machine.renew_now(t0 + 6s);
  const auto actions = actions_of(machine);
  const auto second = sent(actions);
  BOOST_REQUIRE(second.has_value());
  BOOST_TEST(!second->from_renewal);  // the renewal in flight keeps planning the next one
}

BOOST_AUTO_TEST_CASE(a_stopped_lease_asks_for_nothing) {
  auto machine = renewing();
  machine.held(t0, t0 + 10s);
  machine.stop();
  BOOST_TEST(actions_of(machine).empty());
  machine.timer(t0 + 20s);
  machine.renew_now(t0 + 1s);
  machine.plan_after_extension(true, false, t0 + 1s);
  BOOST_TEST(actions_of(machine).empty());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace redlock::detail
