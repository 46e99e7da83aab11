// The lock core (client, lease, mutex) against real redis-server processes: acquire and release
// on 1 to 7 nodes, mutual exclusion, contention, local FIFO order, dead nodes, latency, invalid
// arguments. What the library claims is checked on the servers themselves, through blocking
// clients that are independent of the library. Renewal, with_lock, cancellation and completion
// tokens have suites of their own.

// GCC 12 at -O3 reports a false -Wrestrict (a __builtin_memcpy of 2^63 bytes that "may overlap")
// in std::string's _M_replace, inlined into `"literal" + std::string` (GCC bugs 105329 and
// 105651), which -Werror turns into a failed Release build. Ignored for this file's code only;
// set before the includes, since Boost.Test's BOOST_DATA_TEST_CASE name builder meets it too.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace bdata = boost::unit_test::data;
using redlock::test::ms_between;

using redlock::test::gone_everywhere;
using redlock::test::is_hex_token;
using redlock::test::settled_everywhere;
using redlock::test::warm_up;

// Out of line rather than in the data test case: that body is a template, and its lambdas must
// not capture types of this file's anonymous namespace.
void acquire_and_release_on(std::size_t n) {
  redis_fleet fleet(n);
  inspector nodes(fleet);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    BOOST_TEST(locks.size() == n);
    BOOST_TEST(locks.quorum() == n / 2 + 1);

    const auto ttl = 5000ms;
    const auto before = steady_clock::now();
    auto [ec, lease] = co_await locks.async_acquire("basic", lock_for(ttl), tuple_awaitable);
    const auto after = steady_clock::now();
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(lease.held());
    BOOST_TEST(lease.resource() == "basic");
    BOOST_TEST(is_hex_token(lease.token()), "token " << lease.token());
    BOOST_TEST(lease.diagnostics().empty());
    BOOST_TEST((lease.valid_until() > after));
    BOOST_TEST((lease.valid_until() <= before + ttl));

    BOOST_TEST(nodes.holding("basic", lease.token()) >= locks.quorum());
    for (std::size_t i = 0; i < n; ++i) {
      if (nodes.get(i, "basic")) {
        const auto pttl = nodes.pttl(i, "basic");
        BOOST_TEST(pttl > 0, "node " << i);
        BOOST_TEST(pttl <= ttl.count(), "node " << i);
      }
    }

    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
    BOOST_TEST(!lease.held());
    BOOST_TEST(co_await gone_everywhere(nodes, "basic"));

    // A second release finds nothing of ours.
    std::tie(release_ec) = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(release_ec == error::not_held);

    // Every acquire draws a fresh token.
    auto [again_ec, again] = co_await locks.async_acquire("basic", lock_for(ttl), tuple_awaitable);
    BOOST_TEST_REQUIRE(!again_ec, again_ec.message());
    BOOST_TEST(is_hex_token(again.token()));
    BOOST_TEST(again.token() != lease.token());
    std::tie(release_ec) = co_await again.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lock)

BOOST_DATA_TEST_CASE(acquire_and_release_on_n_nodes, bdata::make({1, 3, 5, 7}), node_count) {
  acquire_and_release_on(static_cast<std::size_t>(node_count));
}

BOOST_FIXTURE_TEST_CASE(mutual_exclusion_between_two_clients, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client first(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client second(io.get_executor(), fleet.configs(), fast_client_options());
    constexpr int workers_per_client = 6;
    constexpr int rounds = 8;
    const auto options = lock_for(5000ms);

    int counter = 0;  // deliberately non-atomic and read-modify-written across a suspension
    bool inside = false;
    int overlaps = 0;
    int errors = 0;
    int running = 0;
    auto worker = [&](redlock::client& locks) -> asio::awaitable<void> {
      for (int i = 0; i < rounds; ++i) {
        auto [ec, lease] = co_await locks.async_acquire("counter", options, tuple_awaitable);
        if (ec) {
          ++errors;
          BOOST_TEST_MESSAGE("acquire: " << ec.message() << ": " << lease.diagnostics());
          continue;
        }
        overlaps += inside ? 1 : 0;
        inside = true;
        const int seen = counter;
        co_await sleep_for(1ms);  // lets every other coroutine run between the read and the write
        counter = seen + 1;
        inside = false;
        auto [release_ec] = co_await lease.async_release(tuple_awaitable);
        errors += release_ec ? 1 : 0;
      }
      --running;
    };
    for (int w = 0; w < workers_per_client; ++w) {
      running += 2;
      asio::co_spawn(io, worker(first), asio::detached);
      asio::co_spawn(io, worker(second), asio::detached);
    }
    const bool finished = co_await eventually([&] { return running == 0; }, 45000ms);
    BOOST_TEST_REQUIRE(finished, running << " workers still running");
    BOOST_TEST(errors == 0);
    BOOST_TEST(overlaps == 0);
    BOOST_TEST(counter == 2 * workers_per_client * rounds);
    BOOST_TEST(co_await gone_everywhere(nodes, "counter"));
  });
}

