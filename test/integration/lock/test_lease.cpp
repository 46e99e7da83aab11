// The lease's own bookkeeping against real redis-server processes: waiters for its loss, the
// order of its cleanup against the next local waiter, which cancellations an extension honours,
// destruction off the client's executor, and extensions after the script cache was flushed.

#include "integration/prelude.hpp"
#include "lease_access.hpp"
#include "lock/scripts.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/inspector.hpp"
#include "support/lock_recorder.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using redlock::test::plain_lock;

std::size_t lost_waiters_of(const redlock::lease& lease) {
  return redlock::detail::lease_access::state_of(lease)->waiting_for_loss();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lease_handle)

// A watchdog that waits for the loss and gives up again and again (wait_lost || timer) keeps
// nothing of the waits it gave up: 20 000 of them leave no waiter behind.
BOOST_AUTO_TEST_CASE(finished_lost_waiters_are_not_kept) {
  redis_fleet fleet(1);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, lease] =
        co_await locks.async_try_acquire("watched", plain_lock(60s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
    for (int i = 0; i < 20000; ++i) {
      asio::cancellation_signal cancel;
      std::optional<error_code> waited;
      lease.async_wait_lost(
          asio::bind_cancellation_slot(cancel.slot(), [&](error_code e) { waited = e; }));
      cancel.emit(asio::cancellation_type::terminal);
      BOOST_TEST_REQUIRE(co_await eventually([&] { return waited.has_value(); }, 1s, 0ms));
      BOOST_TEST_REQUIRE(*waited == asio::error::operation_aborted);
    }
    BOOST_TEST(lost_waiters_of(lease) == 0u);

    // One still waiting is kept, and ends with the lease.
    std::optional<error_code> pending;
    lease.async_wait_lost([&](error_code e) { pending = e; });
    BOOST_TEST(lost_waiters_of(lease) == 1u);
    std::tie(ec) = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(co_await eventually([&] { return pending.has_value(); }, 1s));
    BOOST_TEST(*pending == asio::error::operation_aborted);
  });
}

// A lost lease deletes what is left of its key before the next local waiter's SET goes out, so on
// every node the waiter finds the key gone. Here the holder loses the lock because a rival took
// node 0 and nodes 1 and 2 lost the key; nodes 3 and 4 still hold it. The waiter may try only
// once before its wait runs out: it must win on nodes 1 to 4 in that one round.
BOOST_FIXTURE_TEST_CASE(a_lost_lease_frees_its_nodes_before_the_next_local_waiter_tries,
                        redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::lock_options holder_options = plain_lock(600ms);
    holder_options.auto_renew = true;
    auto [ec, holder] = co_await locks.async_acquire("handed", holder_options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, holder.diagnostics());
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return nodes.holding("handed", holder.token()) == 5; }, 2s));

    redlock::lock_options waiter_options = plain_lock(10s);
    waiter_options.wait = 3s;
    waiter_options.retry = {10s, 10s, 1.0};  // one round, then the wait runs out
    std::optional<std::tuple<error_code, redlock::lease>> waited;
    locks.async_acquire("handed", waiter_options,
                        [&](error_code e, redlock::lease l) { waited.emplace(e, std::move(l)); });

    nodes.set(0, "handed", "rival", 60s);
    for (std::size_t i = 1; i < 3; ++i) {
      sync_client node(fleet[i].port());
      node.command({"DEL", "handed"});
    }
    // Renewal at half of 600 ms finds the key foreign or gone on a quorum: lost.
    BOOST_TEST_REQUIRE(co_await eventually([&] { return waited.has_value(); }, 3s));
    auto& [waiter_ec, waiter] = *waited;
    BOOST_TEST(!holder.held());
    BOOST_TEST(!waiter_ec, waiter_ec.message() << ": " << waiter.diagnostics());
    BOOST_TEST(co_await eventually(
        [&] {
          return nodes.holding_on({1, 2, 3, 4}, "handed", waiter.token()) == 4;
        },
        2s));
    std::tie(ec) = co_await waiter.async_release(tuple_awaitable);
    BOOST_TEST(!ec, ec.message());
  });
}

// An extension in flight may still apply whatever its caller does, so total cancellation (which
// promises that nothing happened) is not honoured: the caller gets the real outcome. Terminal and
// partial cancellation complete it at once.
BOOST_AUTO_TEST_CASE(extend_honours_terminal_and_partial_cancellation_only) {
  redis_fleet fleet(3);
  std::vector<std::unique_ptr<redlock::test::chaos_proxy>> proxies;
  std::vector<redlock::node_config> through_proxies;
  for (std::size_t i = 0; i < 3; ++i) {
    proxies.push_back(std::make_unique<redlock::test::chaos_proxy>(fleet[i].port()));
    through_proxies.push_back(proxies.back()->config());
  }
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), through_proxies, fast_client_options(2s));
    auto [ec, lease] =
        co_await locks.async_try_acquire("extended", plain_lock(10s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
    for (auto& proxy : proxies)
      proxy->set_latency(redlock::test::chaos_proxy::direction::downstream, 300ms);

    for (const auto type : {asio::cancellation_type::total, asio::cancellation_type::partial,
                            asio::cancellation_type::terminal}) {
      BOOST_TEST_CONTEXT("cancellation type " << static_cast<int>(type)) {
        asio::cancellation_signal cancel;
        std::optional<error_code> extended;
        const auto start = steady_clock::now();
        lease.async_extend(
            20s, asio::bind_cancellation_slot(cancel.slot(), [&](error_code e) { extended = e; }));
        co_await sleep_for(50ms);
        cancel.emit(type);
        BOOST_TEST_REQUIRE(co_await eventually([&] { return extended.has_value(); }, 2s));
        if (type == asio::cancellation_type::total) {
          BOOST_TEST(!*extended, extended->message());
          BOOST_TEST(ms_since(start) >= 290);
        } else {
          BOOST_TEST(*extended == asio::error::operation_aborted);
          BOOST_TEST(ms_since(start) < 250);
        }
        co_await sleep_for(400ms);  // the late replies of the cancelled ones
      }
    }
    for (auto& proxy : proxies)
      proxy->clear();
    std::tie(ec) = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!ec, ec.message());
  });
}

