// The read-write lock's safety property on real servers under node faults: readers of every
// client overlap each other, but no writer overlaps anyone, judged by the readers-writers checker
// (support/history.hpp: check_readers_writers) over what the clients saw while the nodes were
// stopped, blackholed, reset and slowed. The same checker must catch a plausible design that is
// not atomic (check with one command, take with another) under the same faults: a checker that
// cannot fail proves nothing.

#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/client_options.hpp"
#include "support/history.hpp"
#include "support/lock_checks.hpp"
#include "support/minority_nemesis.hpp"
#include "support/printing.hpp"
#include "support/proxied_fleet.hpp"
#include "support/soak_length.hpp"
#include "support/sync_client.hpp"
#include "support/unsafe_phases.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

namespace rt = redlock::test;
namespace d = redlock::detail;
using redlock::test::mono_now;
using redlock::test::to_mono_ns;
using redlock::test::tuple_awaitable;
using std::chrono::milliseconds;

// What the contenders of one run counted.
struct rw_counts {
  std::size_t reads = 0;
  std::size_t writes = 0;
  std::size_t failures = 0;
};

// Whether two readers' holds (of different leases) overlapped at some moment: the lock was shared.
bool readers_overlapped(const std::vector<rt::hold>& holds) {
  for (std::size_t i = 0; i < holds.size(); ++i) {
    for (std::size_t j = i + 1; j < holds.size(); ++j) {
      const auto& a = holds[i];
      const auto& b = holds[j];
      if (a.shared && b.shared && !a.maybe && !b.maybe && a.token != b.token && a.begin < b.end &&
          b.begin < a.end)
        return true;
    }
  }
  return false;
}

// One contender: reads (about 70 %) or writes the lock in turn, holding each lease a few
// milliseconds, and records what it saw.
asio::awaitable<void> contender(redlock::rw_lock& lock, std::string who, rt::history& log,
                                rw_counts& counts, std::chrono::steady_clock::time_point end,
                                unsigned seed) {
  std::minstd_rand random(seed);
  std::uniform_int_distribution<int> percent(0, 99);
  std::uniform_int_distribution<int> hold_ms(1, 15);
  const auto ttl_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(lock.options().ttl);
  while (std::chrono::steady_clock::now() < end) {
    const bool write = percent(random) < 30;
    const auto invoke = mono_now();
    // Not a conditional expression around the co_awaits: g++ 12 miscompiles that.
    error_code ec;
    redlock::lease held;
    if (write) {
      std::tie(ec, held) = co_await lock.async_acquire_write(tuple_awaitable);
    } else {
      std::tie(ec, held) = co_await lock.async_acquire_read(tuple_awaitable);
    }
    rt::event acquired{
        who,        lock.name(), held.token(),  rt::op_kind::acquire, rt::op_result::ok, invoke,
        mono_now(), 0,           ttl_ns.count()};
    acquired.shared = !write;
    if (ec) {
      // A failed acquire cleans up its rounds; only an abort leaves the outcome open.
      acquired.result =
          ec == asio::error::operation_aborted ? rt::op_result::unknown : rt::op_result::failed;
      log.record(acquired);
      ++counts.failures;
      co_await sleep_for(5ms);
      continue;
    }
    acquired.valid_until = to_mono_ns(held.valid_until());
    log.record(acquired);
    ++(write ? counts.writes : counts.reads);
    co_await sleep_for(milliseconds(hold_ms(random)));
    if (!held.held()) {
      // A correct holder checks before it acts on the lock; the loss ends its hold.
      rt::event lost{who,
                     lock.name(),
                     held.token(),
                     rt::op_kind::lost,
                     rt::op_result::ok,
                     mono_now(),
                     mono_now(),
                     0,
                     0};
      lost.shared = !write;
      log.record(lost);
    }
    const auto release_invoke = mono_now();
    const std::string token = held.token();
    auto [release_ec] = co_await held.async_release(tuple_awaitable);
    rt::event released{who,
                       lock.name(),
                       token,
                       rt::op_kind::release,
                       release_ec ? rt::op_result::failed : rt::op_result::ok,
                       release_invoke,
                       mono_now(),
                       0,
                       0};
    released.shared = !write;
    log.record(released);
  }
}

rt::check_result judge(const rt::history& log) {
  const auto verdict = rt::check_readers_writers(log.events());
  BOOST_TEST_MESSAGE("readers-writers: " << verdict.describe());
  return verdict;
}

}  // namespace

