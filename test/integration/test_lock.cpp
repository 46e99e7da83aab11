// The lock core (client, lease, mutex, with_lock) against real redis-server processes. What the
// library claims is checked on the servers themselves, through blocking clients that are
// independent of the library.

// GCC 12 at -O3 reports a false -Wrestrict (a __builtin_memcpy of 2^63 bytes that "may overlap")
// in std::string's _M_replace, inlined into `"literal" + std::string` (GCC bugs 105329 and
// 105651), which -Werror turns into a failed Release build. Ignored for this file's code only;
// set before the includes, since Boost.Test's BOOST_DATA_TEST_CASE name builder meets it too.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/inspector.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace bdata = boost::unit_test::data;
using namespace std::chrono_literals;
using boost::system::error_code;
using redlock::error;
using redlock::test::eventually;
using redlock::test::eventually_blocking;
using redlock::test::fast_client_options;
using redlock::test::inspector;
using redlock::test::ms_between;
using redlock::test::ms_since;
using redlock::test::node_range;
using redlock::test::redis_fleet;
using redlock::test::run_async;
using redlock::test::sleep_for;
using redlock::test::sync_client;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

using redlock::test::tuple_awaitable;

using redlock::test::lock_for;

bool is_hex_token(const std::string& token) {
  return token.size() == 40 &&
         token.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

// Polls `done()` every 10 ms for at most `limit`. The predicate may block briefly (sync_client).
// Opens the connection to every node before a test pauses some of them: a PING round answered by
// a quorum, then a moment for the slower connects to finish.
asio::awaitable<void> warm_up(redlock::client& locks) {
  for (int i = 0; i < 3; ++i) {
    auto [ec] = co_await locks.async_ping(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, "ping: " << ec.message());
    co_await sleep_for(50ms);
  }
}

// An acquire is decided as soon as a quorum granted it; the other SETs are still on their way (a
// fresh client may still be connecting to some nodes). Waits until every running node holds it.
asio::awaitable<bool> settled_everywhere(inspector& nodes, std::string key, std::string token) {
  co_return co_await eventually([&] { return nodes.holding(key, token) == nodes.running().size(); },
                                3000ms);
}

// A release completes once a quorum answered; the remaining DELs may still be on their way.
asio::awaitable<bool> gone_everywhere(inspector& nodes, std::string key) {
  co_return co_await eventually([&] { return nodes.present(key) == 0; }, 2000ms);
}

asio::awaitable<bool> no_keys_anywhere(inspector& nodes) {
  co_return co_await eventually([&] { return nodes.total_keys() == 0; }, 2000ms);
}

// Remembers how an operation completed, and how often (it must be exactly once).
struct acquire_outcome {
  int completions = 0;
  error_code ec;
  redlock::lease lease;
  steady_clock::time_point at;
};

auto record(acquire_outcome& out) {
  return [&out](error_code ec, redlock::lease lease) {
    ++out.completions;
    out.ec = ec;
    out.lease = std::move(lease);
    out.at = steady_clock::now();
  };
}

struct void_outcome {
  int completions = 0;
  error_code ec;
  steady_clock::time_point at;
};

auto record(void_outcome& out) {
  return [&out](error_code ec) {
    ++out.completions;
    out.ec = ec;
    out.at = steady_clock::now();
  };
}

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
    BOOST_TEST(!same_lease.diagnostics().empty());
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

BOOST_FIXTURE_TEST_CASE(renewal_keeps_the_lock_past_its_ttl, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    co_await warm_up(locks);  // every node gets the SET at once, so every node is sampled from t0
    const auto ttl = 500ms;
    auto [ec, lease] = co_await locks.async_acquire("renewed", lock_for(ttl), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    BOOST_TEST_REQUIRE(co_await settled_everywhere(nodes, "renewed", lease.token()));
    void_outcome lost;
    lease.async_wait_lost(record(lost));

    std::array<std::vector<long long>, 5> samples;
    bool always_held = true;
    const auto until = steady_clock::now() + 3 * ttl;
    while (steady_clock::now() < until) {
      always_held = always_held && lease.held();
      for (std::size_t i = 0; i < 5; ++i) {
        samples[i].push_back(nodes.pttl(i, "renewed"));
      }
      co_await sleep_for(30ms);
    }
    BOOST_TEST(always_held);
    BOOST_TEST(lost.completions == 0);
    for (std::size_t i = 0; i < 5; ++i) {
      int refreshed = 0;
      long long lowest = ttl.count();
      long long highest = 0;
      for (std::size_t s = 0; s < samples[i].size(); ++s) {
        lowest = std::min(lowest, samples[i][s]);
        highest = std::max(highest, samples[i][s]);
        if (s > 0 && samples[i][s] > samples[i][s - 1]) ++refreshed;
      }
      // Renewal at half-life over three TTLs: about five extensions; ask for three.
      BOOST_TEST(refreshed >= 3, "node " << i << " refreshed " << refreshed << " times");
      BOOST_TEST(lowest > 0, "node " << i << ": key missing or without TTL");
      BOOST_TEST(highest <= ttl.count(), "node " << i);
    }

    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    BOOST_TEST(!lease.held());
    BOOST_TEST(co_await gone_everywhere(nodes, "renewed"));
    const bool lost_done = co_await eventually([&] { return lost.completions == 1; }, 1000ms);
    BOOST_TEST(lost_done);
    BOOST_TEST(lost.ec == asio::error::operation_aborted, lost.ec.message());

    // Renewal has stopped: nothing brings the key back.
    co_await sleep_for(1000ms);
    BOOST_TEST(nodes.present("renewed") == 0u);
    BOOST_TEST(lost.completions == 1);
  });
}

