// The fencing write-back's counting: which granting nodes are raised to the token, and when a
// quorum of nodes is known to be at it. No sockets.

#include "algo/fence_quorum.hpp"
#include "algo/quorum.hpp"
#include "unit/node_masks.hpp"

#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace redlock::detail {
// For Boost.Test's messages.
std::ostream& boost_test_print_type(std::ostream& out, fence_quorum::node_state state) {
  constexpr const char* names[] = {"not_asked", "round_pending", "at_token",
                                   "awaited",   "written_back",  "write_back_failed"};
  return out << names[static_cast<int>(state)];
}
}  // namespace redlock::detail

namespace {

namespace rd = redlock::detail;
using state = rd::fence_quorum::node_state;
using counters = std::vector<std::optional<std::uint64_t>>;
constexpr std::nullopt_t none = std::nullopt;

// "00100": a write-back goes to node 2.
using redlock::test::mask;
using redlock::test::nodes_of;

// "undecided", "confirmed" or "failed".
std::string verdict_of(const rd::fence_quorum& q) {
  if (!q.decision()) return "undecided";
  return *q.decision() ? "confirmed" : "failed";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fence_quorum)

BOOST_AUTO_TEST_CASE(the_token_is_the_highest_counter_among_the_grants) {
  BOOST_TEST(rd::fence_of({3, none, 9, 4}) == 9u);
  BOOST_TEST(rd::fence_of({5}) == 5u);
  BOOST_TEST(rd::fence_of({none, none}) == 0u);
  BOOST_TEST(rd::fence_of({}) == 0u);
}

// Counters never go down: a grant whose increment reached the token needs no write-back.
BOOST_AUTO_TEST_CASE(equal_grants_are_confirmed_at_once_and_nothing_is_sent) {
  rd::fence_quorum all(3, 2);
  BOOST_TEST(mask(all.start(4, {4, 4, 4}, nodes_of("000"))) == "000");
  BOOST_TEST(verdict_of(all) == "confirmed");
  for (std::size_t i = 0; i < 3; ++i)
    BOOST_TEST(all.state(i) == state::at_token);

  // A quorum of equal grants decides at once, whatever the pending nodes will say.
  rd::fence_quorum quorum(5, 3);
  BOOST_TEST(mask(quorum.start(8, {8, 8, 8, none, none}, nodes_of("00011"))) == "00000");
  BOOST_TEST(verdict_of(quorum) == "confirmed");
  BOOST_TEST(!quorum.late_answer(3, 2));  // decided: a late grant below the token is not raised
  BOOST_TEST(quorum.state(3) == state::round_pending);
  BOOST_TEST(verdict_of(quorum) == "confirmed");
}

BOOST_AUTO_TEST_CASE(a_grant_above_the_token_counts_as_at_it) {
  // fence_of picks the highest, but any counter at the token or above is confirmed.
  rd::fence_quorum q(3, 2);
  BOOST_TEST(mask(q.start(6, {6, 9, none}, nodes_of("000"))) == "000");
  BOOST_TEST(verdict_of(q) == "confirmed");
  BOOST_TEST(q.state(1) == state::at_token);
  BOOST_TEST(q.state(2) == state::not_asked);
}

BOOST_AUTO_TEST_CASE(grants_below_the_token_are_written_back_and_confirm_by_the_answer) {
  rd::fence_quorum q(5, 3);
  BOOST_TEST(mask(q.start(7, {7, 7, 5, none, none}, nodes_of("00011"))) == "00100");
  BOOST_TEST(verdict_of(q) == "undecided");
  BOOST_TEST(q.state(2) == state::awaited);
  BOOST_TEST(q.state(3) == state::round_pending);
  q.answered(2, true);
  BOOST_TEST(verdict_of(q) == "confirmed");
  BOOST_TEST(q.state(2) == state::written_back);
  BOOST_TEST(q.confirmed() == 3u);
}

// 5 nodes, quorum 3. The round was decided by grants on 0, 1 (at the token 7) and 2 (below it);
// 3 and 4 had not answered. Node 2's write-back fails: only a node that answered the round after
// its decision can still make the quorum, and does, once its write-back confirms.
BOOST_AUTO_TEST_CASE(a_fence_quorum_reached_only_through_a_late_grant) {
  rd::fence_quorum q(5, 3);
  BOOST_TEST(mask(q.start(rd::fence_of({7, 7, 5, none, none}), {7, 7, 5, none, none},
                          nodes_of("00011"))) == "00100");
  q.answered(2, false);
  BOOST_TEST(verdict_of(q) == "undecided");  // 2 confirmed + 2 pending
  BOOST_TEST(q.state(2) == state::write_back_failed);
  BOOST_TEST(!q.late_answer(3, none));       // a late refusal: nothing to send
  BOOST_TEST(verdict_of(q) == "undecided");  // 2 confirmed + 1 pending
  BOOST_TEST(q.late_answer(4, 6));           // a late grant below the token: raise it
  BOOST_TEST(q.state(4) == state::awaited);
  BOOST_TEST(verdict_of(q) == "undecided");  // 2 confirmed + 1 awaited
  q.answered(4, true);
  BOOST_TEST(verdict_of(q) == "confirmed");
  BOOST_TEST(q.confirmed() == 3u);
}

BOOST_AUTO_TEST_CASE(a_late_grant_at_the_token_is_confirmed_without_a_write_back) {
  rd::fence_quorum q(5, 3);
  BOOST_TEST(mask(q.start(7, {7, 3, 3, none, none}, nodes_of("00011"))) == "01100");
  q.answered(1, false);
  q.answered(2, false);
  BOOST_TEST(verdict_of(q) == "undecided");
  BOOST_TEST(!q.late_answer(3, 7));
  BOOST_TEST(q.state(3) == state::at_token);
  BOOST_TEST(verdict_of(q) == "undecided");
  BOOST_TEST(!q.late_answer(4, 8));
  BOOST_TEST(verdict_of(q) == "confirmed");
}

// Failed as soon as the confirmed, awaited and pending nodes together cannot make a quorum; the
// nodes still to answer are not waited for.
BOOST_AUTO_TEST_CASE(too_few_nodes_left_fail_as_soon_as_certain) {
  rd::fence_quorum q(5, 3);
  BOOST_TEST(mask(q.start(9, {9, 3, 3, none, none}, nodes_of("00011"))) == "01100");
  q.answered(1, false);
  BOOST_TEST(verdict_of(q) == "undecided");  // 1 + 1 awaited + 2 pending
  q.answered(2, false);
  BOOST_TEST(verdict_of(q) == "undecided");  // 1 + 2 pending
  BOOST_TEST(!q.late_answer(3, none));
  BOOST_TEST(verdict_of(q) == "failed");  // 1 + 1 pending
  BOOST_TEST(!q.late_answer(4, 9));       // decided: changes nothing
  BOOST_TEST(verdict_of(q) == "failed");

  // Certain at the start: nothing is sent.
  rd::fence_quorum short_of_one(5, 3);
  BOOST_TEST(mask(short_of_one.start(9, {9, 3, none, none, none}, nodes_of("00000"))) == "00000");
  BOOST_TEST(verdict_of(short_of_one) == "failed");
}

BOOST_AUTO_TEST_CASE(a_late_refusal_leaves_one_fewer_node_that_could_confirm) {
  {
    rd::fence_quorum q(3, 2);
    BOOST_TEST(mask(q.start(5, {5, 3, none}, nodes_of("001"))) == "010");
    BOOST_TEST(!q.late_answer(2, none));
    BOOST_TEST(q.state(2) == state::not_asked);
    BOOST_TEST(verdict_of(q) == "undecided");  // 1 + 1 awaited
    q.answered(1, true);
    BOOST_TEST(verdict_of(q) == "confirmed");
  }
  {
    rd::fence_quorum q(3, 2);
    q.start(5, {5, 3, none}, nodes_of("001"));
    q.answered(1, false);
    BOOST_TEST(verdict_of(q) == "undecided");  // 1 + 1 pending
    BOOST_TEST(!q.late_answer(2, none));
    BOOST_TEST(verdict_of(q) == "failed");
  }
}

BOOST_AUTO_TEST_CASE(answers_from_nodes_that_were_not_asked_are_ignored) {
  rd::fence_quorum q(5, 3);
  q.start(7, {7, 5, none, none, none}, nodes_of("00100"));
  q.answered(0, true);               // at the token already: no write-back went there
  q.answered(3, true);               // did not grant
  BOOST_TEST(!q.late_answer(1, 7));  // answered the round before its decision
  BOOST_TEST(!q.late_answer(4, 7));  // not pending
  BOOST_TEST(q.confirmed() == 1u);
  BOOST_TEST(verdict_of(q) == "undecided");  // 1 + 1 awaited + 1 pending
  BOOST_TEST(!q.late_answer(2, 7));
  BOOST_TEST(!q.late_answer(2, 7));  // twice counts once
  BOOST_TEST(q.confirmed() == 2u);
  q.answered(1, true);
  q.answered(1, true);
  BOOST_TEST(q.confirmed() == 3u);
  BOOST_TEST(verdict_of(q) == "confirmed");
}

// Every mix of what N nodes do (grant at the token; grant below it, whose write-back confirms or
// fails; refuse; answer late in each of those ways), fed in two orders: the outcome is whether
// a quorum ends at the token, and it is known no later than the last answer. Write-backs go
// exactly to the grants below the token while undecided.
BOOST_AUTO_TEST_CASE(the_outcome_is_whether_a_quorum_ends_at_the_token) {
  // T at the token, B below and confirmed, b below and failed, R refused;
  // t, c, f, r: the same, answered late.
  constexpr char kinds[] = {'T', 'B', 'b', 'R', 't', 'c', 'f', 'r'};
  constexpr std::uint64_t fence = 10;
  auto late = [](char k) { return k == 't' || k == 'c' || k == 'f' || k == 'r'; };
  auto below = [](char k) { return k == 'B' || k == 'b' || k == 'c' || k == 'f'; };
  auto confirms = [](char k) { return k == 'T' || k == 'B' || k == 't' || k == 'c'; };
  auto counter = [&](char k) -> std::optional<std::uint64_t> {
    if (k == 'R' || k == 'r') return std::nullopt;
    return below(k) ? 3 : fence;
  };
  for (std::size_t n = 1; n <= 5; ++n) {
    const std::size_t quorum = rd::quorum_of(n);
    std::size_t mixes = 1;
    for (std::size_t i = 0; i < n; ++i)
      mixes *= std::size(kinds);
    for (std::size_t mix = 0; mix < mixes; ++mix) {
      std::string what(n, ' ');
      for (std::size_t i = 0, rest = mix; i < n; ++i, rest /= std::size(kinds))
        what[i] = kinds[rest % std::size(kinds)];
      for (const bool late_first : {false, true}) {
        BOOST_TEST_CONTEXT("N = " << n << ", nodes " << what << ", late answers "
                                  << (late_first ? "first" : "last")) {
          counters at_start(n);
          std::vector<bool> pending(n);
          std::size_t will_confirm = 0;
          for (std::size_t i = 0; i < n; ++i) {
            if (late(what[i])) {
              pending[i] = true;
            } else {
              at_start[i] = counter(what[i]);
            }
            will_confirm += confirms(what[i]);
          }
          rd::fence_quorum q(n, quorum);
          const auto sent = q.start(fence, at_start, pending);
          std::vector<bool> written(n);
          for (std::size_t i = 0; i < n; ++i) {
            const bool expected = !q.decision() && !late(what[i]) && below(what[i]);
            BOOST_TEST_REQUIRE(sent[i] == expected);
            written[i] = sent[i];
          }
          auto write_backs = [&] {
            for (std::size_t i = 0; i < n; ++i) {
              if (!written[i]) continue;
              written[i] = false;
              q.answered(i, confirms(what[i]));
            }
          };
          if (!late_first) write_backs();
          for (std::size_t i = 0; i < n; ++i) {
            if (!late(what[i])) continue;
            const bool undecided = !q.decision();
            written[i] = q.late_answer(i, counter(what[i]));
            BOOST_TEST_REQUIRE(written[i] == (undecided && below(what[i])));
          }
          write_backs();
          BOOST_TEST_REQUIRE(q.decision().has_value());
          BOOST_TEST_REQUIRE(*q.decision() == (will_confirm >= quorum));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
