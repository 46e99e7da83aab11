// The acquire machine driven by hand: inputs with a time the test chooses, and the actions it asks
// for read back, with no server, no timer and no clock, and no node set: the machine's home is the
// test's own, whose nodes are three names that never fail.
#include "algo/hash_slot.hpp"
#include "lock/acquire_machine.hpp"
#include "lock/lease_state.hpp"
#include "lock/lock_home.hpp"
#include "lock/lock_rounds.hpp"
#include "lock/node_facts.hpp"
#include "lock/set_rounds.hpp"
#include "resp_values.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace redlock::detail {

// For Boost.Test's messages.
std::ostream& operator<<(std::ostream& out, acquire_action::kind what) {
  static constexpr const char* names[] = {
      "watch",        "send_round",        "arm_timer",
      "release",      "write_back_fence",  "late_grant_to_write_backs",
      "listen",       "stop_listening",    "check_subscription",
      "leave_queues", "start_next_waiter", "complete"};
  return out << names[static_cast<std::size_t>(what)];
}

namespace {

using namespace std::chrono_literals;
using kind = acquire_action::kind;
namespace reply = redlock::test::reply;
using boost::system::error_code;

const steady_clock::time_point start_time = steady_clock::time_point{} + 1h;

// Three nodes, as the machine knows them: named, never failing.
class played_nodes final : public node_facts {
 public:
  played_nodes() : node_facts(3) {}
  std::string address(std::size_t node) const override {
    return "127.0.0.1:700" + std::to_string(node);
  }
  error_code permanent_failure(std::size_t) const noexcept override { return {}; }
  void permanent_failures(std::span<error_code> into) const noexcept override {
    std::fill(into.begin(), into.end(), error_code{});
  }
  const std::string& last_error(std::size_t) const noexcept override { return none_; }
  std::string describe(const node_answers& answers, std::string_view yes, std::string_view no,
                       const std::vector<std::string>*, std::string_view) const override {
    std::string text;
    for (std::size_t node = 0; node < answers.size(); ++node) {
      const auto what = answers[node].what;
      if (!text.empty()) text += "; ";
      text += address(node) + " " +
              std::string(what == node_answer::kind::yes  ? yes
                          : what == node_answer::kind::no ? no
                                                          : "not awaited");
    }
    return text;
  }
  const std::string& duplicate_nodes() const noexcept override { return none_; }
  bool has_cluster_node() const noexcept override { return false; }

 private:
  std::string none_;
};

// The client of the acquires under test.
class played_home final : public lock_home {
 public:
  played_home(const boost::asio::any_io_executor& executor, client_options options)
      : lock_home(executor, std::move(options), 1) {}
  const node_facts& nodes_known() const noexcept override { return nodes_; }