BOOST_FIXTURE_TEST_CASE(max_hold_ends_renewal, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    auto options = lock_for(300ms);
    options.max_hold = 700ms;
    const auto start = steady_clock::now();
    auto [ec, lease] = co_await locks.async_acquire("bounded", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());

    auto [lost_ec] = co_await lease.async_wait_lost(tuple_awaitable);
    const auto lost_after = ms_since(start);
    BOOST_TEST(lost_ec == error::lock_lost, lost_ec.message());
    BOOST_TEST_MESSAGE("lost after " << lost_after << " ms");
    // Renewal runs at half-life, so a library that skips the renewal that would pass max_hold loses
    // the lock up to half a TTL early (~595 ms); at the latest it lapses one TTL after max_hold.
    BOOST_TEST(lost_after >= 550);
    BOOST_TEST(lost_after <= 700 + 300 + 700);
    BOOST_TEST(!lease.held());
    const bool gone = co_await eventually([&] { return nodes.present("bounded") == 0; }, 1500ms);
    BOOST_TEST(gone);
  });
}

BOOST_AUTO_TEST_CASE(lock_lost_when_majority_dies_while_held) {
  redis_fleet fleet(5);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    const auto ttl = 600ms;
    auto [ec, lease] = co_await locks.async_acquire("fragile", lock_for(ttl), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    void_outcome lost;
    lease.async_wait_lost(record(lost));

    const auto killed_at = steady_clock::now();
    fleet[0].kill9();
    fleet[1].kill9();
    fleet[2].kill9();
    const bool done = co_await eventually([&] { return lost.completions > 0; }, ttl + 3000ms);
    BOOST_TEST_REQUIRE(done);
    BOOST_TEST(lost.ec == error::lock_lost, lost.ec.message());
    const auto after = ms_between(killed_at, lost.at);
    BOOST_TEST_MESSAGE("lost " << after << " ms after the kill");
    BOOST_TEST(after <= ttl.count() + 1000);
    BOOST_TEST(!lease.held());
    co_await sleep_for(100ms);
    BOOST_TEST(lost.completions == 1);
  });
}

