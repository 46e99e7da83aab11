// Waiters in other clients (other processes, as far as the servers can tell): releases announced
// on client_options::release_channel wake them, the holder's TTL bounds their sleep when nothing is
// announced, subscriptions come and go with the waiters, and a busy client hands the lock to its
// own waiters only a bounded number of times in a row. Every waiter here has a backoff of seconds,
// so acquiring within a fraction of that shows it was woken, not polling.

#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "lock/scripts.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/client_options.hpp"
#include "support/counting_executor.hpp"
#include "support/fake_server.hpp"
#include "support/fleet_commands.hpp"
#include "support/holder_process.hpp"
#include "support/inspector.hpp"
#include "support/printing.hpp"
#include "support/reach.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using redlock::test::renewal;

const std::string channel = "redlock:released";

// A waiter that would sleep for `backoff` between rounds if nothing woke it.
redlock::lock_options patient_lock(std::chrono::milliseconds ttl = 10s,
                                   std::chrono::milliseconds backoff = 5s) {
  auto options = lock_for(ttl);
  options.retry = {backoff, backoff, 1.0};
  options.wait = 4 * backoff;
  return options;
}

// Subscribers of the release channel on node `i` (PUBSUB NUMSUB).
long long subscribers(redis_fleet& fleet, std::size_t i) {
  sync_client c(fleet[i].port());
  const auto reply = c.command({"PUBSUB", "NUMSUB", channel});
  return reply.elements.size() == 2 ? reply.elements[1].integer : -1;
}

bool subscribed_everywhere(redis_fleet& fleet, long long expected) {
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    if (subscribers(fleet, i) != expected) return false;
  }
  return true;
}

using redlock::test::on_every_node;

// Acquires `resource` on `locks` in the background; `took` gets the milliseconds from now until
// the lease was granted, and `lease` the lease.
struct background_acquire {
  std::optional<long long> took;
  redlock::error_code ec;
  redlock::lease lease;
  asio::cancellation_signal cancel;
  bool done = false;

  void start(redlock::client& locks, const std::string& resource,
             const redlock::lock_options& options) {
    const auto started = steady_clock::now();
    locks.async_acquire(
        resource, options,
        asio::bind_cancellation_slot(cancel.slot(),
                                     [this, started](redlock::error_code e, redlock::lease l) {
                                       ec = e;
                                       lease = std::move(l);
                                       took = ms_since(started);
                                       done = true;
                                     }));
  }
};

// Holds "r" through `holder` on every node, then has `waiter` wait for it until it is subscribed
// on every node. The holder's acquire completes at a quorum of grants: the waiter starts only once
// the last SET has landed too, or its own could overtake it there, and a node restarted later
// would leave the holder a minority.
asio::awaitable<redlock::lease> hold_while_waited_for(redis_fleet& fleet, redlock::client& holder,
                                                      redlock::client& waiter,
                                                      background_acquire& b,
                                                      std::chrono::milliseconds backoff = 5s) {
  auto [ec, held] = co_await holder.async_acquire("r", lock_for(10s), tuple_awaitable);
  BOOST_TEST_REQUIRE(!ec, held.diagnostics());
  redlock::test::inspector servers(fleet);
  BOOST_TEST_REQUIRE(
      co_await eventually([&] { return servers.holding("r", held.token()) == fleet.size(); }, 3s));
  b.start(waiter, "r", patient_lock(10s, backoff));
  BOOST_TEST_REQUIRE(co_await eventually([&] { return subscribed_everywhere(fleet, 1); }, 3s, 20ms),
                     "the waiting client subscribes on every node");
  co_return std::move(held);
}

// Releases `held` and checks that the sleeping waiter `b` got the lock within `within` (a few
// round trips and the reading of whatever the announcement queues behind), well before its
// backoff would have ended. Then releases the waiter's lease.
asio::awaitable<void> release_and_check_prompt_wake(redlock::lease& held, background_acquire& b,
                                                    std::chrono::milliseconds within = 1000ms) {
  co_await sleep_for(300ms);  // well into its sleep
  BOOST_TEST_REQUIRE(!b.done, "the waiter ended before the release, "
                                  << b.took.value_or(-1) << " ms after it started: "
                                  << b.ec.message() << ": " << b.lease.diagnostics());
  const auto released = steady_clock::now();
  co_await held.async_release(tuple_awaitable);
  BOOST_TEST(co_await eventually([&] { return b.done; }, within + 3s));
  BOOST_TEST_REQUIRE(!b.ec, b.ec.message() << ": " << b.lease.diagnostics());
  BOOST_TEST(ms_since(released) < within.count(), "acquired " << ms_since(released) << " ms after");
  co_await b.lease.async_release(tuple_awaitable);
}

// The announcements `listener`, a plain connection subscribed to the release channel, received
// since the last call: the resources named, oldest first. In subscribed mode PING answers
// ["pong", ""] behind every message published before it.
std::vector<std::string> announcements_received(sync_client& listener) {
  std::vector<std::string> resources;
  auto reply = listener.command({"PING"});
  while (reply.elements.size() == 3 && reply.elements[0].text == "message") {
    BOOST_TEST(reply.elements[1].text == channel);
    resources.push_back(reply.elements[2].text);
    reply = listener.next_reply();
  }
  BOOST_TEST((!reply.elements.empty() && reply.elements[0].text == "pong"));
  return resources;
}