 private:
  played_nodes nodes_;
};

// One acquire as the local queues see it: forwards their calls to the machine at the test's time.
class host final : public queued_acquire,
                   public announcement_facts,
                   public std::enable_shared_from_this<host> {
 public:
  // An acquire of the lock `resource`.
  host(const std::shared_ptr<lock_home>& home, std::string resource, const lock_options& options,
       bool single_round)
      : host(home, lease_state::make(home, std::move(resource), options), options, single_round) {}
  // An acquire by `strategy`, whose lease starts as `resource`'s.
  host(const std::shared_ptr<lock_home>& home, std::unique_ptr<round_strategy> strategy,
       std::string resource, const lock_options& options, bool single_round)
      : machine(*home, std::move(strategy), lease_state::make(home, std::move(resource), options),
                options, single_round, *this, *this) {}

  bool announcements_cover(std::string_view) const override { return covered; }

  void wake() override { machine.wake(now); }
  void compete(steady_clock::time_point key_gone_by) override { machine.compete(key_gone_by, now); }
  void announced(std::size_t node, std::size_t slot) override {
    machine.announced(node, slot, now);
  }
  void permit_released_here(std::size_t slot) override { machine.permit_released_here(slot, now); }
  void subscription_changed(bool subscribed) override {
    machine.subscription_changed(subscribed, subscribed, now);
  }
  void claims_until(steady_clock::time_point until) override { machine.claims_until(until); }

  void start() { machine.start(now, shared_from_this()); }

  // Every action asked since the last call, oldest first; what the release and late-grant
  // actions among them refer to goes to `releases` and `late_grants` (the machine forgets it once
  // every action is taken).
  std::vector<acquire_action> actions() {
    std::vector<acquire_action> out;
    releases.clear();
    late_grants.clear();
    while (auto action = machine.next_action()) {
      if (action->what == kind::release) releases.push_back(machine.release_of(*action));
      if (action->what == kind::late_grant_to_write_backs)
        late_grants.push_back(machine.late_grant_of(*action));
      out.push_back(*action);
    }
    return out;
  }

  acquire_machine machine;
  steady_clock::time_point now = start_time;
  bool covered = false;  // every node subscribed
  std::vector<acquire_release> releases;
  std::vector<late_grant> late_grants;

 private:
  // The lease by reference: the strategy is made from it in the same call.
  host(const std::shared_ptr<lock_home>& home, const std::shared_ptr<lease_state>& lease,
       const lock_options& options, bool single_round)
      : machine(*home, std::make_unique<lock_rounds>(lease->resource()), lease, options,
                single_round, *this, *this) {}
};

// Each of the three nodes answers the current round with `reply`, at the host's time.
void every_node_answers(host& op, const resp::value& reply) {
  for (std::size_t node = 0; node < 3; ++node)
    op.machine.answer(node, {}, reply, op.now);
}

std::vector<kind> kinds(const std::vector<acquire_action>& actions) {
  std::vector<kind> out;
  for (const auto& action : actions)
    out.push_back(action.what);
  return out;
}

const acquire_action* find(const std::vector<acquire_action>& actions, kind what) {
  const auto it = std::find_if(actions.begin(), actions.end(),
                               [&](const acquire_action& a) { return a.what == what; });
  return it == actions.end() ? nullptr : &*it;
}

// The latest timer the actions ask for (the last arm_timer wins).
std::optional<steady_clock::time_point> timer_of(const std::vector<acquire_action>& actions) {
  std::optional<steady_clock::time_point> at;
  for (const auto& action : actions)
    if (action.what == kind::arm_timer) at = action.at;
  return at;
}

struct fixture {
  explicit fixture(std::string channel = "redlock:released") {
    client_options options;
    options.release_channel = std::move(channel);
    space = std::make_shared<played_home>(io.get_executor(), options);
  }

  // The hosts still in a queue at the end leave it: through their leases they would keep the
  // home, and with it the queues that hold them, alive (a driver leaves when it ends).
  ~fixture() {
    for (const auto& weak : hosts) {
      if (const auto op = weak.lock(); op && !op->queues().empty())
        space->queues().leave(*op, op->machine.strategy().queue_keys(), false);
    }
  }

  std::shared_ptr<host> track(std::shared_ptr<host> op) {
    hosts.push_back(op);
    return op;
  }

  // An acquire of `resource` that every node granted: its lease holds it locally.
  std::shared_ptr<host> held(const std::string& resource);

  std::shared_ptr<host> acquire(const std::string& resource, lock_options options = {},
                                bool single_round = false) {
    if (options.ttl == std::chrono::milliseconds{0}) options.ttl = 10s;
    return track(std::make_shared<host>(space, resource, options, single_round));
  }

  boost::asio::io_context io;  // never run: nothing is sent
  std::shared_ptr<played_home> space;
  std::vector<std::weak_ptr<host>> hosts;
};

std::shared_ptr<host> fixture::held(const std::string& resource) {
  auto op = acquire(resource);
  op->start();
  op->actions();
  every_node_answers(*op, reply::simple("OK"));
  op->actions();
  return op;
}

lock_options waiting(std::chrono::milliseconds wait = 60s) {
  lock_options options;
  options.ttl = 10s;
  options.wait = wait;
  return options;
}

BOOST_FIXTURE_TEST_SUITE(acquire_machine_tests, fixture)

BOOST_AUTO_TEST_CASE(an_uncontended_acquire_is_one_round_and_one_completion) {
  auto op = acquire("a");
  op->start();
  auto actions = op->actions();
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::watch, kind::send_round}));
  BOOST_TEST(actions[1].index == 1u);
  BOOST_TEST(op->machine.round_request().key == "a");

  op->now += 2ms;
  op->machine.answer(0, {}, reply::simple("OK"), op->now);
  BOOST_TEST(op->actions().empty());  // one grant is no quorum
  op->machine.answer(2, {}, reply::simple("OK"), op->now);
  actions = op->actions();
  // No timer was armed, so none is disarmed.
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::complete}));
  BOOST_TEST(!actions.back().code);
  const auto& lease = *op->machine.lease();
  BOOST_TEST((lease.current() == lease_state::phase::held));
  BOOST_TEST(lease.granted_nodes() == 2u);
  // validity = ttl - elapsed - drift (ttl * 0.01 + 2 ms), from the round's start.
  BOOST_TEST((lease.validity().valid_until() == start_time + 10s - 100ms - 2ms));

  // A grant after the decision counts for the lease and asks for nothing.
  op->machine.answer(1, {}, reply::simple("OK"), op->now);
  BOOST_TEST(op->actions().empty());
  BOOST_TEST(lease.granted_nodes() == 3u);
}

