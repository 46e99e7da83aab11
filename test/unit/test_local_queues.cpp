// Who goes first among the acquires of one client (local_queues), without a server: a set of
// locks that cannot start yields to later acquires of its free resources, so that a task holding
// one of its resources can take another; after set_overtakes_before_claim of them the set claims
// its queues until its TTL, so that it is not starved; the acquire that starts goes to the front
// of each of its queues.

#include "lock/local_queues.hpp"
#include "support/recorded_acquire.hpp"
#include "unit/queue_holder_stub.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace {

using redlock::detail::local_queues;
using redlock::detail::queue_holder;
using redlock::detail::queued_acquire;
using redlock::detail::resource_queue;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

// What the queues told each acquire, in order ("x wakes", "s claims").
using redlock::test::event_log;

using fake_acquire = redlock::test::recorded_acquire;

using redlock::test::some_lease;

struct queues_fixture {
  local_queues queues{"redlock:released", 0.01};
  event_log log;

  std::shared_ptr<fake_acquire> join(std::string name, std::vector<std::string> keys) {
    auto waiter = std::make_shared<fake_acquire>(std::move(name), log);
    queues.join(waiter, keys, 10s);
    return waiter;
  }
  // The order of the waiters of `key`'s queue, by who they are.
  std::vector<const queued_acquire*> order(const std::string& key) {
    std::vector<const queued_acquire*> out;
    for (const auto& waiter : queues.find(key)->waiters)
      out.push_back(waiter.get());
    return out;
  }
};

using line = std::vector<const queued_acquire*>;

}  // namespace

BOOST_FIXTURE_TEST_SUITE(local_queue_order, queues_fixture)

// The deadlock of a waiting set: T1 holds "a" and then takes "b"; T2's set {a, b} joined in
// between. The set cannot start while "a" is held, so T1's acquire of the free "b" goes ahead of
// it instead of waiting behind it for ever.
BOOST_AUTO_TEST_CASE(a_set_that_cannot_start_lets_a_later_acquire_of_a_free_resource_go) {
  queues.queue_for("a").holder = some_lease();  // T1's lease
  const auto set = join("set", {"a", "b"});
  BOOST_TEST(!queues.try_start(*set));
  BOOST_TEST(!queues.waiter_goes_first(*queues.find("b")), "only a set that yields waits there");
  const auto nested = join("t1-b", {"b"});
  BOOST_TEST(queues.try_start(*nested));
  BOOST_TEST(nested->started());
  BOOST_TEST((order("b") == line{nested.get(), set.get()}));
  BOOST_TEST(queues.waiter_goes_first(*queues.find("b")));
}

// A set that can start goes at once, takes the front, and keeps later acquires behind it while it
// waits for other processes; and an acquire that is not a set never yields.
BOOST_AUTO_TEST_CASE(a_set_that_can_start_goes_first_and_keeps_its_place) {
  const auto set = join("set", {"a", "b"});
  BOOST_TEST(queues.try_start(*set));
  const auto later = join("later", {"b"});
  BOOST_TEST(!queues.try_start(*later));
  queues.queue_for("c").holder = some_lease();
  const auto single = join("single", {"c"});
  BOOST_TEST(!queues.try_start(*single));
  const auto behind = join("behind", {"c"});
  BOOST_TEST(!queues.try_start(*behind), "a single lock that waits keeps its place");
}

// Once the resources are free, the set starts: it is woken by whichever release frees the last
// of them, and not before.
BOOST_AUTO_TEST_CASE(a_set_starts_when_the_last_of_its_resources_is_free) {
  auto& a = queues.queue_for("a");
  auto& b = queues.queue_for("b");
  a.holder = some_lease();
  b.holder = some_lease();
  const auto set = join("set", {"a", "b"});
  BOOST_TEST(!queues.try_start(*set));
  a.holder = nullptr;
  queues.start_next_waiter(a);
  BOOST_TEST(log.empty());
  b.holder = nullptr;
  queues.start_next_waiter(b);
  BOOST_TEST((log == event_log{"set wakes"}));
  BOOST_TEST(set->started());
}

// Sets go ahead of sets too, and acquires that wait stay in one order in every queue they share:
// S1 {a, b} cannot start ("a" is held); S2 {b, c} can, and goes ahead of S1 in "b"; S3 {c, d}
// stays behind S2, which does not yield once started.
BOOST_AUTO_TEST_CASE(a_set_that_can_start_goes_ahead_of_one_that_cannot) {
  queues.queue_for("a").holder = some_lease();
  const auto s1 = join("s1", {"a", "b"});
  BOOST_TEST(!queues.try_start(*s1));
  const auto s2 = join("s2", {"b", "c"});
  BOOST_TEST(queues.try_start(*s2));
  BOOST_TEST((order("b") == line{s2.get(), s1.get()}));
  const auto s3 = join("s3", {"c", "d"});
  BOOST_TEST(!queues.try_start(*s3));
  // S2 leaves without the lock: S3 may go; S1 still waits for "a".
  queues.leave(*s2, std::vector<std::string>{"b", "c"}, true);
  BOOST_TEST((log == event_log{"s3 wakes"}));
  BOOST_TEST(!s1->started());
}