// Calls of EVALSHA the server at `port` has run so far.
long long evalsha_calls(std::uint16_t port) {
  return redlock::test::info_counter(port, "commandstats", "cmdstat_evalsha:calls=");
}

// What holds and what waits in mid_round_release: a lock, a fenced lock, or the one permit of a
// semaphore.
enum class shape { lock, fenced_lock, semaphore };

std::ostream& operator<<(std::ostream& out, shape s) {
  return out << (s == shape::lock ? "lock" : s == shape::fenced_lock ? "fenced lock" : "semaphore");
}

asio::awaitable<std::tuple<redlock::error_code, redlock::lease>> acquire_shape(
    redlock::client& locks, shape s, redlock::lock_options options) {
  options.fencing = s == shape::fenced_lock;
  if (s == shape::semaphore) {
    redlock::semaphore permits(locks, "r", 1, options);
    co_return co_await permits.async_acquire(tuple_awaitable);
  }
  co_return co_await locks.async_acquire("r", options, tuple_awaitable);
}

// The interleaving of mid_round_release: the waiter's SETs run on every node and are refused,
// the holder's release (DEL, PUBLISH) runs right after them, and its announcement reaches the
// waiter before the refusals do. Each node sits behind a proxy that delays only the waiter's
// command connection (its first connection to the node), not its subscription (its second), by
// `delay`. The waiter sleeps until the holder's TTL (20 s) unless something wakes it; a forged
// announcement makes it start the round. Returns how long after the release the waiter acquired.
asio::awaitable<long long> release_during_the_waiters_round(std::size_t nodes, shape s) {
  const auto delay = 400ms;
  redis_fleet fleet(nodes);
  std::vector<std::unique_ptr<redlock::test::chaos_proxy>> proxies;
  std::vector<redlock::node_config> through_proxies;
  for (std::size_t i = 0; i < nodes; ++i) {
    proxies.push_back(std::make_unique<redlock::test::chaos_proxy>(fleet[i].port()));
    through_proxies.push_back(proxies.back()->config());
  }
  const auto io = co_await asio::this_coro::executor;
  redlock::client holder(io, fleet.configs(), fast_client_options());
  // Patient enough with each node for the delayed replies.
  redlock::client waiter(io, through_proxies, fast_client_options(4 * delay));

  auto [ec, held] = co_await acquire_shape(holder, s, lock_for(20s, renewal::off));
  BOOST_TEST_REQUIRE(!ec, held.diagnostics());
  // Shared with the waiting coroutine, which may outlive this frame if the check below fails.
  const auto waited =
      std::make_shared<std::optional<std::tuple<redlock::error_code, redlock::lease>>>();
  asio::co_spawn(
      io,
      [&waiter, s, waited]() -> asio::awaitable<void> {
        auto options = patient_lock(20s);
        options.wait = 30s;
        *waited = co_await acquire_shape(waiter, s, options);
      },
      asio::detached);
  BOOST_TEST_REQUIRE(co_await eventually([&] { return subscribed_everywhere(fleet, 1); }, 3s, 20ms),
                     "the waiter subscribes on every node");
  co_await sleep_for(300ms);  // its round after the subscription is refused: it sleeps
  BOOST_TEST_REQUIRE(!*waited);

  std::vector<long long> scripts_before;
  for (std::size_t i = 0; i < nodes; ++i) {
    BOOST_TEST_REQUIRE(proxies[i]->connections_accepted() == 2u);
    proxies[i]->set_scope(0);
    proxies[i]->set_latency(redlock::test::chaos_proxy::direction::downstream, delay);
    scripts_before.push_back(evalsha_calls(fleet[i].port()));
  }
  const std::string key = s == shape::semaphore ? redlock::detail::semaphore_slot_key("r", 0) : "r";
  on_every_node(fleet, {"PUBLISH", channel, key});
  // The waiter's refused SETs have run on every node; their replies are held back.
  BOOST_TEST_REQUIRE(co_await eventually(
      [&] {
        for (std::size_t i = 0; i < nodes; ++i) {
          if (evalsha_calls(fleet[i].port()) == scripts_before[i]) return false;
        }
        return true;
      },
      2s, 2ms));
  BOOST_TEST_REQUIRE(!*waited);
  const auto released = steady_clock::now();
  auto [release_ec] = co_await held.async_release(tuple_awaitable);
  BOOST_TEST_REQUIRE(!release_ec, held.diagnostics());
  BOOST_TEST(co_await eventually([&] { return waited->has_value(); }, 8s));
  const auto took = ms_since(released);
  if (*waited) {
    auto& [wait_ec, lease] = **waited;
    BOOST_TEST_REQUIRE(!wait_ec, wait_ec.message() << ": " << lease.diagnostics());
    co_await lease.async_release(tuple_awaitable);
  }
  co_return took;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(release_notices)

BOOST_AUTO_TEST_CASE(a_release_wakes_a_waiter_of_another_client_at_once) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter(io.get_executor(), fleet.configs(), fast_client_options());
    background_acquire b;
    auto held = co_await hold_while_waited_for(fleet, holder, waiter, b);
    co_await release_and_check_prompt_wake(held, b);
    BOOST_TEST(co_await eventually([&] { return subscribed_everywhere(fleet, 0); }, 3s, 20ms),
               "no subscription is left once nobody waits");
  });
}