namespace {

// What one mixed run saw, and the verdict on it.
struct mixed_run {
  rw_counts counts;
  std::size_t faults = 0;
  rt::check_result verdict;
};

// `clients` clients with 3 contenders each on five nodes behind proxies, for `duration`, while the
// nemesis breaks one or two nodes at a time; then no key of the lock may be left on any node.
mixed_run run_mixed(std::size_t clients, std::chrono::seconds duration) {
  rt::proxied_fleet nodes(5);
  rt::history log;
  mixed_run run;
  const std::string name = "shared-doc";
  run_async(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        std::vector<std::unique_ptr<redlock::client>> owners;
        std::vector<std::unique_ptr<redlock::rw_lock>> locks;
        auto options = lock_for(1500ms);
        options.wait = 3s;
        for (std::size_t c = 0; c < clients; ++c) {
          owners.push_back(std::make_unique<redlock::client>(io.get_executor(), nodes.configs(),
                                                             fast_client_options()));
          locks.push_back(std::make_unique<redlock::rw_lock>(*owners.back(), name, options));
        }
        const auto end = std::chrono::steady_clock::now() + duration;
        std::size_t running = 0;
        for (std::size_t c = 0; c < clients; ++c) {
          for (std::size_t k = 0; k < 3; ++k) {
            ++running;
            asio::co_spawn(
                io,
                [&, c, k]() -> asio::awaitable<void> {
                  co_await contender(*locks[c], fmt::format("c{}/k{}", c, k), log, run.counts, end,
                                     static_cast<unsigned>(c * 10 + k + 1));
                  --running;
                },
                asio::detached);
          }
        }
        co_await rt::minority_nemesis(nodes, end, run.faults);
        const bool finished = co_await eventually([&] { return running == 0; }, 20s);
        BOOST_TEST_REQUIRE(finished);
        // Every lease was released or lost (a loss releases too): nothing of the lock is left,
        // and nothing waited for its TTL (1.5 s). Checked while this io_context runs: the other
        // nodes' releases are written only then.
        const std::vector<std::string> lock_keys = {d::rw_readers_key(name), d::rw_writer_key(name),
                                                    d::rw_mark_key(name)};
        const auto left = co_await rt::keys_not_released(nodes.ports(), lock_keys, 3s);
        BOOST_TEST(left.empty(), fmt::format("{}", fmt::join(left, "; ")));
      },
      duration + 90s);
  BOOST_TEST_MESSAGE("reads " << run.counts.reads << ", writes " << run.counts.writes << ", failed "
                              << run.counts.failures << ", faults " << run.faults);
  run.verdict = judge(log);
  return run;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rw_safety)

// Three clients, three contenders each, for 8 s. Readers share (some of their holds overlap),
// writers get in, and no writer's hold overlaps any other hold.
BOOST_AUTO_TEST_CASE(no_writer_overlaps_anyone_under_node_faults) {
  const auto run = run_mixed(3, 8s);
  BOOST_TEST(run.verdict.ok(), run.verdict.describe());
  BOOST_TEST(run.counts.reads >= 20u);
  BOOST_TEST(run.counts.writes >= 5u);
  BOOST_TEST(run.faults >= 10u);
  BOOST_TEST(readers_overlapped(run.verdict.holds), "the readers never shared the lock");
}

namespace {

// A plausible read-write lock that is not atomic: it checks with one command on every node, then
// takes with another where the check passed. A reader: EXISTS of the writer's key, then SADD to
// the readers' set. A writer: SCARD of the readers' set, then SET NX of the writer's key. Held on
// a majority, as the library's. Between a reader's checks and its takes a writer can check and
// take, and both hold.
class check_then_take {
 public:
  check_then_take(const rt::proxied_fleet& nodes, std::string name) : name_(std::move(name)) {
    for (const auto& proxy : nodes.proxies)
      ports_.push_back(proxy->port());
  }