BOOST_AUTO_TEST_CASE(a_refused_try_releases_a_late_grant_only_once_it_answers) {
  auto op = acquire("a", {}, true);
  op->start();
  op->actions();
  op->machine.answer(0, {}, reply::nil(), op->now);
  op->machine.answer(1, {}, reply::nil(), op->now);
  auto actions = op->actions();
  // Node 2 has not answered: its SET may still be granted, so the try's end releases it there.
  BOOST_TEST(
      (kinds(actions) == std::vector<kind>{kind::release, kind::leave_queues, kind::complete}));
  BOOST_REQUIRE(op->releases.size() == 1u);
  BOOST_TEST((op->releases[0].targets == std::vector<bool>{false, false, true}));
  BOOST_TEST(op->releases[0].token == op->machine.lease()->token());
  BOOST_TEST((actions.back().code == error::contended));
  // Its grant, late, asks for nothing more: the release is on its way behind the SET.
  op->machine.answer(2, {}, reply::simple("OK"), op->now);
  BOOST_TEST(op->actions().empty());
}

BOOST_AUTO_TEST_CASE(a_late_grant_of_a_lost_round_is_released_when_it_comes) {
  auto op = acquire("a", waiting());
  op->start();
  op->actions();
  op->machine.answer(0, {}, reply::nil(), op->now);
  op->machine.answer(1, {}, reply::nil(), op->now);
  auto actions = op->actions();
  BOOST_TEST(!find(actions, kind::release));  // nothing granted yet: nothing to release
  BOOST_TEST(find(actions, kind::listen));
  BOOST_TEST(find(actions, kind::check_subscription));
  op->machine.answer(2, {}, reply::simple("OK"), op->now);
  actions = op->actions();
  BOOST_REQUIRE(find(actions, kind::release));
  BOOST_REQUIRE(op->releases.size() == 1u);
  BOOST_TEST((op->releases[0].targets == std::vector<bool>{false, false, true}));
  // A refusal that comes late would have asked for nothing.
}

// The lost wake-up of a waiter: its second round waits for the subscription, so that a release
// between the refusal and the subscription cannot go unheard.
BOOST_AUTO_TEST_CASE(the_second_round_waits_for_the_subscription) {
  auto op = acquire("a", waiting());
  op->start();
  op->actions();
  every_node_answers(*op, reply::nil());
  auto actions = op->actions();
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::listen, kind::check_subscription}));
  BOOST_TEST(op->machine.listened() == "a");
  // Not settled yet: only a backstop timer (connect_timeout) and no round.
  op->machine.subscription_state(false, op->now);
  actions = op->actions();
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::arm_timer}));
  BOOST_TEST((*actions[0].at == op->now + space->options().connect_timeout));
  // Subscribed: the next round follows within a round trip's jitter.
  op->now += 3ms;
  op->machine.subscription_changed(true, true, op->now);
  actions = op->actions();
  BOOST_REQUIRE(timer_of(actions).has_value());
  BOOST_TEST((*timer_of(actions) <= op->now + 20ms));
  op->now = *timer_of(actions);
  op->machine.timer(op->now);
  actions = op->actions();
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::send_round}));
  BOOST_TEST(actions[0].index == 2u);
  // The second round asks for the holder's PTTL with its refusal.
  BOOST_TEST((op->machine.round_request().form == set_form::asking_ttl));
}

