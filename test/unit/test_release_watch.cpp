// When a waiting acquire may find the lock free: release announcements and the holders' TTLs.

#include "algo/release_watch.hpp"
#include "unit/answer_kinds.hpp"
#include "unit/answers_of.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>

using namespace std::chrono_literals;
using redlock::detail::node_answer;
using redlock::detail::release_watch;
using redlock::detail::steady_clock;
using redlock::test::answers_of;

namespace {

using redlock::test::answers::failed;
using redlock::test::answers::no;
using redlock::test::answers::pending;
using redlock::test::answers::yes;

}  // namespace

BOOST_AUTO_TEST_SUITE(release_watch_rules)

BOOST_AUTO_TEST_CASE(a_holder_on_every_node_needs_a_quorum_of_announcements) {
  release_watch w;
  w.reset(answers_of({no, no, no, no, no}), 3);
  BOOST_TEST(w.needed() == 3u);
  w.released(0);
  w.released(0);  // the same node twice counts once
  BOOST_TEST(w.needed() == 2u);
  w.released(3);
  BOOST_TEST(!w.may_be_free());
  w.released(4);
  BOOST_TEST(w.may_be_free());
}

BOOST_AUTO_TEST_CASE(announcements_from_nodes_that_granted_us_change_nothing) {
  // The split the rule exists for: we hold nodes 3 and 4 (and deleted our keys there), a third
  // party holds 0..2. Another loser's cleanup announced on 3 and 4 must not wake us.
  release_watch w;
  w.reset(answers_of({no, no, no, yes, yes}), 3);
  BOOST_TEST(w.needed() == 1u);
  w.released(3);
  w.released(4);
  BOOST_TEST(!w.may_be_free());
  w.released(1);
  BOOST_TEST(w.may_be_free());
}

BOOST_AUTO_TEST_CASE(failed_and_unanswered_nodes_stay_blocked) {
  release_watch w;
  w.reset(answers_of({no, no, no, failed, pending}), 3);
  BOOST_TEST(w.needed() == 3u);
  BOOST_TEST(w.blocked(3));
  BOOST_TEST(w.blocked(4));
  BOOST_TEST(!w.free_by().has_value());  // no expiry known anywhere
}

BOOST_AUTO_TEST_CASE(the_ttl_bound_is_the_needed_th_earliest_expiry) {
  const auto t = steady_clock::now();
  release_watch w;
  w.reset(answers_of({no, no, no, no, yes}), 3);
  BOOST_TEST(w.needed() == 2u);
  w.holder_ttl(0, 5000, t, 0.0);
  BOOST_TEST(!w.free_by().has_value());  // one known expiry, two needed
  w.holder_ttl(1, 1000, t, 0.0);
  w.holder_ttl(2, 3000, t, 0.0);
  w.holder_ttl(3, 2000, t, 0.0);
  // Expiries 5001, 1001, 3001, 2001 ms: the second earliest.
  BOOST_TEST((*w.free_by() - t == std::chrono::duration_cast<steady_clock::duration>(2001ms)));
  // A grant node's PTTL is ignored: it is not blocked.
  w.holder_ttl(4, 10, t, 0.0);
  BOOST_TEST((*w.free_by() - t == std::chrono::duration_cast<steady_clock::duration>(2001ms)));
}

BOOST_AUTO_TEST_CASE(the_drift_factor_lengthens_the_bound) {
  const auto t = steady_clock::now();
  release_watch w;
  w.reset(answers_of({no, no, no}), 2);
  w.holder_ttl(0, 1000, t, 0.01);
  w.holder_ttl(1, 1000, t, 0.01);
  BOOST_TEST((*w.free_by() - t == std::chrono::duration_cast<steady_clock::duration>(1011ms)));
}

BOOST_AUTO_TEST_CASE(no_key_frees_the_node_and_no_expiry_never_does) {
  const auto t = steady_clock::now();
  release_watch w;
  w.reset(answers_of({no, no, no}), 2);
  w.holder_ttl(0, -2, t, 0.0);  // gone between our SET and PTTL
  BOOST_TEST(!w.blocked(0));
  w.holder_ttl(1, -1, t, 0.0);  // a key without TTL: only a release frees it
  w.holder_ttl(2, -1, t, 0.0);
  BOOST_TEST(!w.free_by().has_value());
  w.holder_ttl(2, 500, t, 0.0);  // later learned
  BOOST_TEST((*w.free_by() - t == std::chrono::duration_cast<steady_clock::duration>(501ms)));
}

BOOST_AUTO_TEST_CASE(a_competing_local_waiter_waits_for_a_quorum_of_its_own_release) {
  const auto until = steady_clock::now() + 10s;
  release_watch w;
  w.reset_all_held(5, 3, until);
  BOOST_TEST(w.needed() == 3u);
  BOOST_TEST((*w.free_by() == until));
  w.released(0);
  w.released(1);
  BOOST_TEST(!w.may_be_free());
  w.released(2);
  BOOST_TEST(w.may_be_free());
  BOOST_TEST((*w.free_by() == steady_clock::time_point::min()));
}

BOOST_AUTO_TEST_SUITE_END()