// Not starved: after set_overtakes_before_claim acquires went ahead of it, a set keeps later
// acquires of its resources behind it, until its claim runs out (its TTL); then it yields again.
BOOST_AUTO_TEST_CASE(a_set_overtaken_often_enough_claims_its_queues_for_a_while) {
  queues.queue_for("a").holder = some_lease();
  const auto set = join("set", {"a", "b"});
  BOOST_TEST(!queues.try_start(*set));
  for (unsigned i = 0; i < local_queues::set_overtakes_before_claim; ++i) {
    BOOST_TEST_CONTEXT("overtake " << i + 1) {
      const auto passer = join("passer", {"b"});
      BOOST_TEST_REQUIRE(queues.try_start(*passer));
      queues.leave(*passer, std::vector<std::string>{"b"}, true);
    }
  }
  BOOST_TEST((log == event_log{"set claims"}));
  const auto kept = join("kept", {"b"});
  BOOST_TEST(!queues.try_start(*kept), "a claiming set keeps later acquires behind it");
  BOOST_TEST(queues.waiter_goes_first(*queues.find("b")));
  queues.claim_expired(*set);
  BOOST_TEST((log == event_log{"set claims", "kept wakes"}));
}

// The set that leaves (its acquire ended) lets everyone it held back start; an acquire that leaves
// holding (it won) starts nobody.
BOOST_AUTO_TEST_CASE(leaving_starts_the_next_waiters_unless_the_leaver_holds) {
  const auto first = join("first", {"a"});
  BOOST_TEST(queues.try_start(*first));
  const auto second = join("second", {"a"});
  BOOST_TEST(!queues.try_start(*second));
  queues.leave(*first, std::vector<std::string>{"a"}, false);
  queues.queue_for("a").holder = some_lease();
  BOOST_TEST(log.empty());
  BOOST_TEST(first->queues().empty());
  queues.queue_for("a").holder = nullptr;
  queues.start_next_waiter(*queues.find("a"));
  BOOST_TEST((log == event_log{"second wakes"}));
}

// A lock's whole life in its queue, as an uncontended acquire and its release go through it: the
// acquire joins, starts and leaves as the holder; the release, with nobody waiting, announces
// itself, hands nothing on and starts the count of hand-offs again; once the holder is gone the
// queue is forgotten. With a waiter, the same release hands the lock on silently, and the waiter
// wakes.
BOOST_AUTO_TEST_CASE(an_uncontended_lock_passes_through_its_queue_and_is_forgotten) {
  const std::vector<std::string> keys{"orders:42"};
  queue_holder lease;
  const local_queues::holder_facts facts{
      .local_handoffs = 4, .longest_ttl = 10s, .contended = false, .resources = keys};
  for (const bool someone_waits : {false, true}) {
    BOOST_TEST_CONTEXT("someone waits: " << someone_waits) {
      const auto owner = join("owner", keys);
      BOOST_TEST_REQUIRE(queues.try_start(*owner));
      const auto queues_of_owner =
          std::vector<resource_queue*>(owner->queues().begin(), owner->queues().end());
      queues.hold_in(lease, queues_of_owner);
      queues.leave(*owner, keys, false);
      queues.find(keys.front())->holder = &lease;
      queues.find(keys.front())->handoffs_in_a_row = 2;
      BOOST_TEST(owner->queues().empty());
      const auto next = someone_waits ? join("next", keys) : nullptr;

      const auto how = queues.release_of(lease, facts);
      BOOST_TEST(how.channel == (someone_waits ? "" : "redlock:released"));
      BOOST_TEST(!how.next_waiter.competes);
      BOOST_TEST(queues.find(keys.front())->handoffs_in_a_row == (someone_waits ? 3u : 0u));
      queues.holder_gone(lease, keys, how.next_waiter);
      BOOST_TEST(lease.queue() == nullptr);
      BOOST_TEST((queues.find(keys.front()) == nullptr) == !someone_waits);
      if (someone_waits) {
        BOOST_TEST((log == event_log{"next wakes"}));
        queues.leave(*next, keys, true);
        BOOST_TEST(queues.find(keys.front()) == nullptr);
      }
      log.clear();
    }
  }
}

// Queues are found by name through the client's own hash of a name, which reads eight bytes at a
// time: names of every length around those steps, sharing a long prefix or differing in one byte
// only, each have a queue of their own, found again, and forgotten alone.
BOOST_AUTO_TEST_CASE(every_name_has_its_own_queue_whatever_its_length) {
  std::vector<std::string> names;
  for (std::size_t length = 0; length <= 41; ++length) {
    for (char last : {'a', 'b', '\0', '\xff'}) {
      std::string name(length, 'x');
      if (length > 0) name.back() = last;
      names.push_back(std::move(name));
    }
    if (length > 1) names.push_back(std::string(length - 1, 'x') + 'y' + std::string(1, 'x'));
  }
  for (int i = 0; i < 2000; ++i)
    names.push_back("redlock:orders:" + std::to_string(i));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());

  std::vector<resource_queue*> made;
  for (const auto& name : names)
    made.push_back(&queues.queue_for(name));
  for (std::size_t i = 0; i < names.size(); ++i) {
    BOOST_TEST_REQUIRE(queues.find(names[i]) == made[i], names[i]);
    BOOST_TEST_REQUIRE(&queues.queue_for(names[i]) == made[i], names[i]);
  }
  std::sort(made.begin(), made.end());
  BOOST_TEST((std::adjacent_find(made.begin(), made.end()) == made.end()));

  // Forgetting every other name leaves the rest where they were.
  for (std::size_t i = 0; i < names.size(); i += 2)
    queues.forget_if_idle(names[i]);
  for (std::size_t i = 0; i < names.size(); ++i)
    BOOST_TEST_REQUIRE((queues.find(names[i]) != nullptr) == (i % 2 == 1), names[i]);
}

BOOST_AUTO_TEST_SUITE_END()