BOOST_FIXTURE_TEST_CASE(try_acquire_reports_contention, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client owner(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client rival(io.get_executor(), fleet.configs(), fast_client_options());
    const auto options = lock_for(10000ms);

    auto [ec, held] = co_await owner.async_acquire("contended", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    BOOST_TEST(co_await settled_everywhere(nodes, "contended", held.token()));

    // Another client.
    auto [rival_ec, rival_lease] =
        co_await rival.async_try_acquire("contended", options, tuple_awaitable);
    BOOST_TEST(rival_ec == error::contended, rival_ec.message());
    BOOST_TEST(!rival_lease.held());
    BOOST_TEST(!rival_lease.diagnostics().empty());
    BOOST_TEST_MESSAGE("rival diagnostics: " << rival_lease.diagnostics());
    // The failed round cleaned up only its own token: the owner's key is intact everywhere.
    BOOST_TEST(nodes.holding("contended", held.token()) == 5u);

    // The same client: decided locally, without a network round.
    const auto start = steady_clock::now();
    auto [same_ec, same_lease] =
        co_await owner.async_try_acquire("contended", options, tuple_awaitable);
    BOOST_TEST(same_ec == error::contended, same_ec.message());
    BOOST_TEST(ms_since(start) < 200);
    BOOST_TEST(!same_lease.held());
    // Neither text may blame another owner: the holder is this very client.
    BOOST_TEST(same_lease.diagnostics().find("another lease of this client") != std::string::npos,
               same_lease.diagnostics());
    BOOST_TEST(same_ec.message().find("another owner") == std::string::npos, same_ec.message());
    BOOST_TEST(held.held());

    // Waiting for it with a deadline gives up with wait_timeout.
    auto bounded = options;
    bounded.wait = 200ms;
    const auto wait_start = steady_clock::now();
    auto [wait_ec, wait_lease] =
        co_await rival.async_acquire("contended", bounded, tuple_awaitable);
    BOOST_TEST(wait_ec == error::wait_timeout, wait_ec.message());
    BOOST_TEST(ms_since(wait_start) >= 150);
    BOOST_TEST(ms_since(wait_start) < 3000);
    BOOST_TEST(nodes.holding("contended", held.token()) == 5u);

    auto [release_ec] = co_await held.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    auto [free_ec, free_lease] =
        co_await rival.async_try_acquire("contended", options, tuple_awaitable);
    BOOST_TEST(!free_ec, free_ec.message());
    BOOST_TEST(free_lease.held());
    std::tie(release_ec) = co_await free_lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
  });
}

BOOST_FIXTURE_TEST_CASE(local_waiters_are_served_in_fifo_order, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    const auto options = lock_for(10000ms);
    auto [ec, first] = co_await locks.async_acquire("fifo", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec);

    std::vector<int> asked;
    std::vector<int> served;
    int errors = 0;
    int done = 0;
    for (int i = 0; i < 5; ++i) {
      asio::co_spawn(
          io,
          [&, i]() -> asio::awaitable<void> {
            asked.push_back(i);
            auto [acquire_ec, lease] =
                co_await locks.async_acquire("fifo", options, tuple_awaitable);
            if (acquire_ec) {
              ++errors;
            } else {
              served.push_back(i);
              co_await sleep_for(5ms);
              auto [release_ec] = co_await lease.async_release(tuple_awaitable);
              errors += release_ec ? 1 : 0;
            }
            ++done;
          },
          asio::detached);
    }
    co_await sleep_for(100ms);
    BOOST_TEST(asked.size() == 5u);
    BOOST_TEST(served.empty());

    auto [release_ec] = co_await first.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    const bool finished = co_await eventually([&] { return done == 5; }, 10000ms);
    BOOST_TEST_REQUIRE(finished);
    BOOST_TEST(errors == 0);
    BOOST_TEST(served == asked, boost::test_tools::per_element());
    BOOST_TEST(co_await gone_everywhere(nodes, "fifo"));
  });
}

