// One Redlock acquire round as a step function: when it decides, what it decides, which nodes it
// cleans, and whether the acquire may try again. No sockets, no clock but the one it is given.

#include "algo/acquire_round.hpp"
#include "algo/replies.hpp"
#include "algo/validity.hpp"
#include "support/printing.hpp"
#include "unit/instants.hpp"
#include "unit/node_masks.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {
// For Boost.Test's messages.
std::ostream& boost_test_print_type(std::ostream& out, acquire_round::outcome what) {
  constexpr const char* names[] = {
      "undecided", "held", "contended", "no_quorum", "validity_expired", "failing_for_good"};
  return out << names[static_cast<int>(what)];
}
}  // namespace redlock::detail

namespace {

namespace rd = redlock::detail;
using outcome = rd::acquire_round::outcome;
using step = rd::acquire_round::step;
using boost::system::error_code;
using redlock::error;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

using redlock::test::t0;

rd::acquire_round make_round(std::size_t nodes, std::chrono::milliseconds ttl = 10s,
                             double drift_factor = 0.01) {
  return rd::acquire_round({.nodes = nodes, .ttl = ttl, .drift_factor = drift_factor, .start = t0});
}

// One node's answer, by letter:
//   G granted, R refused (held by another owner),
//   F failed after the SET was written (connection lost, timed out),
//   U failed unsent (node down or skipped as unresponsive),
//   A failed unsent with error::auth_failed (the connection fails for good),
//   P failed with error::permission_denied from a NOPERM reply (written: the node answered),
//   . never answers.
step feed(rd::acquire_round& round, std::size_t node, char answer, steady_clock::time_point now) {
  switch (answer) {
    case 'G':
      return round.granted(node, now);
    case 'R':
      return round.refused(node, now);
    case 'F':
      return round.failed(node, error::connection_lost, false, now);
    case 'U':
      return round.failed(node, error::not_connected, true, now);
    case 'A':
      return round.failed(node, error::auth_failed, true, now);
    case 'P':
      return round.failed(node, error::permission_denied, false, now);
  }
  BOOST_FAIL("unknown answer " << answer);
  return step::undecided;
}

// "10011": node i is to be cleaned.
using redlock::test::mask;

struct round_case {
  const char* rule;
  const char* answers;        // by node, fed in node order
  std::size_t decided_after;  // answers fed when the round is decided; 0: never
  outcome what;
  std::optional<error> code;  // none: success
  const char* clean;          // by node; empty when held
  bool retry;
};

const round_case cases[] = {
    // N = 1: the single-instance lock.
    {"one node grants", "G", 1, outcome::held, {}, "", false},
    {"one node refuses", "R", 1, outcome::contended, error::contended, "0", true},
    {"one node fails after the write", "F", 1, outcome::no_quorum, error::no_quorum, "1", true},
    {"one node fails unsent", "U", 1, outcome::no_quorum, error::no_quorum, "0", true},
    {"one node refuses the login", "A", 1, outcome::failing_for_good, error::auth_failed, "0",
     false},

    // N = 3, quorum 2.
    {"two grants of three decide without the third", "GG.", 2, outcome::held, {}, "", false},
    {"grant, refuse, grant", "GRG", 3, outcome::held, {}, "", false},
    {"two refusals of three decide without the third", "RR.", 2, outcome::contended,
     error::contended, "001", true},
    {"one grant, two refusals", "GRR", 3, outcome::contended, error::contended, "100", true},
    {"two failures of three: no quorum", "FF.", 2, outcome::no_quorum, error::no_quorum, "111",
     true},
    {"a refusal and a failure: contended, one failure is within what a majority spares", "RF.", 2,
     outcome::contended, error::contended, "011", true},
    {"unsent failures are not cleaned", "UR.", 2, outcome::contended, error::contended, "001",
     true},
    {"grant, unsent, written failure", "GUF", 3, outcome::no_quorum, error::no_quorum, "101", true},

    // N = 5, quorum 3.
    {"three grants of five decide without the last two", "GGG..", 3, outcome::held, {}, "", false},
    {"grants among refusals", "GRGRG", 5, outcome::held, {}, "", false},
    {"three refusals decide at once", "RRR..", 3, outcome::contended, error::contended, "00011",
     true},
    {"refusals and a failure: decided when a quorum is out of reach", "RRF..", 3,
     outcome::contended, error::contended, "00111", true},
    {"two failures and a refusal: contended", "FFR..", 3, outcome::contended, error::contended,
     "11011", true},
    {"three failures: no quorum", "FFF..", 3, outcome::no_quorum, error::no_quorum, "11111", true},
    {"two grants, then three failures", "GGFFF", 5, outcome::no_quorum, error::no_quorum, "11111",
     true},
    {"two grants, two refusals, a failure", "GGRRF", 5, outcome::contended, error::contended,
     "11001", true},
    {"two grants, a refusal, two unsent", "GGRUU", 5, outcome::contended, error::contended, "11000",
     true},

    // Permanent node failures (condition::node_failure) that make a quorum impossible.
    {"logins refused on a quorum: not retried", "AAA..", 3, outcome::failing_for_good,
     error::auth_failed, "00011", false},
    {"NOPERM on a quorum: not retried, the written SETs cleaned", "PPP..", 3,
     outcome::failing_for_good, error::permission_denied, "11111", false},
    {"permanent failures on a minority are ordinary failures", "AAR..", 3, outcome::contended,
     error::contended, "00011", true},
    {"the most common permanent code wins", "PAA..", 3, outcome::failing_for_good,
     error::auth_failed, "10011", false},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(acquire_round)

BOOST_AUTO_TEST_CASE(decisions_by_answers) {
  for (const auto& c : cases) {
    const std::string_view answers = c.answers;
    BOOST_TEST_CONTEXT(c.rule << ": N = " << answers.size() << ", answers " << answers) {
      auto round = make_round(answers.size());
      std::size_t fed = 0;
      std::size_t decided_after = 0;
      for (std::size_t node = 0; node < answers.size(); ++node) {
        if (answers[node] == '.') continue;
        ++fed;
        if (feed(round, node, answers[node], t0 + 5ms) == step::decided_now) decided_after = fed;
      }
      BOOST_TEST(decided_after == c.decided_after);
      const auto& d = round.result();
      BOOST_TEST(d.what == c.what);
      BOOST_TEST(d.code == (c.code ? make_error_code(*c.code) : error_code{}));
      BOOST_TEST(d.retry == c.retry);
      BOOST_TEST(mask(d.clean) == c.clean);
      if (d.what == outcome::held) {
        BOOST_TEST((d.valid_until == t0 + 10s - rd::drift_allowance(10s, 0.01)));
      }
    }
  }
}

// validity = ttl - elapsed - (ttl * drift_factor + 2 ms); held only while it is positive.
BOOST_AUTO_TEST_CASE(validity_at_the_boundary) {
  const auto drift = rd::drift_allowance(1000ms, 0.01);  // 12 ms
  BOOST_TEST_REQUIRE((drift == 12ms));
  struct {
    steady_clock::duration elapsed;
    outcome what;
  } const boundary[] = {
      {0ms, outcome::held},
      {987ms, outcome::held},
      {988ms - 1ns, outcome::held},
      {988ms, outcome::validity_expired},
      {988ms + 1ns, outcome::validity_expired},
      {2s, outcome::validity_expired},
  };
  for (const auto& b : boundary) {
    BOOST_TEST_CONTEXT("decided " << b.elapsed.count() << " ns after the start") {
      auto round = make_round(3, 1000ms);
      BOOST_TEST((feed(round, 0, 'G', t0) == step::undecided));
      BOOST_TEST((feed(round, 2, 'G', t0 + b.elapsed) == step::decided_now));
      const auto& d = round.result();
      BOOST_TEST(d.what == b.what);
      if (b.what == outcome::held) {
        BOOST_TEST((d.valid_until == t0 + 1000ms - drift));
        BOOST_TEST(!d.code);
        BOOST_TEST(d.clean.empty());
      } else {
        BOOST_TEST(d.code == error::validity_expired);
        BOOST_TEST(d.retry);
        BOOST_TEST(mask(d.clean) == "111");  // both grants and the SET still in flight
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_decision_is_made_at_the_quorum_answer_not_at_the_last) {
  auto round = make_round(5);
  feed(round, 4, 'G', t0 + 1ms);
  feed(round, 0, 'G', t0 + 2ms);
  BOOST_TEST(!round.decided());
  BOOST_TEST((feed(round, 2, 'G', t0 + 3ms) == step::decided_now));
  // The slow nodes answer much later; validity was fixed at the third grant.
  BOOST_TEST((feed(round, 1, 'G', t0 + 9s) == step::decided_before));
  BOOST_TEST((feed(round, 3, 'R', t0 + 20s) == step::decided_before));
  BOOST_TEST(round.result().what == outcome::held);
  BOOST_TEST(round.votes().yes_count() == 4u);  // late answers are still counted
  BOOST_TEST(round.votes().no_count() == 1u);
}

// Which of no_quorum and contended: the tally at the decision decides, with no_quorum only when
// more nodes failed than a majority can spare. A later failure does not change it.
BOOST_AUTO_TEST_CASE(no_quorum_or_contended_is_fixed_by_the_tally_at_the_decision) {
  {
    auto round = make_round(5);
    feed(round, 0, 'R', t0);
    feed(round, 1, 'F', t0);
    BOOST_TEST((feed(round, 2, 'F', t0) == step::decided_now));
    BOOST_TEST(round.result().what == outcome::contended);
    feed(round, 3, 'F', t0);  // three failures now, but the round was decided
    BOOST_TEST(round.result().what == outcome::contended);
  }
  {
    auto round = make_round(5);
    feed(round, 0, 'F', t0);
    feed(round, 1, 'F', t0);
    BOOST_TEST((feed(round, 2, 'F', t0) == step::decided_now));
    BOOST_TEST(round.result().what == outcome::no_quorum);
    feed(round, 3, 'R', t0);
    BOOST_TEST(round.result().what == outcome::no_quorum);
  }
}

BOOST_AUTO_TEST_CASE(a_tie_between_permanent_codes_goes_to_the_lowest_node) {
  for (const bool reversed : {false, true}) {
    BOOST_TEST_CONTEXT("node 1 answers " << (reversed ? "first" : "second")) {
      auto round = make_round(3);
      if (reversed) {
        round.failed(1, error::select_failed, true, t0);
        round.failed(0, error::auth_failed, true, t0);
      } else {
        round.failed(0, error::auth_failed, true, t0);
        round.failed(1, error::select_failed, true, t0);
      }
      BOOST_TEST(round.result().what == outcome::failing_for_good);
      BOOST_TEST(round.result().code == error::auth_failed);
    }
  }
}

namespace {

// A round on `nodes` nodes where the connections of `failing` fail for good with `code`.
rd::acquire_round round_failing(std::size_t nodes, std::initializer_list<std::size_t> failing,
                                error code) {
  auto round = make_round(nodes);
  for (const std::size_t node : failing)
    round.set_failing_for_good(node, code);
  return round;
}

}  // namespace

// A connection that fails for good counts also for a node whose SET is still pending, or whose
// answer was an ordinary failure.
BOOST_AUTO_TEST_CASE(connections_failing_for_good_count_without_an_answer) {
  auto round = round_failing(5, {3, 4}, error::select_failed);
  feed(round, 0, 'R', t0);
  feed(round, 1, 'R', t0);
  BOOST_TEST(!round.decided());
  BOOST_TEST((feed(round, 2, 'A', t0) == step::decided_now));
  const auto& d = round.result();
  BOOST_TEST(d.what == outcome::failing_for_good);
  BOOST_TEST(d.code == error::select_failed);  // two nodes against one
  BOOST_TEST(!d.retry);
  BOOST_TEST(mask(d.clean) == "00011");  // pending: their SETs may still be written

  // Cleared again (the node reconnected): an ordinary round.
  auto healed = round_failing(3, {1}, error::auth_failed);
  healed.set_failing_for_good(1, {});
  feed(healed, 0, 'R', t0);
  feed(healed, 2, 'F', t0);
  BOOST_TEST(healed.result().what == outcome::contended);
  BOOST_TEST(healed.result().retry);
}

BOOST_AUTO_TEST_CASE(a_quorum_of_grants_is_held_whatever_the_connections_do_since) {
  auto round = round_failing(3, {0, 1}, error::auth_failed);
  feed(round, 0, 'G', t0);
  feed(round, 1, 'G', t0);
  BOOST_TEST(round.result().what == outcome::held);
}

BOOST_AUTO_TEST_CASE(nodes_that_are_one_server_refuse_even_a_quorum) {
  auto round = make_round(3);
  round.set_nodes_not_independent();
  feed(round, 0, 'G', t0);
  BOOST_TEST((feed(round, 1, 'G', t0) == step::decided_now));
  const auto& d = round.result();
  BOOST_TEST(d.what == outcome::failing_for_good);
  BOOST_TEST(d.code == error::invalid_argument);
  BOOST_TEST(!d.retry);
  BOOST_TEST(mask(d.clean) == "111");
}

BOOST_AUTO_TEST_CASE(a_second_answer_from_one_node_is_ignored) {
  auto round = make_round(3);
  feed(round, 0, 'G', t0);
  BOOST_TEST((feed(round, 0, 'G', t0) == step::undecided));
  BOOST_TEST(round.votes().yes_count() == 1u);
  BOOST_TEST((feed(round, 1, 'R', t0) == step::undecided));
  BOOST_TEST((feed(round, 1, 'G', t0) == step::undecided));
  BOOST_TEST(round.votes().no_count() == 1u);
}

// decides_with foretells exactly the answers that decide: the caller gathers the nodes' lasting
// failures only for those, and the decision reads them.
BOOST_AUTO_TEST_CASE(decides_with_names_the_deciding_answer) {
  using kind = rd::node_answer::kind;
  auto round = make_round(3);
  BOOST_TEST(!round.decides_with(0, kind::yes));  // one grant of three
  BOOST_TEST(!round.decides_with(0, kind::pending));
  feed(round, 0, 'G', t0);
  BOOST_TEST(!round.decides_with(0, kind::yes));  // node 0 has answered
  BOOST_TEST(round.decides_with(1, kind::yes));   // a quorum of grants
  BOOST_TEST(!round.decides_with(1, kind::no));   // node 2 may still grant
  feed(round, 1, 'R', t0);
  BOOST_TEST(round.decides_with(2, kind::no));      // no quorum can grant any more
  BOOST_TEST(round.decides_with(2, kind::failed));  // nor after a failure
  round.set_failing_for_good(1, make_error_code(error::auth_failed));
  round.set_failing_for_good(2, make_error_code(error::auth_failed));
  BOOST_TEST((feed(round, 2, 'F', t0) == step::decided_now));
  BOOST_TEST(round.result().what == outcome::failing_for_good);
  BOOST_TEST(!round.decides_with(2, kind::yes));  // decided
}

// A reply read into the round's own answer counts as the same answer built and moved in.
BOOST_AUTO_TEST_CASE(a_reply_read_in_place_is_the_same_answer) {
  using kind = rd::node_answer::kind;
  redlock::resp::value odd;
  odd.kind = redlock::resp::type::integer;
  odd.integer = 7;
  auto in_place = make_round(3);
  auto moved = make_round(3);
  BOOST_TEST((in_place.answer(0, kind::failed, {}, odd, "unexpected reply 7", t0) ==
              moved.answer(0, rd::make_answer(kind::failed, {}, odd, "unexpected reply 7"), t0)));
  const auto& a = in_place.answers()[0];
  const auto& b = moved.answers()[0];
  BOOST_TEST((a.what == b.what));
  BOOST_TEST(a.detail == b.detail);
  BOOST_TEST((a.failure == b.failure));
  BOOST_TEST(a.unsent == b.unsent);
  // A node's second answer is ignored on either path.
  BOOST_TEST((in_place.answer(0, kind::yes, {}, odd, "", t0) == step::undecided));
  BOOST_TEST(in_place.votes().yes_count() == 0u);
}

// What an acquire cancelled in the middle of a round releases.
BOOST_AUTO_TEST_CASE(cleanup_targets_before_the_decision) {
  auto round = make_round(9);
  feed(round, 0, 'G', t0);
  feed(round, 1, 'R', t0);
  feed(round, 2, 'U', t0);
  feed(round, 3, 'F', t0);
  feed(round, 4, 'P', t0);
  BOOST_TEST(!round.decided());
  BOOST_TEST(mask(round.cleanup_targets()) == "100111111");
}

// Every mix of grant / refuse / fail / fail unsent on N nodes, fed in several orders; the round
// is looked at before the first answer and after each one, as if it ended there: it is decided
// exactly once the outcome is certain (a quorum granted, or the grants plus the pending nodes are
// short of one), and the decision never changes after.
BOOST_AUTO_TEST_CASE(decided_exactly_when_certain_and_never_changed) {
  constexpr char kinds[] = {'G', 'R', 'F', 'U'};
  for (const std::size_t n : {1u, 2u, 3u, 4u, 5u}) {
    const std::size_t quorum = rd::quorum_of(n);
    std::size_t mixes = 1;
    for (std::size_t i = 0; i < n; ++i)
      mixes *= std::size(kinds);
    std::vector<std::size_t> identity(n);
    std::iota(identity.begin(), identity.end(), 0);
    std::vector<std::size_t> reversed(identity.rbegin(), identity.rend());
    std::vector<std::size_t> evens_first;
    for (std::size_t i = 0; i < n; i += 2)
      evens_first.push_back(i);
    for (std::size_t i = 1; i < n; i += 2)
      evens_first.push_back(i);
    for (std::size_t mix = 0; mix < mixes; ++mix) {
      std::string answers(n, ' ');
      for (std::size_t i = 0, rest = mix; i < n; ++i, rest /= std::size(kinds))
        answers[i] = kinds[rest % std::size(kinds)];
      for (const std::vector<std::size_t>* order : {&identity, &reversed, &evens_first}) {
        auto round = make_round(n);
        BOOST_TEST_REQUIRE(!round.decided());
        std::size_t grants = 0;
        std::size_t failures = 0;
        std::optional<rd::acquire_round::decision> first;
        // '0' where the decision must not clean: answered by then, and refused or unsent.
        std::string expected_clean(n, '1');
        for (std::size_t k = 0; k < n; ++k) {
          const std::size_t node = (*order)[k];
          BOOST_TEST_CONTEXT("N = " << n << ", answers " << answers << ", node " << node
                                    << " answers as number " << k + 1) {
            const auto s = feed(round, node, answers[node], t0 + 1ms);
            grants += answers[node] == 'G';
            failures += answers[node] == 'F' || answers[node] == 'U';
            if (!first && (answers[node] == 'R' || answers[node] == 'U')) {
              expected_clean[node] = '0';
            }
            const std::size_t pending = n - (k + 1);
            const bool certain = grants >= quorum || grants + pending < quorum;
            BOOST_TEST_REQUIRE(round.decided() == certain);
            if (first) {
              BOOST_TEST_REQUIRE((s == step::decided_before));
              BOOST_TEST_REQUIRE((round.result() == *first));
            } else if (certain) {
              BOOST_TEST_REQUIRE((s == step::decided_now));
              first = round.result();
              if (grants >= quorum) {
                BOOST_TEST(first->what == outcome::held);
              } else {
                BOOST_TEST(first->what ==
                           (failures > n - quorum ? outcome::no_quorum : outcome::contended));
                BOOST_TEST(mask(first->clean) == expected_clean);
              }
            } else {
              BOOST_TEST_REQUIRE((s == step::undecided));
            }
          }
        }
        BOOST_TEST_REQUIRE(first.has_value());  // every node answered: certain by then
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(after_a_round_that_was_not_held) {
  rd::acquire_round::decision contended;
  contended.what = outcome::contended;
  contended.code = error::contended;
  contended.retry = true;
  rd::acquire_round::decision lasting;
  lasting.what = outcome::failing_for_good;
  lasting.code = error::auth_failed;
  const auto now = t0 + 1s;
  // The code the acquire ends with; success for "try again".
  auto ends = [&](const rd::acquire_round::decision& round, bool single_round,
                  std::optional<steady_clock::time_point> deadline) {
    return rd::acquire_ends(round, single_round, deadline, now).value_or(error_code{});
  };
  // A lasting failure ends the acquire with its code, even with time left.
  BOOST_TEST(ends(lasting, false, now + 1h) == error::auth_failed);
  // async_try_acquire: one round.
  BOOST_TEST(ends(contended, true, std::nullopt) == error::contended);
  // The wait is over.
  BOOST_TEST(ends(contended, false, now) == error::wait_timeout);
  BOOST_TEST(ends(contended, false, now - 1ms) == error::wait_timeout);
  // Time left, or no wait limit: another round.
  BOOST_TEST(!ends(contended, false, now + 1ms));
  BOOST_TEST(!ends(contended, false, std::nullopt));
}

BOOST_AUTO_TEST_SUITE_END()