BOOST_FIXTURE_TEST_CASE(renewal_never_touches_a_foreign_key, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    auto [ec, lease] = co_await locks.async_acquire("stolen", lock_for(600ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    const std::string ours = lease.token();

    // Someone else takes the key over on a majority (as after an expiry and a rival's acquire).
    for (std::size_t i = 0; i < 3; ++i) {
      nodes.set(i, "stolen", "someone-else", 5000ms);
    }
    auto [lost_ec] = co_await lease.async_wait_lost(tuple_awaitable);
    BOOST_TEST(lost_ec == error::lock_lost, lost_ec.message());
    BOOST_TEST(!lease.held());

    co_await sleep_for(300ms);  // any late renewal would have landed by now
    for (std::size_t i = 0; i < 3; ++i) {
      BOOST_TEST(nodes.get(i, "stolen").value_or("<none>") == "someone-else", "node " << i);
      const auto pttl = nodes.pttl(i, "stolen");
      // About 5000 minus the time since the overwrite; a renewal would have made it ~600.
      BOOST_TEST(pttl > 2500, "node " << i << " pttl " << pttl);
    }
    for (std::size_t i = 3; i < 5; ++i) {
      const auto value = nodes.get(i, "stolen");
      BOOST_TEST((!value || *value == ours), "node " << i << " holds " << value.value_or(""));
    }
  });
}

BOOST_FIXTURE_TEST_CASE(with_lock_returns_the_body_value_and_releases, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    std::size_t holding_inside = 0;
    const int value = co_await redlock::with_lock(
        locks, "scoped", lock_for(5000ms), [&](redlock::lease& lease) -> asio::awaitable<int> {
          holding_inside = nodes.holding("scoped", lease.token());
          co_await sleep_for(10ms);
          co_return 42;
        });
    BOOST_TEST(value == 42);
    BOOST_TEST(holding_inside >= 3u);
    BOOST_TEST(co_await gone_everywhere(nodes, "scoped"));
  });
}

BOOST_FIXTURE_TEST_CASE(with_lock_propagates_the_body_exception_and_releases,
                        redlock::test::five_nodes) {
  run_async(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
        std::size_t holding_inside = 0;
        std::string caught;
        try {
          co_await redlock::with_lock(locks, "throwing", lock_for(5000ms),
                                      [&](redlock::lease& lease) -> asio::awaitable<void> {
                                        holding_inside = nodes.holding("throwing", lease.token());
                                        co_await sleep_for(10ms);
                                        throw std::logic_error("boom");
                                      });
        } catch (const std::logic_error& e) {
          caught = e.what();
        }
        BOOST_TEST(caught == "boom");
        BOOST_TEST(holding_inside >= 3u);
        BOOST_TEST(co_await gone_everywhere(nodes, "throwing"));
      },
      20s);  // a with_lock that waits for the lease instead of the body would hang
}

BOOST_AUTO_TEST_CASE(with_lock_cancels_the_body_when_the_lock_is_lost) {
  redis_fleet fleet(5);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(100ms));
    bool started = false;
    bool finished = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await eventually([&] { return started; }, 10000ms);
          co_await sleep_for(100ms);
          fleet[0].kill9();
          fleet[1].kill9();
          fleet[2].kill9();
        },
        asio::detached);

    const auto start = steady_clock::now();
    error_code thrown;
    try {
      co_await redlock::with_lock(locks, "doomed", lock_for(600ms),
                                  [&](redlock::lease&) -> asio::awaitable<void> {
                                    started = true;
                                    co_await sleep_for(10s);
                                    finished = true;
                                  });
    } catch (const boost::system::system_error& e) {
      thrown = e.code();
    }
    const auto took = ms_since(start);
    BOOST_TEST(started);
    BOOST_TEST(!finished);
    BOOST_TEST(thrown == error::lock_lost, thrown.message());
    BOOST_TEST(took < 5000, "with_lock took " << took << " ms");
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