BOOST_AUTO_TEST_CASE(expiry_and_a_plain_del_announce_nothing_and_the_ttl_bounds_the_wait) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter(io.get_executor(), fleet.configs(), fast_client_options());

    // Expiry: the holder stops renewing and vanishes; the waiter's backoff is 5 s.
    {
      auto [ec, held] =
          co_await holder.async_acquire("expires", lock_for(1500ms, renewal::off), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, held.diagnostics());
      const auto acquired = steady_clock::now();
      background_acquire b;
      b.start(waiter, "expires", patient_lock());
      BOOST_TEST(co_await eventually([&] { return b.done; }, 6s));
      BOOST_TEST_REQUIRE(!b.ec, b.ec.message() << ": " << b.lease.diagnostics());
      const auto after = ms_since(acquired);
      BOOST_TEST(after >= 1400, "acquired only " << after << " ms after the holder");
      BOOST_TEST(after < 3000, "acquired " << after << " ms after the holder, TTL 1500 ms");
      co_await b.lease.async_release(tuple_awaitable);
    }
    // An operator's DEL while the waiter sleeps: found by the TTL bound, not the backoff.
    {
      auto [ec, held] =
          co_await holder.async_acquire("deleted", lock_for(2000ms, renewal::off), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, held.diagnostics());
      const auto acquired = steady_clock::now();
      background_acquire b;
      b.start(waiter, "deleted", patient_lock());
      co_await sleep_for(300ms);
      on_every_node(fleet, {"DEL", "deleted"});
      BOOST_TEST(co_await eventually([&] { return b.done; }, 6s));
      BOOST_TEST_REQUIRE(!b.ec, b.ec.message() << ": " << b.lease.diagnostics());
      BOOST_TEST(ms_since(acquired) < 3500, "acquired " << ms_since(acquired) << " ms after");
      co_await b.lease.async_release(tuple_awaitable);
    }
  });
}

// A holder process that dies (SIGKILL) while it holds and renews a plain lock: nothing is
// released or announced, and the lock is free once a majority of its keys expired, at most one TTL
// after the last renewal. A waiter sleeping on a 5 s backoff takes it then, woken by the TTL bound
// its refusals read.
BOOST_AUTO_TEST_CASE(a_killed_holder_process_frees_its_lock_within_a_ttl) {
  redis_fleet fleet(3);
  const std::chrono::milliseconds ttl = 3000ms;
  const pid_t holder = redlock::test::start_holder_process(
      [&](asio::io_context& io, auto took) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
        auto [ec, held] =
            co_await locks.async_try_acquire("dead-holder", lock_for(ttl), tuple_awaitable);
        took(!ec);
        co_await sleep_for(1h);  // killed about here, holding and renewing its key
      });
  // Killed after the renewal at half-life, a third of a TTL before the first expiry, so that a
  // renewal delayed on a busy machine still leaves the key alive to be measured.
  std::this_thread::sleep_for(ttl * 2 / 3);
  redlock::test::kill_process(holder);

  const auto keys = redlock::test::read_key_lifetimes(fleet, "dead-holder");
  BOOST_TEST_REQUIRE(keys.on_a_majority(), "the lock is not held on a majority");
  BOOST_TEST(keys.longest_ms() <= ttl.count(), "a key outlives one TTL: " << keys.longest_ms());
  const auto free_from = keys.majority_gone_at();

  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client waiter(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, lease] =
        co_await waiter.async_acquire("dead-holder", patient_lock(), tuple_awaitable);
    const auto at = steady_clock::now();
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    const auto after = redlock::test::ms_between(free_from, at);
    // Not before a majority let the dead holder's key expire (1 ms: PTTL's rounding), and soon
    // after: well before the waiter's 5 s backoff.
    BOOST_TEST(after >= -1, "taken " << -after << " ms before the key expired");
    BOOST_TEST(after < 2000, "taken " << after << " ms after the key expired");
    co_await lease.async_release(tuple_awaitable);
  });
}

BOOST_AUTO_TEST_CASE(a_release_between_the_refusal_and_the_subscription_is_not_lost) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, held] = co_await holder.async_acquire("r", lock_for(10s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, held.diagnostics());

    // The waiter's first refusal is logged before it subscribes: the key goes right then, by a
    // DEL that announces nothing.
    bool deleted = false;
    auto options = fast_client_options();
    options.logger = [&](redlock::log_level, std::string_view message) {
      if (!deleted && message.find("not acquired") != std::string_view::npos) {
        deleted = true;
        on_every_node(fleet, {"DEL", "r"});
      }
    };
    redlock::client waiter(io.get_executor(), fleet.configs(), options);
    const auto started = steady_clock::now();
    auto [wait_ec, lease] = co_await waiter.async_acquire("r", patient_lock(), tuple_awaitable);
    BOOST_TEST_REQUIRE(deleted);
    BOOST_TEST_REQUIRE(!wait_ec, wait_ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(ms_since(started) < 2000, "acquired after " << ms_since(started) << " ms");
    co_await lease.async_release(tuple_awaitable);
  });
}