// Drives `op` to its second round, sent, with every node subscribed.
void to_second_round(host& op) {
  op.start();
  op.actions();
  every_node_answers(op, reply::nil());
  op.actions();
  op.machine.subscription_state(true, op.now);
  const auto at = timer_of(op.actions());
  op.now = *at;
  op.machine.timer(op.now);
  op.actions();
}

BOOST_AUTO_TEST_CASE(a_release_heard_during_the_round_wakes_the_waiter_after_it) {
  auto op = acquire("a", waiting());
  to_second_round(*op);
  op->covered = true;  // a release would be heard: no backoff bounds the sleep
  // The holder releases everywhere while our SETs are in flight; the announcements come first.
  for (std::size_t node = 0; node < 3; ++node)
    op->machine.announced(node, 0, op->now);
  BOOST_TEST(op->actions().empty());  // kept until the round is decided
  every_node_answers(*op, reply::integer(9000));
  const auto actions = op->actions();
  // Without the news it would sleep until the holder's key expires (9 s); with it, the next round
  // follows after a collision backoff of a few round trips.
  BOOST_REQUIRE(timer_of(actions).has_value());
  BOOST_TEST((*timer_of(actions) < op->now + 1s));
}

// Proves waiting.md, "When a waiter tries again", row "a release announced while its own round is
// in flight": the delay before the next round is drawn from a window of one round trip for the
// first such wake-up, doubled for each later one in a row up to 32 round trips, and a round lost
// without such news starts the window over at one round trip. Every round here takes 1 ms, which
// is then the round-trip unit exactly; the retry ceiling (50 ms and growing) is above every
// window. Each cycle is seven rounds that hear the holder's release while in flight, then one that
// hears nothing (and sleeps until an announcement wakes it). In every cycle each delay lies
// within its window (1, 2, 4, 8, 16, 32, 32 ms), and over the cycles the largest delay of each
// position nearly fills it, so no window is smaller either. Had the quiet round not started the
// window over, every cycle's first wake-up after the first cycle would draw from 32 ms.
BOOST_AUTO_TEST_CASE(the_collision_window_doubles_and_a_round_lost_without_news_starts_it_over) {
  constexpr int cycles = 300;
  const std::vector<steady_clock::duration> windows = {1ms, 2ms, 4ms, 8ms, 16ms, 32ms, 32ms};
  const auto round_trip = 1ms;
  auto op = acquire("a", waiting(24h));
  op->covered = true;  // a release would be heard: the quiet round sleeps until the holder's TTL

  // Ends the round in flight, lost, `round_trip` after it started: every node refuses with the
  // holder's PTTL (9 s). With `news`, the holder's release on nodes 0 and 1 (a quorum) is
  // announced while the round is in flight. Returns when the next round is due.
  const auto lose_round = [&](bool news) {
    op->now += round_trip;
    if (news) {
      op->machine.announced(0, 0, op->now);
      op->machine.announced(1, 0, op->now);
    }
    every_node_answers(*op, reply::integer(9000));
    const auto at = timer_of(op->actions());
    BOOST_REQUIRE(at.has_value());
    return *at;
  };
  const auto next_round_at = [&](steady_clock::time_point at) {
    op->now = at;
    op->machine.timer(op->now);
    BOOST_REQUIRE(find(op->actions(), kind::send_round));
  };

  // The first round (a plain SET, refused), the subscription, then the rounds that ask for PTTLs.
  op->start();
  op->actions();
  op->now += round_trip;
  every_node_answers(*op, reply::nil());
  op->actions();
  op->machine.subscription_state(true, op->now);
  const auto subscribed = timer_of(op->actions());
  BOOST_REQUIRE(subscribed.has_value());
  next_round_at(*subscribed);

  std::vector<steady_clock::duration> largest(windows.size(), 0ms);
  for (int cycle = 0; cycle < cycles; ++cycle) {
    for (std::size_t wake = 0; wake < windows.size(); ++wake) {
      const auto at = lose_round(true);
      const auto delay = at - op->now;
      BOOST_TEST_CONTEXT("cycle " << cycle << ", wake-up " << wake << " in a row") {
        BOOST_TEST((delay <= windows[wake]));
      }
      largest[wake] = std::max(largest[wake], delay);
      next_round_at(at);
    }
    // Lost without news: no collision backoff, asleep until the holder's key can have expired.
    const auto asleep_until = lose_round(false);
    BOOST_TEST((asleep_until > op->now + 9s));
    // The holder releases while it sleeps: woken after the wake jitter (a round trip at most).
    op->machine.announced(0, 0, op->now);
    op->machine.announced(1, 0, op->now);
    const auto woken = timer_of(op->actions());
    BOOST_REQUIRE(woken.has_value());
    BOOST_TEST((*woken <= op->now + round_trip));
    next_round_at(*woken);
  }
  for (std::size_t wake = 0; wake < windows.size(); ++wake) {
    BOOST_TEST_CONTEXT("wake-up " << wake << " in a row") {
      BOOST_TEST((largest[wake] >= windows[wake] * 9 / 10));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_sleeping_waiter_wakes_on_a_release_and_not_before) {
  auto op = acquire("a", waiting());
  to_second_round(*op);
  op->covered = true;
  every_node_answers(*op, reply::integer(9000));
  auto actions = op->actions();
  BOOST_REQUIRE(timer_of(actions).has_value());
  // A release would be heard: asleep until the holder's key can have expired.
  BOOST_TEST((*timer_of(actions) > op->now + 8s));
  BOOST_TEST((*timer_of(actions) <= op->now + 10s));
  // One node's release frees no quorum: still asleep.
  op->machine.announced(0, 0, op->now);
  BOOST_TEST(op->actions().empty());
  // A second one may: the next round is due within a round trip's jitter.
  op->machine.announced(1, 0, op->now);
  actions = op->actions();
  BOOST_REQUIRE(timer_of(actions).has_value());
  BOOST_TEST((*timer_of(actions) <= op->now + 20ms));
  // Further copies change nothing.
  op->machine.announced(2, 0, op->now);
  BOOST_TEST(op->actions().empty());
}

BOOST_AUTO_TEST_CASE(a_waiter_that_might_miss_a_release_looks_again_after_its_backoff) {
  auto op = acquire("a", waiting());
  to_second_round(*op);
  every_node_answers(*op, reply::integer(9000));
  const auto at = timer_of(op->actions());
  BOOST_REQUIRE(at.has_value());
  // Full jitter: anywhere from now to the backoff's ceiling, never the holder's expiry (9 s).
  BOOST_TEST((*at >= op->now));
  BOOST_TEST((*at <= op->now + waiting().retry.max_delay));
}

BOOST_AUTO_TEST_CASE(a_waiter_ends_at_its_deadline) {
  auto op = acquire("a", waiting(100ms));
  to_second_round(*op);
  every_node_answers(*op, reply::integer(9000));
  const auto at = timer_of(op->actions());
  BOOST_REQUIRE(at.has_value());
  BOOST_TEST((*at <= start_time + 100ms));
  op->now = start_time + 100ms;
  op->machine.timer(op->now);
  const auto actions = op->actions();
  // The timer that fired is armed no more: nothing to disarm.
  BOOST_TEST((kinds(actions) ==
              std::vector<kind>{kind::stop_listening, kind::leave_queues, kind::complete}));
  BOOST_TEST((actions.back().code == error::wait_timeout));
}

BOOST_AUTO_TEST_CASE(cancelled_in_a_round_it_releases_what_it_may_have_set) {
  auto op = acquire("a", waiting());
  op->start();
  op->actions();
  op->machine.answer(0, {}, reply::simple("OK"), op->now);
  // A cancellation of type total asks an operation to stop only if nothing happened yet.
  op->machine.cancel(boost::asio::cancellation_type::total);
  BOOST_TEST(op->actions().empty());
  op->machine.cancel(boost::asio::cancellation_type::terminal);
  const auto actions = op->actions();
  BOOST_REQUIRE(find(actions, kind::release));
  BOOST_REQUIRE(!op->releases.empty());
  BOOST_TEST((op->releases[0].targets == std::vector<bool>{true, true, true}));
  BOOST_TEST(actions.back().what == kind::complete);
  BOOST_TEST((actions.back().code == boost::asio::error::operation_aborted));
  // Answers after the end ask for nothing.
  op->machine.answer(1, {}, reply::simple("OK"), op->now);
  BOOST_TEST(op->actions().empty());
}

// Cancels `op`, which waits after a refused round with nothing of its own standing: it stops
// listening, sends and releases nothing, and completes with operation_aborted.
void cancel_while_waiting(host& op) {
  op.machine.cancel(boost::asio::cancellation_type::terminal);
  const auto actions = op.actions();
  BOOST_TEST(find(actions, kind::stop_listening));
  BOOST_TEST(!find(actions, kind::send_round));
  BOOST_TEST(!find(actions, kind::release));
  BOOST_REQUIRE(!actions.empty());
  BOOST_TEST(actions.back().what == kind::complete);
  BOOST_TEST((actions.back().code == boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(cancelled_while_subscribing_it_stops_listening_and_sends_nothing) {
  auto op = acquire("a", waiting());
  op->start();
  op->actions();
  every_node_answers(*op, reply::nil());  // refused everywhere: nothing of ours stands
  op->actions();
  op->machine.subscription_state(false, op->now);  // not settled: waiting for the subscription
  op->actions();
  cancel_while_waiting(*op);
  // The subscription that comes afterwards, and the timer, ask for nothing.
  op->machine.subscription_changed(true, true, op->now);
  op->machine.timer(op->now + 1s);
  BOOST_TEST(op->actions().empty());
}

BOOST_AUTO_TEST_CASE(cancelled_while_sleeping_it_stops_listening_and_sends_nothing) {
  auto op = acquire("a", waiting());
  to_second_round(*op);
  every_node_answers(*op, reply::integer(9000));
  BOOST_REQUIRE(timer_of(op->actions()).has_value());  // asleep
  cancel_while_waiting(*op);
  // A release heard afterwards, and the wake-up it would have been, ask for nothing.
  op->machine.announced(0, 0, op->now);
  op->machine.announced(1, 0, op->now);
  op->machine.timer(op->now + 9s);
  BOOST_TEST(op->actions().empty());
}

BOOST_AUTO_TEST_CASE(cancelled_while_fencing_it_releases_the_held_round) {
  lock_options options = waiting();
  options.fencing = true;
  auto op = acquire("a", options);
  op->start();
  op->actions();
  op->machine.answer(0, {}, reply::counters({5}), op->now);
  op->machine.answer(1, {}, reply::counters({3}), op->now);
  BOOST_REQUIRE(find(op->actions(), kind::write_back_fence));
  op->machine.cancel(boost::asio::cancellation_type::terminal);
  const auto actions = op->actions();
  // The round's keys may stand where it was granted, and on the node still to answer.
  BOOST_REQUIRE(find(actions, kind::release));
  BOOST_REQUIRE(!op->releases.empty());
  BOOST_TEST(op->releases[0].key == "a");
  BOOST_REQUIRE(!actions.empty());
  BOOST_TEST(actions.back().what == kind::complete);
  BOOST_TEST((actions.back().code == boost::asio::error::operation_aborted));
  BOOST_TEST((op->machine.lease()->current() == lease_state::phase::never_held));
  // The write-back's outcome that comes afterwards asks for nothing.
  op->machine.fence_written_back(op->machine.rounds(), 0, true, {}, op->now);
  BOOST_TEST(op->actions().empty());
}

BOOST_AUTO_TEST_CASE(a_release_announced_before_the_second_round_leaves_it_as_planned) {
  auto op = acquire("a", waiting());
  op->start();
  op->actions();
  every_node_answers(*op, reply::nil());
  op->actions();  // listen, check the subscription
  // The holder releases before our subscription is settled: its effect is what the second round
  // sees, and the announcements that came through change nothing.
  for (std::size_t node = 0; node < 3; ++node)
    op->machine.announced(node, 0, op->now);
  BOOST_TEST(!find(op->actions(), kind::send_round));
  op->machine.subscription_state(true, op->now);
  auto actions = op->actions();
  BOOST_REQUIRE(timer_of(actions).has_value());
  BOOST_TEST((*timer_of(actions) <= op->now + 20ms));
  op->now = *timer_of(actions);
  op->machine.timer(op->now);
  actions = op->actions();
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::send_round}));
  every_node_answers(*op, reply::simple("OK"));
  actions = op->actions();
  BOOST_REQUIRE(!actions.empty());
  BOOST_TEST(actions.back().what == kind::complete);
  BOOST_TEST(!actions.back().code);
}

BOOST_AUTO_TEST_CASE(cancelled_while_queued_it_leaves_the_queue_and_sends_nothing) {
  auto first = acquire("a");
  first->start();
  first->actions();
  auto second = acquire("a", waiting());
  second->start();
  auto actions = second->actions();
  // Behind a local acquire: nothing sent, subscribed for a hand-off limit, the deadline armed.
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::watch, kind::listen, kind::arm_timer}));
  second->machine.cancel(boost::asio::cancellation_type::terminal);
  actions = second->actions();
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::arm_timer, kind::stop_listening,
                                                  kind::leave_queues, kind::complete}));
  BOOST_TEST((actions.back().code == boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(a_queued_acquire_starts_when_the_local_holder_hands_over) {
  auto first = held("a");
  auto second = acquire("a", waiting());
  second->start();
  second->actions();
  // The holder's release hands the resource on: the waiter's SET follows it at once.
  auto& lease = *first->machine.lease();
  space->queues().holder_gone(lease.local_hold, lease.queue_names(), {});
  const auto actions = second->actions();
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::send_round}));
}