BOOST_FIXTURE_TEST_CASE(cancel_acquire_after_k_grants, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    // Paused nodes must not time out before the cancellation does.
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options(2000ms));
    co_await warm_up(locks);

    struct variant {
      std::size_t grants;
      asio::cancellation_type type;
      const char* type_name;
    };
    const variant variants[] = {{0, asio::cancellation_type::terminal, "terminal"},
                                {1, asio::cancellation_type::terminal, "terminal"},
                                {2, asio::cancellation_type::terminal, "terminal"},
                                {2, asio::cancellation_type::partial, "partial"}};
    int round = 0;
    for (const auto& v : variants) {
      const std::string resource = fmt::format("cancel:{}", round++);
      BOOST_TEST_CONTEXT("grants " << v.grants << ", " << v.type_name << " cancellation") {
        for (std::size_t i = v.grants; i < 5; ++i) {
          fleet[i].pause();
        }
        asio::cancellation_signal signal;
        acquire_outcome out;
        locks.async_acquire(resource, lock_for(30000ms),
                            asio::bind_cancellation_slot(signal.slot(), record(out)));
        const auto granting = node_range(0, v.grants);
        if (v.grants > 0) {
          const bool seen = co_await eventually(
              [&] { return nodes.present_on(granting, resource) == v.grants; }, 3000ms);
          BOOST_TEST(seen);
        } else {
          co_await sleep_for(50ms);
        }
        BOOST_TEST(out.completions == 0);

        const auto emitted = steady_clock::now();
        signal.emit(v.type);
        const bool completed = co_await eventually([&] { return out.completions > 0; }, 3000ms);
        BOOST_TEST(completed);
        BOOST_TEST(ms_between(emitted, out.at) < 1000);
        BOOST_TEST(out.ec == asio::error::operation_aborted, out.ec.message());
        BOOST_TEST(!out.lease.held());

        for (std::size_t i = v.grants; i < 5; ++i) {
          fleet[i].resume();
        }
        // The stopped nodes now run the SET they had buffered, and then the release queued behind
        // it on the same connection.
        const auto resumed = steady_clock::now();
        const bool cleaned = co_await eventually([&] { return nodes.total_keys() == 0; }, 2000ms);
        BOOST_TEST(cleaned, nodes.total_keys() << " keys left");
        BOOST_TEST_MESSAGE("clean " << ms_since(resumed) << " ms after resuming");
        co_await sleep_for(200ms);
        BOOST_TEST(nodes.total_keys() == 0);
        BOOST_TEST(out.completions == 1);
      }
    }
  });
}

BOOST_FIXTURE_TEST_CASE(cancel_in_the_initiating_turn, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    co_await warm_up(locks);
    for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
      asio::cancellation_signal signal;
      acquire_outcome out;
      locks.async_acquire("instant", lock_for(30000ms),
                          asio::bind_cancellation_slot(signal.slot(), record(out)));
      signal.emit(type);
      const bool completed = co_await eventually([&] { return out.completions > 0; }, 2000ms);
      BOOST_TEST(completed);
      BOOST_TEST(out.ec == asio::error::operation_aborted, out.ec.message());
      BOOST_TEST(!out.lease.held());
      const bool cleaned = co_await eventually([&] { return nodes.total_keys() == 0; }, 2000ms);
      BOOST_TEST(cleaned);
      co_await sleep_for(200ms);
      BOOST_TEST(nodes.total_keys() == 0);
      BOOST_TEST(out.completions == 1);
    }
  });
}

BOOST_FIXTURE_TEST_CASE(cancel_while_queued_behind_a_local_holder, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    const auto options = lock_for(30000ms);
    auto [ec, holder] = co_await locks.async_acquire("queued", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec);
    BOOST_TEST(co_await settled_everywhere(nodes, "queued", holder.token()));

    asio::cancellation_signal signal;
    acquire_outcome out;
    locks.async_acquire("queued", options,
                        asio::bind_cancellation_slot(signal.slot(), record(out)));
    co_await sleep_for(50ms);
    BOOST_TEST(out.completions == 0);
    signal.emit(asio::cancellation_type::total);
    const bool completed = co_await eventually([&] { return out.completions > 0; }, 1000ms);
    BOOST_TEST(completed);
    BOOST_TEST(out.ec == asio::error::operation_aborted, out.ec.message());
    BOOST_TEST(!out.lease.held());
    BOOST_TEST(nodes.holding("queued", holder.token()) == 5u);

    // The cancelled waiter must not take the lock when the holder lets go.
    auto [release_ec] = co_await holder.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    co_await sleep_for(200ms);
    BOOST_TEST(nodes.total_keys() == 0);
    BOOST_TEST(out.completions == 1);

    // The queue is usable afterwards.
    auto [again_ec, again] = co_await locks.async_try_acquire("queued", options, tuple_awaitable);
    BOOST_TEST(!again_ec, again_ec.message());
    std::tie(release_ec) = co_await again.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    BOOST_TEST(co_await no_keys_anywhere(nodes));
  });
}