// The documented multi-threaded setup: the client on a strand, leases dropped on a thread that
// is not running the io_context, while renewal runs on the strand, or after the strand declared
// the lease lost (two of three nodes stopped past its validity). Before its hop to the strand the
// destructor may read nothing the strand writes without synchronisation: nothing orders this
// thread after those writes, which ThreadSanitizer reports (scripts/test.sh runs this test under
// it; a plain read of the phase was caught here). Each lock is released, or deleted by the lost
// lease's cleanup once the nodes are back.
BOOST_AUTO_TEST_CASE(leases_dropped_off_the_executor_are_released,
                     *boost::unit_test::label("threaded")) {
  redis_fleet fleet(3);
  inspector nodes(fleet);
  asio::io_context io;
  auto strand = asio::make_strand(io);
  auto locks = std::make_unique<redlock::client>(strand, fleet.configs(), fast_client_options());
  auto guard = asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&] { io.run(); });

  redlock::lock_options renewed = plain_lock(200ms);
  renewed.auto_renew = true;
  for (int round = 0; round < 12; ++round) {
    const std::string key = "off-thread-" + std::to_string(round);
    const bool lose_first = round % 2 == 1;
    BOOST_TEST_CONTEXT(key << (lose_first ? ", lost before it is dropped" : ", held")) {
      // Acquired on the strand, as every call on the client; get() throws if it failed.
      redlock::lease acquired =
          asio::post(strand, asio::use_future([&] {
                       return locks->async_acquire(key, renewed, asio::use_future);
                     }))
              .get()
              .get();
      if (lose_first) {
        fleet[0].pause();
        fleet[1].pause();
        std::this_thread::sleep_for(400ms);  // renewal fails; lost at the validity's end
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(round * 13 % 150));
      }
      {
        const auto dropped = std::move(acquired);  // destroyed here, on this thread
      }
      if (lose_first) {
        fleet[0].resume();
        fleet[1].resume();
      }
      BOOST_TEST(redlock::test::eventually_blocking([&] { return nodes.present(key) == 0; }, 3s),
                 key << " left behind");
    }
  }

  asio::post(strand, [&] { locks.reset(); });
  guard.reset();
  for (auto& thread : threads)
    thread.join();
}

// After SCRIPT FLUSH, an extension answered NOSCRIPT is not resent as EVAL (behind requests
// written after it, it could shorten a later, longer extension): it fails on those nodes, and the
// connection loads the script again at once, so the next extension succeeds. A release answered
// NOSCRIPT is resent, in its place.
BOOST_AUTO_TEST_CASE(an_extension_answered_noscript_is_final_and_the_script_is_reloaded) {
  redis_fleet fleet(3);
  inspector nodes(fleet);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, lease] =
        co_await locks.async_try_acquire("flushed", plain_lock(10s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
    // Every handshake loads both scripts. The acquire completed on a quorum: the third node's
    // connection may still be in its handshake, and its SET still to come. Flushing before that
    // handshake would let it load the scripts again, and the extension below would succeed there.
    const auto& extend_sha = redlock::detail::extend_script().sha1();
    const auto& release_sha = redlock::detail::release_script().sha1();
    const auto loaded_and_set = [&](std::size_t i) {
      sync_client node(fleet[i].port());
      const auto exists = node.command({"SCRIPT", "EXISTS", extend_sha, release_sha});
      return exists.elements.size() == 2u && exists.elements[0].integer == 1 &&
             exists.elements[1].integer == 1 && nodes.get(i, "flushed") == lease.token();
    };
    const bool ready = co_await eventually(
        [&] { return loaded_and_set(0) && loaded_and_set(1) && loaded_and_set(2); });
    BOOST_TEST_REQUIRE(ready, "the scripts were not loaded and the key set on every node");
    for (std::size_t i = 0; i < 3; ++i)
      sync_client(fleet[i].port()).command({"SCRIPT", "FLUSH"});

    std::tie(ec) = co_await lease.async_extend(30s, tuple_awaitable);
    BOOST_TEST(ec == error::no_quorum, ec.message());
    BOOST_TEST(lease.diagnostics().find("NOSCRIPT") != std::string::npos, lease.diagnostics());
    for (std::size_t i = 0; i < 3; ++i)
      BOOST_TEST(nodes.pttl(i, "flushed") <= 10000, "node " << i << ": extended all the same");
    BOOST_TEST(lease.held());

    BOOST_TEST(co_await eventually(
        [&] {
          for (std::size_t i = 0; i < 3; ++i) {
            sync_client node(fleet[i].port());
            if (node.command({"SCRIPT", "EXISTS", extend_sha}).elements.at(0).integer != 1) {
              return false;
            }
          }
          return true;
        },
        2s));
    std::tie(ec) = co_await lease.async_extend(30s, tuple_awaitable);
    BOOST_TEST(!ec, ec.message() << ": " << lease.diagnostics());
    for (std::size_t i = 0; i < 3; ++i)
      BOOST_TEST(nodes.pttl(i, "flushed") > 10000, "node " << i);

    std::tie(ec) = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(co_await eventually([&] { return nodes.present("flushed") == 0; }, 2s));
  });
}

BOOST_AUTO_TEST_SUITE_END()