BOOST_AUTO_TEST_CASE(a_set_waits_in_every_queue_and_goes_once_all_are_free) {
  auto holder = held("b");

  auto set = track(std::make_shared<host>(
      space, std::make_unique<set_rounds>(std::vector<std::string>{"a", "b"}), "a", waiting(),
      false));
  set->machine.lease()->hold_set({"a", "b"});
  set->start();
  auto actions = set->actions();
  BOOST_TEST(!find(actions, kind::send_round));  // "b" is held here
  // An acquire of "a" alone is not kept waiting by the set that cannot start.
  auto single = acquire("a", waiting());
  single->start();
  BOOST_TEST(find(single->actions(), kind::send_round));
  every_node_answers(*single, reply::simple("OK"));
  single->actions();
  // "b" released: the set still waits for "a".
  auto& b = *holder->machine.lease();
  space->queues().holder_gone(b.local_hold, b.queue_names(), {});
  BOOST_TEST(!find(set->actions(), kind::send_round));
  // "a" released: both free, the set goes.
  auto& a = *single->machine.lease();
  space->queues().holder_gone(a.local_hold, a.queue_names(), {});
  actions = set->actions();
  BOOST_REQUIRE(find(actions, kind::send_round));
  BOOST_TEST((set->machine.round_request().form == set_form::asking_ttl));
}