BOOST_FIXTURE_TEST_CASE(cancel_during_backoff, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client owner(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, held] = co_await owner.async_acquire("busy", lock_for(30000ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec);
    BOOST_TEST(co_await settled_everywhere(nodes, "busy", held.token()));

    // Long pauses between short rounds: the waiter spends nearly all its time backing off.
    auto options = lock_for(30000ms);
    options.retry = {300ms, 300ms, 1.0};
    asio::cancellation_signal signal;
    acquire_outcome out;
    waiter.async_acquire("busy", options, asio::bind_cancellation_slot(signal.slot(), record(out)));
    co_await sleep_for(100ms);
    BOOST_TEST(out.completions == 0);

    // Total cancellation is only honoured between rounds; one that lands in a round is ignored by
    // contract, so it is repeated until it lands in a pause.
    const auto emitted = steady_clock::now();
    int emissions = 0;
    while (out.completions == 0 && emissions < 100) {
      signal.emit(asio::cancellation_type::total);
      ++emissions;
      co_await sleep_for(20ms);
    }
    BOOST_TEST(out.completions == 1);
    BOOST_TEST(ms_since(emitted) < 2000);
    BOOST_TEST_MESSAGE("completed after " << emissions << " emission(s)");
    BOOST_TEST(out.ec == asio::error::operation_aborted, out.ec.message());
    BOOST_TEST(!out.lease.held());
    BOOST_TEST(nodes.holding("busy", held.token()) == 5u);

    auto [release_ec] = co_await held.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    co_await sleep_for(700ms);  // longer than a backoff pause: a still-running waiter would show
    BOOST_TEST(nodes.total_keys() == 0);
    BOOST_TEST(out.completions == 1);
  });
}

BOOST_FIXTURE_TEST_CASE(destroying_the_client_aborts_what_is_in_flight, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client owner(io.get_executor(), fleet.configs(), fast_client_options());
    auto [ec, foreign] = co_await owner.async_acquire("taken", lock_for(30000ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec);
    BOOST_TEST(co_await settled_everywhere(nodes, "taken", foreign.token()));

    auto doomed = std::make_unique<redlock::client>(io.get_executor(), fleet.configs(),
                                                    fast_client_options());
    auto [mine_ec, mine] =
        co_await doomed->async_acquire("mine", lock_for(30000ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!mine_ec);
    BOOST_TEST(co_await settled_everywhere(nodes, "mine", mine.token()));
    void_outcome lost;
    mine.async_wait_lost(record(lost));
    // One waiter contends over the network, the other queues behind it locally.
    acquire_outcome first;
    acquire_outcome second;
    doomed->async_acquire("taken", lock_for(30000ms), record(first));
    doomed->async_acquire("taken", lock_for(30000ms), record(second));
    co_await sleep_for(100ms);
    BOOST_TEST(first.completions + second.completions + lost.completions == 0);

    doomed.reset();
    const bool completed = co_await eventually(
        [&] { return first.completions > 0 && second.completions > 0 && lost.completions > 0; },
        2000ms);
    BOOST_TEST_REQUIRE(completed);
    BOOST_TEST(first.ec == asio::error::operation_aborted, first.ec.message());
    BOOST_TEST(second.ec == asio::error::operation_aborted, second.ec.message());
    BOOST_TEST(lost.ec == asio::error::operation_aborted, lost.ec.message());
    BOOST_TEST(!first.lease.held());
    BOOST_TEST(!second.lease.held());
    BOOST_TEST(!mine.held());

    const bool released = co_await eventually([&] { return nodes.present("mine") == 0; }, 1500ms);
    BOOST_TEST(released, nodes.present("mine") << " nodes still hold the released lease's key");
    BOOST_TEST(nodes.holding("taken", foreign.token()) == 5u);

    // The orphaned lease still answers, once, without touching freed state.
    auto [late_ec] = co_await mine.async_release(tuple_awaitable);
    BOOST_TEST((late_ec == asio::error::operation_aborted || late_ec == error::not_held),
               late_ec.message());
    co_await sleep_for(100ms);
    BOOST_TEST(first.completions == 1);
    BOOST_TEST(second.completions == 1);
    BOOST_TEST(lost.completions == 1);

    auto [release_ec] = co_await foreign.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    BOOST_TEST(co_await no_keys_anywhere(nodes));
  });
}