  // Runs one contender on the calling thread until `stop`.
  void contend(const std::string& who, rt::history& log, const std::atomic<bool>& stop,
               unsigned seed) {
    std::vector<std::unique_ptr<sync_client>> links;
    for (const auto port : ports_)
      links.push_back(std::make_unique<sync_client>(port, "", "", 500ms));
    std::minstd_rand random(seed);
    std::uniform_int_distribution<int> percent(0, 99);
    const std::string writer_key = "{" + name_ + "}:w";
    const std::string readers_key = "{" + name_ + "}:r";
    constexpr auto ttl = 1000ms;
    std::size_t round = 0;
    while (!stop) {
      // Mostly writers: readers who share keep the readers' set busy, and no writer passes.
      const bool write = percent(random) < 75;
      const std::string token = fmt::format("{}-{}", who, round++);
      const auto invoke = mono_now();
      // First the checks on every node, then the takes where the check passed: the whole check
      // pass (five round trips) is the window in which another contender can check too.
      std::vector<bool> free(links.size(), false);
      for (std::size_t n = 0; n < links.size(); ++n) {
        try {
          const auto& count = write ? links[n]->command({"SCARD", readers_key})
                                    : links[n]->command({"EXISTS", writer_key});
          free[n] = count.integer == 0;
        } catch (const std::runtime_error&) {
          // A faulty node: no vote.
        }
      }
      std::vector<bool> took(links.size(), false);
      std::size_t votes = 0;
      for (std::size_t n = 0; n < links.size(); ++n) {
        if (!free[n]) continue;
        try {
          auto& node = *links[n];
          if (write) {
            took[n] = !node.command({"SET", writer_key, token, "NX", "PX", "1000"}).is_null();
          } else {
            node.command({"SADD", readers_key, token});
            node.command({"PEXPIRE", readers_key, "1000"});
            took[n] = true;
          }
          votes += took[n] ? 1 : 0;
        } catch (const std::runtime_error&) {
        }
      }
      const bool held = votes * 2 > links.size();
      rt::event acquired{who,
                         name_,
                         token,
                         rt::op_kind::acquire,
                         held ? rt::op_result::ok : rt::op_result::failed,
                         invoke,
                         mono_now(),
                         held ? invoke + std::chrono::nanoseconds(ttl * 9 / 10).count() : 0,
                         std::chrono::nanoseconds(ttl).count()};
      acquired.shared = !write;
      log.record(acquired);
      // A reader's takes (two commands a node) end about 10 ms after a writer's: holding longer
      // makes two contenders that both won hold at the same time.
      if (held) std::this_thread::sleep_for(25ms);
      const auto release_invoke = mono_now();
      for (std::size_t n = 0; n < links.size(); ++n) {
        if (!took[n]) continue;
        try {
          if (write) {
            links[n]->command({"DEL", writer_key});
          } else {
            links[n]->command({"SREM", readers_key, token});
          }
        } catch (const std::runtime_error&) {
        }
      }
      if (held) {
        rt::event released{
            who,        name_, token, rt::op_kind::release, rt::op_result::ok, release_invoke,
            mono_now(), 0,     0};
        released.shared = !write;
        log.record(released);
      }
    }
  }

 private:
  std::string name_;
  std::vector<std::uint16_t> ports_;
};

}  // namespace

// The check-then-take design, four contenders on threads of their own, on the same five nodes
// with replies 2 ms late on every link (they widen the window between the checks and the
// takes): the checker finds a writer overlapping a reader or another writer within 30 s.
//
// The checker is only asked about whole histories, taken after the contenders stopped: a hold
// whose release is not yet recorded counts as held to its deadline, so a history read while they
// run can show an overlap that their releases, recorded a moment later, rule out.
BOOST_AUTO_TEST_CASE(a_check_then_take_design_is_caught_by_the_checker) {
  rt::proxied_fleet nodes(5);
  for (auto& proxy : nodes.proxies)
    proxy->set_latency(2ms);
  check_then_take unsafe(nodes, "unsafe-doc");
  rt::history log;
  const auto verdict = rt::run_unsafe_until_caught(
      log, "unsafe",
      [&](const std::string& who, const std::atomic<bool>& stop, unsigned seed) {
        unsafe.contend(who, log, stop, seed);
      },
      [](const std::vector<rt::event>& events) { return rt::check_readers_writers(events); });
  BOOST_TEST_MESSAGE("readers-writers: " << verdict.describe());
  BOOST_TEST(!verdict.ok(), "the checker found no overlap in " << log.events().size() << " events");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(rw_soak)

// Four clients, three contenders each, under the nemesis for 8 s (REDLOCK_SOAK_SECONDS): the
// same verdict as rw_safety's, over a longer history.
BOOST_AUTO_TEST_CASE(readers_and_writers_under_a_nemesis) {
  const auto duration = redlock::test::soak_length(8s);
  const auto run = run_mixed(4, duration);
  BOOST_TEST_MESSAGE("soak of " << duration.count() << " s: " << run.counts.reads << " reads, "
                                << run.counts.writes << " writes, " << run.faults
                                << " faults; verdict: " << run.verdict.describe());
  BOOST_TEST(run.verdict.ok(), run.verdict.describe());
  BOOST_TEST(run.counts.reads >= 50u);
  BOOST_TEST(run.counts.writes >= 10u);
  BOOST_TEST(readers_overlapped(run.verdict.holds), "the readers never shared the lock");
}

BOOST_AUTO_TEST_SUITE_END()
