// Where and when the keys of an acquire's failed rounds are released: at once where the node
// answered, after its late answer where it had not, and unconditionally when the acquire ends or
// too many rounds wait.

#include "algo/cleanup_plan.hpp"
#include "unit/node_masks.hpp"

#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace {

// What the acquire needs to read a round's late answers (its set_form).
enum class form : std::uint8_t { plain, fenced };

using plan_type = redlock::detail::cleanup_plan<form>;
using release = plan_type::release;

using redlock::test::mask;
using redlock::test::nodes_of;

// "key token 00100", or "none".
std::string describe(const std::optional<release>& r) {
  if (!r) return "none";
  return r->key + " " + r->token + " " + mask(r->nodes);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cleanup_plan)

BOOST_AUTO_TEST_CASE(a_failed_round_is_released_at_once_where_every_target_answered) {
  plan_type plan;
  // Node 2 refused (not a target); the others granted or failed after the write.
  const auto out = plan.plan(1, "lock", "tok", form::plain, nodes_of("11011"), nodes_of("00000"));
  BOOST_TEST(mask(out.release_now) == "11011");
  BOOST_TEST(!out.evicted.has_value());
  BOOST_TEST(plan.deferred() == 0u);
  BOOST_TEST(!plan.find_form(1).has_value());
}

// A round on 7 nodes was decided with: 0 granted, 1 refused, 2 failed unsent, 3..6 still pending.
// Each late answer settles its node: a grant or a failure after the write gets its release, a
// refusal none; a node that never answers is released when the acquire ends.
BOOST_AUTO_TEST_CASE(no_release_is_lost_for_a_node_that_answers_after_the_decision) {
  plan_type plan;
  const auto out =
      plan.plan(7, "lock", "tok", form::fenced, nodes_of("1001111"), nodes_of("0001111"));
  BOOST_TEST(mask(out.release_now) == "1000000");
  BOOST_TEST(!out.evicted.has_value());
  BOOST_TEST(plan.deferred() == 1u);
  BOOST_TEST((plan.find_form(7) == form::fenced));

  BOOST_TEST(describe(plan.settle(7, 3, false)) == "lock tok 0001000");  // a late grant
  BOOST_TEST(describe(plan.settle(7, 4, false)) == "lock tok 0000100");  // failed after the write
  BOOST_TEST(describe(plan.settle(7, 5, true)) == "none");               // a late refusal
  BOOST_TEST(plan.deferred() == 1u);                                     // node 6 has not answered

  const auto rest = plan.drain();  // the acquire finishes
  BOOST_TEST_REQUIRE(rest.size() == 1u);
  BOOST_TEST(describe(rest[0]) == "lock tok 0000001");
  BOOST_TEST(plan.deferred() == 0u);
  BOOST_TEST(describe(plan.settle(7, 6, false)) == "none");  // released already
}