// A release whose announcement arrives while the waiter's refused round is still in flight is
// kept and applied once the round is decided: the waiter tries again at once (one more delayed
// round trip, 400 ms here), instead of sleeping until the holder's TTL (20 s).
BOOST_AUTO_TEST_CASE(a_release_announced_during_the_waiters_round_is_not_lost) {
  for (const std::size_t nodes : {1u, 3u}) {
    for (const shape s : {shape::lock, shape::fenced_lock, shape::semaphore}) {
      BOOST_TEST_CONTEXT(nodes << " nodes, " << s) {
        run_async([&](asio::io_context&) -> asio::awaitable<void> {
          const auto took = co_await release_during_the_waiters_round(nodes, s);
          BOOST_TEST(took < 5000, "acquired " << took << " ms after the release");
        });
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(killed_subscriptions_come_back_and_wake_the_waiter) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter(io.get_executor(), fleet.configs(), fast_client_options());
    background_acquire b;
    auto held = co_await hold_while_waited_for(fleet, holder, waiter, b);
    on_every_node(fleet, {"CLIENT", "KILL", "TYPE", "pubsub"});
    BOOST_TEST(co_await eventually([&] { return subscribed_everywhere(fleet, 1); }, 3s, 20ms),
               "the waiter subscribes again");
    co_await release_and_check_prompt_wake(held, b);
  });
}

BOOST_AUTO_TEST_CASE(a_node_restarted_while_waiting_is_subscribed_again) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter(io.get_executor(), fleet.configs(), fast_client_options());
    background_acquire b;
    auto held = co_await hold_while_waited_for(fleet, holder, waiter, b);
    fleet[0].restart();  // the key is gone there (no persistence); the others still hold it
    BOOST_TEST(co_await eventually([&] { return subscribers(fleet, 0) == 1; }, 3s, 20ms),
               "subscribed again on the restarted node");
    // Still held on 2 of 3 nodes: only the release frees it.
    co_await release_and_check_prompt_wake(held, b);
  });
}

BOOST_AUTO_TEST_CASE(cancelled_and_timed_out_waits_leave_no_subscription) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, held] = co_await holder.async_acquire("r", lock_for(10s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, held.diagnostics());

    // Several waiters of one client share one subscription per node.
    background_acquire first, second;
    first.start(waiter, "r", patient_lock());
    second.start(waiter, "r", patient_lock());
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return subscribed_everywhere(fleet, 1); }, 3s, 20ms));
    first.cancel.emit(asio::cancellation_type::terminal);
    BOOST_TEST(co_await eventually([&] { return first.done; }, 2s));
    BOOST_TEST((first.ec == asio::error::operation_aborted), first.ec.message());
    co_await sleep_for(200ms);
    BOOST_TEST(subscribed_everywhere(fleet, 1), "the other waiter still listens");
    second.cancel.emit(asio::cancellation_type::terminal);
    BOOST_TEST(co_await eventually([&] { return second.done; }, 2s));
    BOOST_TEST(co_await eventually([&] { return subscribed_everywhere(fleet, 0); }, 3s, 20ms),
               "no subscription is left");

    // A wait that runs out.
    auto options = patient_lock();
    options.wait = 700ms;
    auto [timeout_ec, none] = co_await waiter.async_acquire("r", options, tuple_awaitable);
    BOOST_TEST((timeout_ec == redlock::error::wait_timeout), timeout_ec.message());
    BOOST_TEST(co_await eventually([&] { return subscribed_everywhere(fleet, 0); }, 3s, 20ms));
    co_await held.async_release(tuple_awaitable);
  });
}

BOOST_AUTO_TEST_CASE(a_busy_client_hands_off_locally_only_a_bounded_number_of_times) {
  // Client `busy` has two coroutines that take turns on the lock forever; client `other` waits
  // once. With the bound, the lock leaves `busy` after local_handoffs hand-offs; without it (a
  // bound of "never compete"), `other` starves while the lock passes between the two.
  for (const unsigned handoffs : {4u, 1'000'000u}) {
    redis_fleet fleet(3);
    run_async([&](asio::io_context& io) -> asio::awaitable<void> {
      redlock::client busy(io.get_executor(), fleet.configs(), fast_client_options());
      redlock::client other(io.get_executor(), fleet.configs(), fast_client_options());
      auto options = lock_for(10s);
      options.local_handoffs = handoffs;
      bool stop = false;
      int turns = 0;
      auto taker = [&]() -> asio::awaitable<void> {
        while (!stop) {
          auto [ec, lease] = co_await busy.async_acquire("r", options, tuple_awaitable);
          if (ec) continue;
          ++turns;
          co_await sleep_for(20ms);
          co_await lease.async_release(tuple_awaitable);
        }
      };
      asio::co_spawn(io, taker(), asio::detached);
      asio::co_spawn(io, taker(), asio::detached);
      BOOST_TEST_REQUIRE(co_await eventually([&] { return turns >= 2; }, 2s));

      // With the bound, `other` competes after every fifth hold of about 20 ms. Each competition
      // is a fair draw that `busy`'s waiting coroutine may win too (about one in four on a quiet
      // machine, more under load), so the wait leaves room for many lost draws: twenty in a row
      // happen about once in a million runs even at even odds. Without the bound, 1.5 s of
      // starvation is enough to tell.
      background_acquire b;
      auto waiting = patient_lock();
      waiting.wait = handoffs == 4 ? 6s : 1500ms;
      b.start(other, "r", waiting);
      BOOST_TEST(co_await eventually([&] { return b.done; }, *waiting.wait + 2s));
      if (handoffs == 4) {
        BOOST_TEST(!b.ec, "with the bound, acquired after " << b.took.value_or(-1)
                                                            << " ms: " << b.ec.message());
      } else {
        BOOST_TEST((b.ec == redlock::error::wait_timeout),
                   "without the bound the other client starves: " << b.ec.message());
      }
      if (!b.ec) co_await b.lease.async_release(tuple_awaitable);
      stop = true;
      co_await sleep_for(100ms);
    });
  }
}