BOOST_AUTO_TEST_CASE(a_fenced_round_is_held_once_its_token_is_written_back) {
  lock_options options = waiting();
  options.fencing = true;
  auto op = acquire("a", options);
  op->start();
  op->actions();
  op->machine.answer(0, {}, reply::counters({5}), op->now);
  op->machine.answer(1, {}, reply::counters({3}), op->now);
  auto actions = op->actions();
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::write_back_fence}));
  const auto& plan = op->machine.fence_plan();
  BOOST_REQUIRE(plan.size() == 1u);
  BOOST_TEST(plan[0].fence == 5u);
  BOOST_TEST((plan[0].counters[0] == std::optional<std::uint64_t>(5)));
  BOOST_TEST((plan[0].counters[1] == std::optional<std::uint64_t>(3)));
  BOOST_TEST(!plan[0].counters[2].has_value());
  BOOST_TEST((op->machine.fence_pending() == std::vector<bool>{false, false, true}));
  BOOST_TEST((op->machine.lease()->current() == lease_state::phase::never_held));
  // The third grant comes during the write-back: it goes to the write-back with its counter.
  op->machine.answer(2, {}, reply::counters({4}), op->now);
  actions = op->actions();
  BOOST_REQUIRE(find(actions, kind::late_grant_to_write_backs));
  BOOST_REQUIRE(op->late_grants.size() == 1u);
  BOOST_TEST(op->late_grants[0].node == 2u);
  BOOST_TEST((op->late_grants[0].counters == std::vector<std::optional<std::uint64_t>>{4}));
  // An outcome of another round changes nothing.
  op->machine.fence_written_back(7, 0, true, {}, op->now);
  BOOST_TEST(op->actions().empty());
  op->machine.fence_written_back(op->machine.rounds(), 0, true, {}, op->now);
  actions = op->actions();
  BOOST_TEST(actions.back().what == kind::complete);
  BOOST_TEST(!actions.back().code);
  BOOST_TEST((op->machine.lease()->fencing_token() == std::optional<std::uint64_t>(5)));
}