BOOST_AUTO_TEST_CASE(what_a_late_answer_needs) {
  struct row {
    const char* answer;
    bool refused_or_unsent;
    const char* release;
  };
  const row rows[] = {
      {"granted", false, "lock tok 010"},
      {"failed after the write (connection lost, timed out)", false, "lock tok 010"},
      {"refused: another owner holds the key", true, "none"},
      {"failed unsent: the SET never reached the node", true, "none"},
  };
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT(r.answer) {
      plan_type plan;
      plan.plan(1, "lock", "tok", form::plain, nodes_of("111"), nodes_of("010"));
      BOOST_TEST(describe(plan.settle(1, 1, r.refused_or_unsent)) == r.release);
      // Its only deferred node has answered: the round is forgotten.
      BOOST_TEST(plan.deferred() == 0u);
      BOOST_TEST(!plan.find_form(1).has_value());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_deferral_is_kept_until_each_of_its_nodes_answered) {
  plan_type plan;
  plan.plan(1, "lock", "tok", form::plain, nodes_of("0111"), nodes_of("0111"));
  BOOST_TEST(mask(plan.plan(2, "lock", "tok2", form::fenced, nodes_of("1111"), nodes_of("0001"))
                      .release_now) == "1110");
  BOOST_TEST(describe(plan.settle(1, 2, true)) == "none");
  BOOST_TEST(describe(plan.settle(1, 1, false)) == "lock tok 0100");
  BOOST_TEST(plan.deferred() == 2u);
  BOOST_TEST((plan.find_form(1) == form::plain));
  BOOST_TEST(describe(plan.settle(1, 3, false)) == "lock tok 0001");
  BOOST_TEST(plan.deferred() == 1u);
  BOOST_TEST(!plan.find_form(1).has_value());
  BOOST_TEST((plan.find_form(2) == form::fenced));
}

BOOST_AUTO_TEST_CASE(answers_that_no_deferral_waits_for_release_nothing) {
  plan_type plan;
  plan.plan(1, "lock", "tok", form::plain, nodes_of("1011"), nodes_of("0011"));
  BOOST_TEST(describe(plan.settle(9, 2, false)) == "none");  // an unknown round
  BOOST_TEST(describe(plan.settle(1, 0, false)) == "none");  // answered before the decision
  BOOST_TEST(describe(plan.settle(1, 1, false)) == "none");  // not a target: refused
  BOOST_TEST(describe(plan.settle(1, 7, false)) == "none");  // no such node
  BOOST_TEST(describe(plan.settle(1, 2, false)) == "lock tok 0010");
  BOOST_TEST(describe(plan.settle(1, 2, false)) == "none");  // a second answer
  BOOST_TEST(plan.deferred() == 1u);
}

// Rounds of one acquire may differ in key (a semaphore tries different slots) and in token.
BOOST_AUTO_TEST_CASE(when_the_acquire_ends_every_deferral_is_released_on_the_nodes_it_waits_for) {
  plan_type plan;
  plan.plan(1, "sem:0", "t1", form::plain, nodes_of("111"), nodes_of("011"));
  plan.plan(2, "sem:1", "t2", form::plain, nodes_of("110"), nodes_of("100"));
  plan.settle(1, 1, true);
  const auto rest = plan.drain();
  BOOST_TEST_REQUIRE(rest.size() == 2u);
  BOOST_TEST(describe(rest[0]) == "sem:0 t1 001");
  BOOST_TEST(describe(rest[1]) == "sem:1 t2 100");
  BOOST_TEST(plan.drain().empty());
}

// A node that stopped answering for a while must not make the deferrals grow without bound.
BOOST_AUTO_TEST_CASE(the_33rd_deferred_round_pushes_out_the_oldest_which_is_released_at_once) {
  plan_type plan;
  BOOST_TEST(plan_type::max_deferred_rounds == 32u);
  for (std::size_t ballot = 1; ballot <= 32; ++ballot) {
    const auto out = plan.plan(ballot, "lock", "t" + std::to_string(ballot), form::plain,
                               nodes_of("111"), nodes_of("001"));
    BOOST_TEST(!out.evicted.has_value());
  }
  BOOST_TEST(plan.deferred() == 32u);

  // A failed round with nothing pending defers nothing and pushes nothing out.
  BOOST_TEST(!plan.plan(33, "lock", "t33", form::plain, nodes_of("111"), nodes_of("000"))
                  .evicted.has_value());

  const auto out = plan.plan(34, "lock", "t34", form::fenced, nodes_of("111"), nodes_of("011"));
  BOOST_TEST(mask(out.release_now) == "100");
  BOOST_TEST(describe(out.evicted) == "lock t1 001");
  BOOST_TEST(plan.deferred() == 32u);
  BOOST_TEST(!plan.find_form(1).has_value());
  BOOST_TEST(describe(plan.settle(1, 2, false)) == "none");  // released already
  BOOST_TEST((plan.find_form(2) == form::plain));
  BOOST_TEST((plan.find_form(34) == form::fenced));
}

BOOST_AUTO_TEST_SUITE_END()