BOOST_FIXTURE_TEST_CASE(completion_tokens_on_one_thread, redlock::test::five_nodes) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client rival(io.get_executor(), fleet.configs(), fast_client_options());
    const auto options = lock_for(10000ms);

    // use_awaitable: the value directly, errors as exceptions.
    redlock::lease awaited =
        co_await locks.async_acquire("tok:awaitable", options, asio::use_awaitable);
    BOOST_TEST(awaited.held());
    error_code thrown;
    try {
      co_await rival.async_try_acquire("tok:awaitable", options, asio::use_awaitable);
    } catch (const boost::system::system_error& e) {
      thrown = e.code();
    }
    BOOST_TEST(thrown == error::contended, thrown.message());
    co_await awaited.async_release(asio::use_awaitable);
    BOOST_TEST(!awaited.held());
    BOOST_TEST(co_await gone_everywhere(nodes, "tok:awaitable"));

    // as_tuple
    auto [ec, tupled] = co_await locks.async_acquire("tok:tuple", options, tuple_awaitable);
    BOOST_TEST(!ec);
    BOOST_TEST(tupled.held());
    auto [release_ec] = co_await tupled.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec);
    BOOST_TEST(co_await gone_everywhere(nodes, "tok:tuple"));

    // deferred: nothing is sent until the operation is invoked.
    auto deferred_acquire = locks.async_acquire("tok:deferred", options, asio::deferred);
    co_await sleep_for(50ms);
    BOOST_TEST(nodes.present("tok:deferred") == 0u);
    acquire_outcome from_deferred;
    std::move(deferred_acquire)(record(from_deferred));
    bool done = co_await eventually([&] { return from_deferred.completions > 0; }, 5000ms);
    BOOST_TEST_REQUIRE(done);
    BOOST_TEST(!from_deferred.ec);
    BOOST_TEST(nodes.holding("tok:deferred", from_deferred.lease.token()) >= 3u);
    auto deferred_release = from_deferred.lease.async_release(asio::deferred);
    co_await sleep_for(50ms);
    BOOST_TEST(nodes.present("tok:deferred") >= 3u);
    void_outcome deferred_released;
    std::move(deferred_release)(record(deferred_released));
    done = co_await eventually([&] { return deferred_released.completions > 0; }, 5000ms);
    BOOST_TEST(done);
    BOOST_TEST(!deferred_released.ec);
    BOOST_TEST(co_await gone_everywhere(nodes, "tok:deferred"));

    // plain callbacks
    acquire_outcome from_callback;
    locks.async_acquire("tok:callback", options, record(from_callback));
    done = co_await eventually([&] { return from_callback.completions > 0; }, 5000ms);
    BOOST_TEST_REQUIRE(done);
    BOOST_TEST(!from_callback.ec);
    BOOST_TEST(from_callback.lease.held());
    void_outcome callback_released;
    from_callback.lease.async_release(record(callback_released));
    done = co_await eventually([&] { return callback_released.completions > 0; }, 5000ms);
    BOOST_TEST(done);
    BOOST_TEST(!callback_released.ec);
    BOOST_TEST(co_await gone_everywhere(nodes, "tok:callback"));
    co_await sleep_for(50ms);
    BOOST_TEST(from_callback.completions == 1);
    BOOST_TEST(callback_released.completions == 1);
  });
}