// A lease lost while a local waiter queues behind it (its key deleted behind its back): with
// local_handoffs = 0 the waiter competes, and the lost lease's release deletes and announces
// nothing. Its own answers tell the waiter the key is gone: it tries at once, instead of sleeping
// until the lost key's TTL (6 s).
BOOST_AUTO_TEST_CASE(a_waiter_behind_a_lost_lease_tries_at_once) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto options = lock_for(6s, renewal::off);
    options.local_handoffs = 0;
    auto [ec, held] = co_await locks.async_acquire("r", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, held.diagnostics());
    background_acquire b;
    auto waiting = patient_lock(6s);
    waiting.local_handoffs = 0;
    b.start(locks, "r", waiting);
    co_await sleep_for(100ms);
    BOOST_TEST_REQUIRE(!b.done);

    on_every_node(fleet, {"DEL", "r"});
    const auto lost = steady_clock::now();
    auto [extend_ec] = co_await held.async_extend(6s, tuple_awaitable);
    BOOST_TEST_REQUIRE((extend_ec == redlock::error::not_held), extend_ec.message());
    BOOST_TEST(co_await eventually([&] { return b.done; }, 8s));
    BOOST_TEST_REQUIRE(!b.ec, b.ec.message() << ": " << b.lease.diagnostics());
    BOOST_TEST(ms_since(lost) < 2000, "acquired " << ms_since(lost) << " ms after the loss");
    co_await b.lease.async_release(tuple_awaitable);
  });
}

// "local_handoffs in a row" counts for one resource only: a queue that served another resource
// (queues are recycled) starts from zero. With a bound of 1, a hand-off of "a" that ended without
// a holder must not make the first release of "b" with a waiter compete: it hands off, and so
// announces nothing (PUBLISH calls, counted by the server, stay the same).
BOOST_AUTO_TEST_CASE(hand_offs_in_a_row_are_counted_per_resource) {
  redis_fleet fleet(1);
  const auto publishes = [&] {
    return redlock::test::info_counter(fleet[0].port(), "commandstats", "cmdstat_publish:calls=");
  };
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto options = patient_lock();
    options.local_handoffs = 1;

    // "a": one hand-off, whose taker is cancelled at once: the queue ends with the count at 1.
    auto [ec, a] = co_await locks.async_acquire("a", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, a.diagnostics());
    background_acquire taker;
    taker.start(locks, "a", options);
    co_await sleep_for(50ms);
    a.async_release([](redlock::error_code) {});  // hands "a" to `taker`, which sends its SET
    taker.cancel.emit(asio::cancellation_type::terminal);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return taker.done; }, 2s));
    BOOST_TEST_REQUIRE((taker.ec == asio::error::operation_aborted), taker.ec.message());
    co_await sleep_for(100ms);  // its cleanup is through

    // "b": the first release with a waiter hands off.
    auto [b_ec, b] = co_await locks.async_acquire("b", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!b_ec, b.diagnostics());
    background_acquire next;
    next.start(locks, "b", options);
    co_await sleep_for(50ms);
    const auto before = publishes();
    co_await b.async_release(tuple_awaitable);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return next.done; }, 3s));
    BOOST_TEST_REQUIRE(!next.ec, next.ec.message());
    BOOST_TEST(publishes() == before, "the release of \"b\" was announced: it did not hand off");
    co_await next.lease.async_release(tuple_awaitable);
  });
}