BOOST_FIXTURE_TEST_CASE(minority_down_still_acquires_majority_down_fails,
                        redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    co_await warm_up(locks);

    fleet[3].kill9();
    fleet[4].kill9();
    auto options = lock_for(10000ms);
    options.wait = 5000ms;
    auto [ec, lease] = co_await locks.async_acquire("survivor", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(lease.held());
    BOOST_TEST(nodes.holding("survivor", lease.token()) == 3u);
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
    BOOST_TEST(co_await gone_everywhere(nodes, "survivor"));

    fleet[2].kill9();
    const auto start = steady_clock::now();
    auto [try_ec, try_lease] = co_await locks.async_try_acquire("lonely", options, tuple_awaitable);
    const auto took = ms_since(start);
    BOOST_TEST(try_ec == error::no_quorum, try_ec.message());
    BOOST_TEST(took < 2000);
    BOOST_TEST(!try_lease.held());
    BOOST_TEST(!try_lease.diagnostics().empty());
    BOOST_TEST_MESSAGE("no_quorum after " << took << " ms: " << try_lease.diagnostics());

    auto bounded = options;
    bounded.wait = 300ms;
    const auto wait_start = steady_clock::now();
    auto [wait_ec, wait_lease] = co_await locks.async_acquire("lonely", bounded, tuple_awaitable);
    const auto waited = ms_since(wait_start);
    BOOST_TEST(wait_ec == error::wait_timeout, wait_ec.message());
    BOOST_TEST(waited >= 250);
    BOOST_TEST(waited < 3000);
    BOOST_TEST(!wait_lease.held());

    // The partial grants of the failed rounds were taken back on the two live nodes.
    const bool cleaned = co_await eventually([&] { return nodes.present("lonely") == 0; }, 2000ms);
    BOOST_TEST(cleaned);
  });
}

BOOST_FIXTURE_TEST_CASE(mutex_lock_try_lock_unlock, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client elsewhere(io.get_executor(), fleet.configs(), fast_client_options());
    const auto options = lock_for(5000ms);
    redlock::mutex mine(locks, "mtx", options);
    redlock::mutex same_client(locks, "mtx", options);
    redlock::mutex other_client(elsewhere, "mtx", options);
    BOOST_TEST(!mine.owns_lock());

    auto [ec] = co_await mine.async_lock(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    BOOST_TEST(mine.owns_lock());
    BOOST_TEST(nodes.holding("mtx", mine.current_lease().token()) >= 3u);

    auto [try_ec, locked] = co_await same_client.async_try_lock(tuple_awaitable);
    BOOST_TEST(!try_ec, try_ec.message());
    BOOST_TEST(!locked);
    BOOST_TEST(!same_client.owns_lock());
    std::tie(try_ec, locked) = co_await other_client.async_try_lock(tuple_awaitable);
    BOOST_TEST(!try_ec, try_ec.message());
    BOOST_TEST(!locked);
    BOOST_TEST(!other_client.owns_lock());

    // Locking a mutex that is already owned is a usage error, and leaves the lock alone.
    std::tie(ec) = co_await mine.async_lock(tuple_awaitable);
    BOOST_TEST(ec == error::invalid_argument, ec.message());
    BOOST_TEST(mine.owns_lock());

    std::tie(ec) = co_await mine.async_unlock(tuple_awaitable);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(!mine.owns_lock());
    BOOST_TEST(co_await gone_everywhere(nodes, "mtx"));
    std::tie(ec) = co_await mine.async_unlock(tuple_awaitable);
    BOOST_TEST(ec == error::not_held, ec.message());

    std::tie(try_ec, locked) = co_await other_client.async_try_lock(tuple_awaitable);
    BOOST_TEST(!try_ec);
    BOOST_TEST(locked);
    BOOST_TEST(other_client.owns_lock());
    std::tie(ec) = co_await other_client.async_unlock(tuple_awaitable);
    BOOST_TEST(!ec);
    BOOST_TEST(co_await gone_everywhere(nodes, "mtx"));
  });
}

