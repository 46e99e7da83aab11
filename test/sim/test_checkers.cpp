// The checkers on histories made by hand: each rule shown to pass what it should and to report the
// unsafe variant next to it. The simulation's own runs show them on real histories; these pin the
// edges of the rules that a run reaches only by chance.

#include "redlock/error.hpp"
#include "sim/checkers.hpp"
#include "sim/history.hpp"

#define BOOST_TEST_MODULE redlock_sim_checker_tests
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>

namespace {

namespace sim = redlock::sim;
using redlock::error;
using namespace std::chrono_literals;

sim::time_point at_ms(int ms) {
  return redlock::detail::lock_clock::epoch() + std::chrono::milliseconds(ms);
}

sim::hold finished_hold(sim::op_kind kind, std::string resource) {
  sim::hold x;
  x.kind = kind;
  x.resources = {std::move(resource)};
  x.started = at_ms(0);
  x.acquire_completions = 1;
  x.finished = true;
  return x;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sim_checkers)

// The model nodes answer as Redis does and are set up right: an operation that fails with a node
// failure (a reply misread, a script answering what it cannot) is reported; a lock-level failure
// is an outcome like any other.
BOOST_AUTO_TEST_CASE(a_node_failure_is_reported_a_lock_level_failure_is_not) {
  sim::history h;
  h.workload_finished = true;
  const auto add = [&h](const char* resource, error acquire, error release) {
    auto x = finished_hold(sim::op_kind::lock, resource);
    if (acquire != error{}) x.acquire_error = make_error_code(acquire);
    if (release != error{}) x.release_error = make_error_code(release);
    h.holds.push_back(x);
  };
  add("r0", error::contended, error{});
  add("r0", error::wait_timeout, error::not_held);
  BOOST_TEST(sim::check_outcomes(h).empty());

  add("r1", error::protocol_error, error{});
  add("r2", error{}, error::permission_denied);
  const auto problems = sim::check_outcomes(h);
  BOOST_TEST_REQUIRE(problems.size() == 2u);
  BOOST_TEST(problems[0].find("acquire failed with a node failure") != std::string::npos,
             problems[0]);
  BOOST_TEST(problems[1].find("release failed with a node failure") != std::string::npos,
             problems[1]);
}

namespace {

// Seed 999203's shape on three nodes. Lease A is acquired at 100 ms; at 100 its holder reads
// that it is valid until 850 (a shortening extension), and at 1 300, after a renewal it did not
// watch, until 1 600. At 900 node 0 restarts at once without its keys. Lease B is acquired at
// 1 200, granted by nodes 0 and 1, and overlaps A's claim from 1 300. `a_keys_left_ms`: how long
// A's keys on nodes 0 and 2 had left at the loss (node 1's was about to run out).
sim::history renewed_lease_and_a_loss(std::int64_t a_keys_left_ms) {
  sim::history h;
  h.workload_finished = true;
  auto a = finished_hold(sim::op_kind::lock, "r0");
  a.token = "a";
  a.acquired = at_ms(100);
  a.granted_by = {0, 1, 2};
  a.claims = {{at_ms(100), at_ms(850)}, {at_ms(1300), at_ms(1600)}};
  a.release_started = at_ms(1500);
  auto b = finished_hold(sim::op_kind::lock, "r0");
  b.token = "b";
  b.acquired = at_ms(1200);
  b.granted_by = {0, 1};
  b.claims = {{at_ms(1200), at_ms(2000)}};
  b.release_started = at_ms(1900);
  h.holds = {a, b};
  sim::key_loss loss;
  loss.node = 0;
  loss.at = at_ms(900);
  loss.at_once = true;
  loss.holders_before["a"] = {{0, a_keys_left_ms}, {1, 20}, {2, a_keys_left_ms}};
  loss.holders_after["a"] = {{1, 20}, {2, a_keys_left_ms}};
  h.losses.push_back(loss);
  return h;
}

}  // namespace

// With 720 ms left, A's keys on nodes 0 and 2 (a quorum) covered its later claim before the loss,
// and only node 2's after it: the loss broke A as its holder relied on it afterwards, and the
// overlap is the loss's. Judged by the claim held at the loss (850, already past), the loss broke
// nothing, which is how the checker had reported seed 999203. With 200 ms left, no quorum covered
// the later claim even before the loss: the loss cannot explain that validity, and the overlap is
// reported.
BOOST_AUTO_TEST_CASE(a_loss_is_judged_by_every_validity_relied_on_after_it) {
  sim::scenario s;
  s.nodes = 3;
  s.node_timeout_ms = 50;
  s.delay_high_us = 100;
  BOOST_TEST(sim::check_exclusion(s, renewed_lease_and_a_loss(720)).empty());
  const auto problems = sim::check_exclusion(s, renewed_lease_and_a_loss(200));
  BOOST_TEST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems[0].find("exclusion") != std::string::npos, problems[0]);
}

BOOST_AUTO_TEST_SUITE_END()