// Every client that waits receives every release of the fleet. A flood of announcements of
// resources it does not wait for must not become a posted handler each, and a flood of copies of
// the one it waits for must be delivered together: the client's executor counts what it runs.
BOOST_AUTO_TEST_CASE(a_flood_of_announcements_does_not_queue_a_handler_each) {
  constexpr int flood = 10000;
  redis_fleet fleet(3);
  // PUBLISHes `count` announcements in one script call, so that they reach the subscribers in a
  // few large reads.
  const auto announce_many = [&](const std::string& resource_prefix, bool same) {
    for (std::size_t i = 0; i < fleet.size(); ++i) {
      sync_client c(fleet[i].port());
      c.command({"EVAL",
                 "for i = 1, tonumber(ARGV[2]) do "
                 "local name = ARGV[1] if ARGV[3] == '0' then name = name .. i end "
                 "redis.call('PUBLISH', KEYS[1], name) end",
                 "1", channel, resource_prefix, std::to_string(flood), same ? "1" : "0"});
    }
  };
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto executed = std::make_shared<std::atomic<std::uint64_t>>(0);
    const redlock::test::counting_executor counted(io.get_executor(), executed);
    redlock::client holder(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter(counted, fleet.configs(), fast_client_options());
    background_acquire b;
    // Reading the floods takes long on a loaded machine under the sanitizers (4.7 s once, beside
    // two busy loops and a build): the waiter sleeps 30 s between rounds, so that a wake within
    // 10 s can only be the release's announcement.
    auto held = co_await hold_while_waited_for(fleet, holder, waiter, b, 30s);
    co_await sleep_for(200ms);

    // Resources nobody here waits for.
    auto before = executed->load();
    announce_many("other:", false);
    // Copies of the one it waits for, while it is still held: at most a round per delivery.
    announce_many("r", true);
    // The real release comes behind both floods on every node's link: 20 000 announcements each.
    co_await release_and_check_prompt_wake(held, b, 10s);
    co_await sleep_for(300ms);
    const auto ran = executed->load() - before;
    BOOST_TEST_MESSAGE(ran << " handlers ran for " << 6 * flood << " announcements");
    BOOST_TEST(ran < 2000u, ran << " handlers ran for " << 6 * flood << " announcements");
  });
}

// A refused round after the first asks for the holder's TTL in the same request as its SET (the
// acquire script): no separate PTTL is sent, and the integer a refusal carries bounds the wait.
// Three fake nodes refuse a plain SET and answer the script's first call with a PTTL of 300 ms,
// then grant. The waiter's backoff is drawn from up to 5 s; the TTL it learned makes it try again
// by about 300 ms at the latest.
BOOST_AUTO_TEST_CASE(a_refusal_carries_the_holders_ttl_in_the_same_request) {
  using redlock::test::fake_command;
  using redlock::test::fake_reply;
  namespace fake = redlock::test::fake;
  std::vector<std::unique_ptr<redlock::test::fake_server>> nodes;
  for (int i = 0; i < 3; ++i) {
    auto script_calls = std::make_shared<std::atomic<int>>(0);
    // Without with_handshake's translation: the script must arrive as EVALSHA.
    nodes.push_back(std::make_unique<redlock::test::fake_server>(
        [script_calls](const fake_command& cmd, std::size_t) -> fake_reply {
          if (auto reply = fake::handshake_reply(cmd)) return *reply;
          if (fake::is(cmd, "SET")) return fake_reply(fake::null_bulk());
          if (fake::is(cmd, "EVALSHA") && cmd[1] == redlock::detail::acquire_script().sha1()) {
            if (script_calls->fetch_add(1) == 0) return fake_reply(fake::integer(300));
            return fake_reply(fake::ok());
          }
          if (fake::is(cmd, "EVALSHA")) return fake_reply(fake::integer(1));  // the release
          return fake_reply(fake::error("ERR unexpected"));
        }));
  }
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    const auto configs = redlock::test::configs_of(nodes);
    auto options = fast_client_options();
    options.release_channel.clear();  // the fake nodes do not subscribe
    redlock::client waiter(io.get_executor(), configs, options);
    auto lock = patient_lock();
    lock.wait = 4s;
    const auto started = steady_clock::now();
    auto [ec, lease] = co_await waiter.async_acquire("r", lock, tuple_awaitable);
    const auto took = ms_since(started);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(took < 2500, "acquired after " << took << " ms: the PTTL did not bound the wait");
    // The third node's script of the winning round may still be on its way.
    BOOST_TEST(co_await eventually(
        [&] {
          return std::all_of(nodes.begin(), nodes.end(), [](const auto& node) {
            return node->commands_received("EVALSHA") >= 2u;
          });
        },
        2s));
    for (const auto& node : nodes) {
      BOOST_TEST(node->commands_received("PTTL") == 0u);
      BOOST_TEST(node->commands_received("SET") == 1u);
    }
    co_await lease.async_release(tuple_awaitable);
  });
}

// A user whose ACL denies PTTL still acquires: the acquire script reads the TTL through pcall,
// and its refusals then carry none, so the waiter relies on its backoff.
BOOST_AUTO_TEST_CASE(a_user_who_may_not_run_pttl_still_waits_and_acquires) {
  redlock::test::redis_server_options server_options;
  server_options.acl_users = {"nopttl on >pw ~* &* +@all -pttl"};
  redis_fleet fleet(3, server_options);
  auto nodes = fleet.configs();
  for (auto& node : nodes) {
    node.username = "nopttl";
    node.password = "pw";
  }
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), nodes, fast_client_options());
    redlock::client waiter(io.get_executor(), nodes, fast_client_options());
    // Never released: the key expires, which nobody announces.
    auto [held_ec, held] =
        co_await holder.async_acquire("r", lock_for(400ms, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!held_ec, held.diagnostics());
    auto lock = lock_for(10s);
    lock.wait = 5s;
    auto [ec, lease] = co_await waiter.async_acquire("r", lock, tuple_awaitable);
    BOOST_TEST(!ec, ec.message() << ": " << lease.diagnostics());
    if (!ec) co_await lease.async_release(tuple_awaitable);
  });
}