BOOST_FIXTURE_TEST_CASE(validity_shrinks_with_network_latency, redlock::test::five_nodes) {
  std::vector<std::unique_ptr<redlock::test::chaos_proxy>> proxies;
  std::vector<redlock::node_config> via_proxies;
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    proxies.push_back(std::make_unique<redlock::test::chaos_proxy>(fleet[i].port()));
    via_proxies.push_back(proxies.back()->config());
  }
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), via_proxies, fast_client_options(500ms));
    co_await warm_up(locks);  // connects and handshakes must not count in the measurement

    const auto ttl = 2000ms;
    const long long drift = 2000 / 100 + 2;  // ttl * 0.01 + 2 ms
    struct measure {
      long long from_start;  // valid_until - when we asked
      long long remaining;   // valid_until - when the lease was handed to us
    };
    auto measure_once = [&]() -> asio::awaitable<measure> {
      const auto start = steady_clock::now();
      auto [ec, lease] = co_await locks.async_acquire("latency", lock_for(ttl), tuple_awaitable);
      const auto done = steady_clock::now();
      BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
      const measure m{ms_between(start, lease.valid_until()),
                      ms_between(done, lease.valid_until())};
      auto [release_ec] = co_await lease.async_release(tuple_awaitable);
      BOOST_TEST(!release_ec);
      co_return m;
    };

    const measure direct = co_await measure_once();
    for (auto& proxy : proxies) {
      proxy->set_latency(60ms);
    }
    const measure delayed = co_await measure_once();
    BOOST_TEST_MESSAGE("validity from start/remaining: direct "
                       << direct.from_start << "/" << direct.remaining << " ms, 60 ms "
                       << delayed.from_start << "/" << delayed.remaining << " ms");
    // Validity is counted from before the first SET went out, minus the drift allowance; the
    // library reads its clock a moment after we do (slack for a preempted thread).
    const long long slack = 10;
    BOOST_TEST(direct.from_start <= ttl.count() - drift + slack);
    BOOST_TEST(direct.from_start >= ttl.count() - drift - 200);
    BOOST_TEST(delayed.from_start <= ttl.count() - drift + slack);
    // What is left when the lease arrives pays for the round trip (2 x 60 ms here).
    BOOST_TEST(delayed.remaining <= direct.remaining - 50);
    BOOST_TEST(delayed.remaining > 0);
    BOOST_TEST(co_await gone_everywhere(nodes, "latency"));
  });
}

BOOST_FIXTURE_TEST_CASE(invalid_arguments_are_rejected, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());

    struct bad_case {
      const char* what;
      std::string resource;
      redlock::lock_options options;
    };
    std::vector<bad_case> cases;
    cases.push_back({"empty resource", "", lock_for(1000ms)});
    cases.push_back({"ttl 0", "bad", lock_for(0ms)});
    cases.push_back({"ttl 1 ms (below the drift allowance)", "bad", lock_for(1ms)});
    cases.push_back({"negative ttl", "bad", lock_for(-5ms)});
    cases.push_back({"negative max_hold", "bad", lock_for(1000ms)});
    cases.back().options.max_hold = -1ms;
    for (const auto& c : cases) {
      BOOST_TEST_CONTEXT(c.what) {
        auto [ec, lease] = co_await locks.async_try_acquire(c.resource, c.options, tuple_awaitable);
        BOOST_TEST(ec == error::invalid_argument, ec.message());
        BOOST_TEST(!lease.held());
        BOOST_TEST(!lease.diagnostics().empty());
        auto [wait_ec, wait_lease] =
            co_await locks.async_acquire(c.resource, c.options, tuple_awaitable);
        BOOST_TEST(wait_ec == error::invalid_argument, wait_ec.message());
        BOOST_TEST(!wait_lease.held());
        BOOST_TEST(!wait_lease.diagnostics().empty());
      }
    }
    BOOST_TEST(nodes.total_keys() == 0);

    // Extending by a ttl within the drift allowance is refused too, and the lock stays.
    auto [ec, lease] = co_await locks.async_acquire("good", lock_for(5000ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec);
    auto [extend_ec] = co_await lease.async_extend(1ms, tuple_awaitable);
    BOOST_TEST(extend_ec == error::invalid_argument, extend_ec.message());
    BOOST_TEST(lease.held());
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
  });
}

BOOST_AUTO_TEST_SUITE_END()

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