BOOST_AUTO_TEST_CASE(completion_token_use_future_from_another_thread,
                     *boost::unit_test::label("threaded")) {
  redis_fleet fleet(5);
  inspector nodes(fleet);
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  // Joins the runner whatever the assertions below do.
  struct joiner {
    asio::executor_work_guard<asio::io_context::executor_type>& work;
    std::thread& thread;
    asio::io_context& io;
    ~joiner() {
      work.reset();
      io.stop();
      thread.join();
    }
  } join_at_exit{work, runner, io};

  // The client and its leases belong to the io thread: every member call is made there, and only
  // the futures are waited for here.
  auto on_io = [&](auto f) { return asio::post(io, asio::use_future(std::move(f))).get(); };
  std::unique_ptr<redlock::client> locks;
  std::unique_ptr<redlock::client> rival;
  on_io([&] {
    locks = std::make_unique<redlock::client>(io.get_executor(), fleet.configs(),
                                              fast_client_options());
    rival = std::make_unique<redlock::client>(io.get_executor(), fleet.configs(),
                                              fast_client_options());
  });
  const auto options = lock_for(10000ms);

  redlock::lease held =
      on_io([&] { return locks->async_acquire("tok:future", options, asio::use_future); }).get();
  BOOST_TEST(on_io([&] { return held.held(); }));
  BOOST_TEST(nodes.holding("tok:future", on_io([&] { return held.token(); })) >= 3u);

  // An error surfaces from get() as system_error.
  auto contended =
      on_io([&] { return rival->async_try_acquire("tok:future", options, asio::use_future); });
  error_code thrown;
  try {
    contended.get();
  } catch (const boost::system::system_error& e) {
    thrown = e.code();
  }
  BOOST_TEST(thrown == error::contended, thrown.message());

  auto released = on_io([&] { return held.async_release(asio::use_future); });
  BOOST_CHECK_NO_THROW(released.get());
  BOOST_TEST(!on_io([&] { return held.held(); }));
  BOOST_TEST(eventually_blocking([&] { return nodes.present("tok:future") == 0; }, 2000ms));

  on_io([&] {
    held = redlock::lease();
    rival.reset();
    locks.reset();
  });
}

BOOST_FIXTURE_TEST_CASE(strand_on_four_threads, redlock::test::five_nodes,
                        *boost::unit_test::label("threaded")) {
  asio::io_context io(4);
  auto strand = asio::make_strand(io);
  auto locks =
      std::make_unique<redlock::client>(strand, fleet.configs(), fast_client_options(500ms));

  constexpr int coroutines = 200;
  constexpr int resources = 20;
  // Touched only on the strand.
  std::array<int, resources> counters{};
  std::array<bool, resources> inside{};
  int overlaps = 0;
  int errors = 0;
  int done = 0;
  const auto options = lock_for(10000ms);
  for (int c = 0; c < coroutines; ++c) {
    asio::co_spawn(
        strand,
        [&, c]() -> asio::awaitable<void> {
          const int r = c % resources;
          try {
            auto [ec, lease] = co_await locks->async_acquire(fmt::format("strand:{}", r), options,
                                                             tuple_awaitable);
            if (ec) {
              ++errors;
            } else {
              overlaps += inside[r] ? 1 : 0;
              inside[r] = true;
              const int seen = counters[r];
              co_await sleep_for(1ms);
              counters[r] = seen + 1;
              inside[r] = false;
              auto [release_ec] = co_await lease.async_release(tuple_awaitable);
              errors += release_ec ? 1 : 0;
            }
          } catch (...) {
            ++errors;
          }
          ++done;
        },
        asio::detached);
  }
  bool finished = false;
  asio::co_spawn(
      strand,
      [&]() -> asio::awaitable<void> {
        finished = co_await eventually([&] { return done == coroutines; }, 60000ms);
        locks.reset();  // on the strand, as every other use of the client
      },
      [&](std::exception_ptr) { io.stop(); });

  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] { io.run(); });
  }
  for (auto& t : threads) {
    t.join();
  }
  BOOST_TEST_REQUIRE(finished, done << " of " << coroutines << " finished");
  BOOST_TEST(errors == 0);
  BOOST_TEST(overlaps == 0);
  for (int r = 0; r < resources; ++r) {
    BOOST_TEST(counters[r] == coroutines / resources, "resource " << r);
  }
  BOOST_TEST(eventually_blocking([&] { return nodes.total_keys() == 0; }, 2000ms));
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