// SCRIPT FLUSH while a waiter waits: its next round's scripts are answered NOSCRIPT, which costs
// that round the nodes' votes (never resent: a late SET could outlive its round's cleanup), and the
// script is loaded again, so a later round acquires and no stray key is left.
BOOST_AUTO_TEST_CASE(a_flushed_script_cache_costs_a_round_not_the_lock) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter(io.get_executor(), fleet.configs(), fast_client_options());
    background_acquire b;
    auto held = co_await hold_while_waited_for(fleet, holder, waiter, b);
    on_every_node(fleet, {"SCRIPT", "FLUSH"});
    co_await held.async_release(tuple_awaitable);
    BOOST_TEST(co_await eventually([&] { return b.done; }, 8s));
    BOOST_TEST_REQUIRE(!b.ec, b.ec.message() << ": " << b.lease.diagnostics());
    for (std::size_t i = 0; i < fleet.size(); ++i) {
      sync_client c(fleet[i].port());
      BOOST_TEST(c.command({"GET", "r"}).text == b.lease.token());
    }
    co_await b.lease.async_release(tuple_awaitable);
  });
}

// Proves waiting.md: "Cleanup releases of failed rounds are announced too (their keys may be what
// blocked a rival)". Five nodes; another owner holds node 0 for a minute. Client `loser` reaches
// nodes 3 and 4 through proxies that drop its requests, so its try is granted on nodes 1 and 2 and
// stays undecided until those two fail at its node_timeout (3 s). Meanwhile `waiter` is refused
// on nodes 0, 1 and 2 and sleeps: only an announcement can wake it (every node is subscribed, its
// backoff is 5 s, the keys' TTLs outlast its 20 s wait). The loser's failed round deletes its keys
// on nodes 1 and 2 and announces each: plain subscribers there receive the resource's name once,
// the one on node 0 nothing, and the announcement wakes the waiter, which acquires at once. The
// waiter's own failed rounds (granted on nodes 3 and 4 only) are announced there too.
BOOST_AUTO_TEST_CASE(a_failed_rounds_cleanup_is_announced_and_wakes_a_waiter) {
  using redlock::test::chaos_proxy;
  redis_fleet fleet(5);
  inspector servers(fleet);
  servers.set(0, "r", "rival", 60s);
  std::vector<std::unique_ptr<sync_client>> listeners;
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    listeners.push_back(std::make_unique<sync_client>(fleet[i].port()));
    const auto confirmed = listeners.back()->command({"SUBSCRIBE", channel});
    BOOST_TEST_REQUIRE(
        (confirmed.elements.size() == 3 && confirmed.elements[0].text == "subscribe"));
  }
  std::vector<std::unique_ptr<chaos_proxy>> dropping;
  auto loser_nodes = fleet.configs();
  for (const std::size_t i : {3u, 4u}) {
    dropping.push_back(std::make_unique<chaos_proxy>(fleet[i].port()));
    loser_nodes[i] = dropping.back()->config();
  }
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client loser(io.get_executor(), loser_nodes, fast_client_options(3s));
    redlock::client waiter(io.get_executor(), fleet.configs(), fast_client_options());
    BOOST_TEST_REQUIRE(co_await redlock::test::every_node_answers(loser));
    for (const auto& proxy : dropping)
      proxy->set_blackhole(chaos_proxy::direction::upstream);

    std::optional<error_code> lost;
    loser.async_try_acquire("r", lock_for(30s, renewal::off),
                            [&](error_code ec, redlock::lease) { lost = ec; });
    const auto loser_granted = [&] { return servers.present_on({1, 2}, "r") == 2; };
    BOOST_TEST_REQUIRE(co_await eventually(loser_granted, 2s),
                       "the loser's SETs are granted on nodes 1 and 2");
    background_acquire b;
    b.start(waiter, "r", patient_lock());
    // Each node's subscribers: the plain one and the waiter.
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return subscribed_everywhere(fleet, 2); }, 2s, 20ms),
        "the waiter subscribes on every node");
    co_await sleep_for(300ms);  // its round after the subscription is refused: it sleeps
    BOOST_TEST_REQUIRE(!b.done, b.ec.message() << ": " << b.lease.diagnostics());
    BOOST_TEST_REQUIRE(!lost.has_value(),
                       "the loser's round ended before the waiter slept: " << lost->message());

    BOOST_TEST_REQUIRE(co_await eventually([&] { return lost.has_value(); }, 5s));
    BOOST_TEST((*lost == redlock::condition::not_acquired), lost->message());
    const auto failed = steady_clock::now();
    BOOST_TEST_REQUIRE(co_await eventually([&] { return b.done; }, 4s),
                       "the cleanup's announcement did not wake the waiter");
    BOOST_TEST_REQUIRE(!b.ec, b.ec.message() << ": " << b.lease.diagnostics());
    BOOST_TEST(ms_since(failed) < 1000,
               "acquired " << ms_since(failed) << " ms after the loser's round failed");
    BOOST_TEST(servers.holding_on({1, 2, 3, 4}, "r", b.lease.token()) >= 3u);

    const std::vector<std::string> once = {"r"};
    BOOST_TEST(announcements_received(*listeners[0]).empty());
    for (const std::size_t i : {1u, 2u}) {
      BOOST_TEST_CONTEXT("node " << i) {
        BOOST_TEST(announcements_received(*listeners[i]) == once, boost::test_tools::per_element());
      }
    }
    for (const std::size_t i : {3u, 4u}) {
      BOOST_TEST_CONTEXT("node " << i) {
        const auto waiters_cleanups = announcements_received(*listeners[i]);
        BOOST_TEST(!waiters_cleanups.empty());
        BOOST_TEST(std::count(waiters_cleanups.begin(), waiters_cleanups.end(), "r") ==
                   static_cast<std::ptrdiff_t>(waiters_cleanups.size()));
      }
    }
    co_await b.lease.async_release(tuple_awaitable);
  });
}