BOOST_AUTO_TEST_CASE(an_unconfirmed_write_back_releases_the_round_and_waits) {
  lock_options options = waiting();
  options.fencing = true;
  auto op = acquire("a", options);
  op->start();
  op->actions();
  for (std::size_t node = 0; node < 3; ++node)  // counters 1, 2, 3
    op->machine.answer(node, {}, reply::counters({node + 1}), op->now);
  op->actions();
  node_answers answers(3);
  op->machine.fence_written_back(op->machine.rounds(), 0, false, answers, op->now);
  const auto actions = op->actions();
  BOOST_REQUIRE(find(actions, kind::release));
  BOOST_REQUIRE(!op->releases.empty());
  BOOST_TEST((op->releases[0].targets == std::vector<bool>{true, true, true}));
  BOOST_TEST(!find(actions, kind::complete));
  BOOST_TEST(timer_of(actions).has_value());  // asleep until the next round
  BOOST_TEST(op->machine.lease()->diagnostics().find("fencing write-back") != std::string::npos);
}

// A try looks at its queues by making those that do not exist yet: kept out by a local holder of
// one resource, a set's try leaves none of the others behind, and takes nothing from the holder's.
BOOST_AUTO_TEST_CASE(a_try_kept_out_here_leaves_no_queue_it_made) {
  auto holder = held("b");
  lock_options options;
  options.ttl = 10s;
  auto set = track(std::make_shared<host>(
      space, std::make_unique<set_rounds>(std::vector<std::string>{"a", "b", "c"}), "a", options,
      true));
  set->machine.lease()->hold_set({"a", "b", "c"});
  set->start();
  const auto actions = set->actions();
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::complete}));
  BOOST_TEST((actions[0].code == error::contended));
  BOOST_TEST(space->queues().find("a") == nullptr);  // made, and forgotten again
  BOOST_TEST(space->queues().find("c") == nullptr);  // never made: "b" kept the try out first
  const resource_queue* b = space->queues().find("b");
  BOOST_REQUIRE(b != nullptr);
  BOOST_TEST(b->holder == &holder->machine.lease()->local_hold);
  BOOST_TEST(b->waiters.empty());

  // A try of a free resource joins the queue it made, and holds there once granted.
  auto single = acquire("d", options, true);
  single->start();
  BOOST_TEST(find(single->actions(), kind::send_round));
  const resource_queue* d = space->queues().find("d");
  BOOST_REQUIRE(d != nullptr);
  BOOST_TEST(d->waiters.size() == 1u);
  every_node_answers(*single, reply::simple("OK"));
  single->actions();
  BOOST_TEST(d->holder == &single->machine.lease()->local_hold);
  BOOST_TEST(d->waiters.empty());
}