// Proves waiting.md, "When a waiter tries again", row "the holder extended its lease": the TTL
// bound moves with the extension, the waiter's round at the old bound is refused and reads the new
// PTTL. The holder takes the lock with a TTL of 2 s and no renewal; the waiter (subscribed on
// every node, with a backoff of a minute that never fires) sleeps until the key can have expired
// by the PTTL its refusal carried. At 1 s the holder extends to 4 s: the waiter's round at the old
// bound (2 s) is refused, and its next one comes when the extended key can have expired (5 s),
// which only the PTTL read at 2 s told it. At 3.5 s the holder extends again, so that round is
// refused too. The waiter never gets the lock while the holder has it, and acquires at once when
// the holder releases at 6.5 s. Each round of the waiter is seen by the debug message it logs.
BOOST_AUTO_TEST_CASE(an_extension_moves_the_waiters_ttl_bound) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    std::vector<steady_clock::time_point> refused_rounds;
    auto logged = fast_client_options();
    logged.logger = [&](redlock::log_level, std::string_view message) {
      if (message.find("\"r\" not acquired") != std::string_view::npos)
        refused_rounds.push_back(steady_clock::now());
    };
    redlock::client holder(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter(io.get_executor(), fleet.configs(), logged);
    auto [ec, held] =
        co_await holder.async_acquire("r", lock_for(2s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, held.diagnostics());
    const auto taken = steady_clock::now();
    const auto until = [&](milliseconds after_taken) {
      return sleep_for(taken + after_taken - steady_clock::now());
    };

    background_acquire b;
    auto waiting = patient_lock();
    waiting.retry = {60s, 60s, 1.0};
    waiting.wait = 30s;
    b.start(waiter, "r", waiting);
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return subscribed_everywhere(fleet, 1); }, 1s, 20ms),
        "the waiter subscribes on every node");
    co_await until(1000ms);
    auto [first_ec] = co_await held.async_extend(4s, tuple_awaitable);
    BOOST_TEST_REQUIRE(!first_ec, first_ec.message() << ": " << held.diagnostics());
    co_await until(3500ms);
    auto [second_ec] = co_await held.async_extend(4s, tuple_awaitable);
    BOOST_TEST_REQUIRE(!second_ec, second_ec.message() << ": " << held.diagnostics());
    co_await until(6500ms);
    BOOST_TEST_REQUIRE(held.held());
    BOOST_TEST_REQUIRE(!b.done, "the waiter ended while the holder held the lock: "
                                    << b.ec.message() << ": " << b.lease.diagnostics());

    const auto released = steady_clock::now();
    auto [release_ec] = co_await held.async_release(tuple_awaitable);
    BOOST_TEST_REQUIRE(!release_ec, held.diagnostics());
    BOOST_TEST_REQUIRE(co_await eventually([&] { return b.done; }, 3s));
    BOOST_TEST_REQUIRE(!b.ec, b.ec.message() << ": " << b.lease.diagnostics());
    BOOST_TEST(ms_since(released) < 1000, "acquired " << ms_since(released) << " ms after");

    // Refused rounds: the first (a plain SET) and the one after the subscription, right away; one
    // at the old bound; one at the bound the first extension set; none in between.
    std::vector<long long> at;
    for (const auto round : refused_rounds)
      at.push_back(redlock::test::ms_between(taken, round));
    const auto rounds_within = [&](long long from, long long to) {
      return std::count_if(at.begin(), at.end(), [&](long long t) { return t >= from && t < to; });
    };
    BOOST_TEST_MESSAGE("the waiter's refused rounds, ms after the holder took the lock:");
    for (const auto t : at)
      BOOST_TEST_MESSAGE("  " << t);
    BOOST_TEST(at.size() == 4u);
    BOOST_TEST(rounds_within(0, 1000) == 2);
    BOOST_TEST(rounds_within(1900, 3000) == 1, "a round at the old bound (2 s)");
    BOOST_TEST(rounds_within(4900, 6000) == 1, "a round at the extended bound (5 s)");
    co_await b.lease.async_release(tuple_awaitable);
  });
}

BOOST_AUTO_TEST_SUITE_END()