BOOST_AUTO_TEST_CASE(bad_options_complete_at_once_without_touching_the_queues) {
  lock_options options;
  options.ttl = 0ms;
  auto op = track(std::make_shared<host>(space, "a", options, false));
  op->start();
  const auto actions = op->actions();
  BOOST_TEST((kinds(actions) == std::vector<kind>{kind::complete}));
  BOOST_TEST((actions[0].code == error::invalid_argument));
  BOOST_TEST(space->queues().find("a") == nullptr);
}

// A lease hashes its key for cluster nodes once: its acquire's rounds, renewals and release all
// route by that slot, so it must follow the key when a round sets another one.
BOOST_AUTO_TEST_CASE(a_lease_keeps_its_keys_hash_slot_until_its_key_changes) {
  const auto lease = lease_state::make(space, "orders:{42}:lock", lock_options{});
  BOOST_TEST(!lease->held().slot.has_value());  // not hashed before a cluster node asks
  const auto slot = redlock::detail::hash_slot("orders:{42}:lock");
  BOOST_TEST(lease->resource_slot() == slot);
  BOOST_REQUIRE(lease->held().slot.has_value());
  BOOST_TEST(*lease->held().slot == slot);
  lease->sets_key("orders:{42}:lock");  // the same key: the slot stays
  BOOST_TEST(lease->held().slot.has_value());
  lease->sets_key("invoices:7");
  BOOST_TEST(!lease->held().slot.has_value());
  BOOST_TEST(lease->resource_slot() == redlock::detail::hash_slot("invoices:7"));
  BOOST_TEST(lease->resource_slot() != slot);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace redlock::detail
