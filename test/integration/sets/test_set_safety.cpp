// Sets of locks under node faults: sets of one to four of six resources, taken in every order by
// nine contenders of three clients while the nemesis stops, blackholes, resets and slows one or
// two of five nodes; no two holds of one resource overlap (the history checker, one hold per
// resource of a set), and nothing is left on the nodes. Fencing tokens increase per resource over
// sets and single locks alike, and the write-back each resource's token needs is shown needed.
// The same checker must catch a plausible set lock that is not atomic on a node (check every key
// with one command, then set them with others).
#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/history.hpp"
#include "support/lock_checks.hpp"
#include "support/minority_nemesis.hpp"
#include "support/printing.hpp"
#include "support/proxied_fleet.hpp"
#include "support/sync_client.hpp"
#include "support/token_order.hpp"
#include "support/unsafe_phases.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

namespace rt = redlock::test;
using redlock::test::mono_now;
using redlock::test::to_mono_ns;
using redlock::test::tuple_awaitable;
using std::chrono::milliseconds;
using strings = std::vector<std::string>;

const strings pool = {"r0", "r1", "r2", "r3", "r4", "r5"};

// A random set of 1 to `largest` resources of `from`, in random order (the library sorts it).
strings random_set(std::minstd_rand& random, const strings& from, std::size_t largest) {
  strings set = from;
  std::shuffle(set.begin(), set.end(), random);
  set.resize(std::uniform_int_distribution<std::size_t>(1, largest)(random));
  return set;
}

// One event per resource of a set's lease.
void record_each(rt::history& log, const strings& set, rt::event e) {
  for (const auto& resource : set) {
    e.resource = resource;
    log.record(e);
  }
}

struct set_counts {
  std::size_t acquired = 0;
  std::size_t failures = 0;
  std::array<std::size_t, 5> by_size{};  // acquisitions by the set's size
};

asio::awaitable<void> contender(redlock::client& locks, std::string who, rt::history& log,
                                set_counts& counts, std::chrono::steady_clock::time_point end,
                                unsigned seed) {
  std::minstd_rand random(seed);
  std::uniform_int_distribution<int> hold_ms(1, 15);
  auto options = lock_for(1500ms);
  options.wait = 3s;
  const auto ttl_ns = std::chrono::nanoseconds(options.ttl).count();
  while (std::chrono::steady_clock::now() < end) {
    const strings asked = random_set(random, pool, 4);
    const auto invoke = mono_now();
    auto [ec, held] = co_await locks.async_acquire_all(asked, options, tuple_awaitable);
    rt::event acquired{who,
                       std::string(),
                       held.token(),
                       rt::op_kind::acquire,
                       rt::op_result::ok,
                       invoke,
                       mono_now(),
                       0,
                       ttl_ns};
    if (ec) {
      acquired.result =
          ec == asio::error::operation_aborted ? rt::op_result::unknown : rt::op_result::failed;
      record_each(log, asked, acquired);
      ++counts.failures;
      co_await sleep_for(5ms);
      continue;
    }
    const strings set(held.resources().begin(), held.resources().end());
    acquired.valid_until = to_mono_ns(held.valid_until());
    record_each(log, set, acquired);
    ++counts.acquired;
    ++counts.by_size[set.size()];
    co_await sleep_for(milliseconds(hold_ms(random)));
    if (!held.held()) {
      // A correct holder checks before it acts on the lock; the loss ends its hold.
      record_each(log, set,
                  {who, std::string(), held.token(), rt::op_kind::lost, rt::op_result::ok,
                   mono_now(), mono_now(), 0, 0});
    }
    const auto release_invoke = mono_now();
    const std::string token = held.token();
    auto [release_ec] = co_await held.async_release(tuple_awaitable);
    record_each(
        log, set,
        {who, std::string(), token, rt::op_kind::release,
         release_ec ? rt::op_result::failed : rt::op_result::ok, release_invoke, mono_now(), 0, 0});
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(set_safety)

BOOST_AUTO_TEST_CASE(sets_of_one_to_four_never_overlap_under_node_faults) {
  rt::proxied_fleet nodes(5);
  rt::history log;
  set_counts counts;
  std::size_t faults = 0;
  run_async(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        std::vector<std::unique_ptr<redlock::client>> clients;
        for (int c = 0; c < 3; ++c) {
          clients.push_back(std::make_unique<redlock::client>(io.get_executor(), nodes.configs(),
                                                              fast_client_options()));
        }
        const auto end = std::chrono::steady_clock::now() + 8s;
        std::size_t running = 0;
        for (std::size_t c = 0; c < clients.size(); ++c) {
          for (std::size_t k = 0; k < 3; ++k) {
            ++running;
            asio::co_spawn(
                io,
                [&, c, k]() -> asio::awaitable<void> {
                  co_await contender(*clients[c], fmt::format("c{}/k{}", c, k), log, counts, end,
                                     static_cast<unsigned>(c * 10 + k + 1));
                  --running;
                },
                asio::detached);
          }
        }
        co_await rt::minority_nemesis(nodes, end, faults);
        BOOST_TEST_REQUIRE(co_await eventually([&] { return running == 0; }, 20s));
        // Every lease was released or lost (a loss releases too): no key is left, and none
        // waited for its TTL (1.5 s).
        const auto left = co_await rt::keys_not_released(nodes.ports(), pool, 3s);
        BOOST_TEST(left.empty(), fmt::format("{}", fmt::join(left, "; ")));
      },
      100s);
  const auto verdict = rt::check_mutual_exclusion(log.events());
  BOOST_TEST_MESSAGE("sets: " << counts.acquired << " acquired (by size 1-4: " << counts.by_size[1]
                              << ", " << counts.by_size[2] << ", " << counts.by_size[3] << ", "
                              << counts.by_size[4] << "), " << counts.failures << " failed, "
                              << faults << " faults; " << verdict.describe());
  BOOST_TEST(verdict.ok(), verdict.describe());
  BOOST_TEST(counts.acquired >= 20u);
  for (std::size_t size = 1; size <= 4; ++size)
    BOOST_TEST(counts.by_size[size] >= 1u, "no set of " << size << " was held");
  BOOST_TEST(faults >= 10u);
}

// Contenders of three clients take fenced sets of one to three of x, y and z under the nemesis;
// by resource, the tokens of its leases (sets and single locks alike) increase in the order the
// leases were granted (one io_context: the order their acquires completed).
BOOST_AUTO_TEST_CASE(fencing_tokens_increase_per_resource_under_node_faults) {
  rt::proxied_fleet nodes(5);
  std::map<std::string, rt::token_order> orders;
  std::size_t faults = 0;
  std::size_t failures = 0;
  const strings resources = {"x", "y", "z"};
  run_async(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        std::vector<std::unique_ptr<redlock::client>> clients;
        for (int c = 0; c < 3; ++c) {
          clients.push_back(std::make_unique<redlock::client>(io.get_executor(), nodes.configs(),
                                                              fast_client_options()));
        }
        const auto end = std::chrono::steady_clock::now() + 6s;
        std::size_t running = 0;
        for (std::size_t k = 0; k < 6; ++k) {
          ++running;
          asio::co_spawn(
              io,
              [&, k]() -> asio::awaitable<void> {
                std::minstd_rand random(static_cast<unsigned>(k + 1));
                auto options = rt::fenced_lock(2s);
                options.wait = 5s;
                while (std::chrono::steady_clock::now() < end) {
                  auto [ec, held] = co_await clients[k % 3]->async_acquire_all(
                      random_set(random, resources, 3), options, tuple_awaitable);
                  if (ec) {
                    ++failures;
                    continue;
                  }
                  for (const auto& resource : held.resources())
                    orders[resource].granted(held.fencing_token(resource).value_or(0));
                  co_await held.async_release(tuple_awaitable);
                }
                --running;
              },
              asio::detached);
        }
        co_await rt::minority_nemesis(nodes, end, faults);
        BOOST_TEST_REQUIRE(co_await eventually([&] { return running == 0; }, 20s));
      },
      100s);
  BOOST_TEST(faults >= 8u);
  for (const auto& resource : resources) {
    const auto& order = orders[resource];
    BOOST_TEST_MESSAGE(resource << ": " << order.size() << " fenced leases; "
                                << order.violation().value_or("tokens in order"));
    BOOST_TEST(order.size() >= 20u, resource);
    BOOST_TEST(!order.violation().has_value(), resource << ": " << order.violation().value_or(""));
  }
  BOOST_TEST_MESSAGE(failures << " acquires failed");
}

// The fencing suite's counterexample for one resource, with a set: ten acquires that only node 0
// can grant raise both counters there to 10; set A is then granted by nodes {0, 1}, set B later by
// {1, 2}. With each resource's write-back B's tokens exceed A's; without it (the unsafe test hook)
// node 1's counters are still 1 and B's tokens go back: the check sees it.
BOOST_AUTO_TEST_CASE(each_resources_write_back_keeps_its_tokens_in_order) {
  for (const bool write_back : {true, false}) {
    BOOST_TEST_CONTEXT((write_back ? "with the write-back" : "without it (unsafe)")) {
      std::optional<rt::without_write_back> unsafe;
      if (!write_back) unsafe.emplace();
      redis_fleet fleet(3);
      std::map<std::string, rt::token_order> orders;
      const strings set = {"split-a", "split-b"};
      run_async([&](asio::io_context& io) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
        fleet[1].kill9();
        fleet[2].kill9();
        for (int i = 0; i < 10; ++i) {
          auto [ec, none] =
              co_await locks.async_try_acquire_all(set, rt::fenced_lock(), tuple_awaitable);
          BOOST_TEST(!!ec, "granted with two of three nodes down");
        }
        BOOST_TEST_REQUIRE(
            co_await eventually([&] { return rt::counter_on(fleet[0], "split-b") == 10; }, 2s));
        fleet[1].start();
        auto options = rt::fenced_lock();
        options.wait = 5s;
        for (const std::size_t down : {std::size_t{2}, std::size_t{0}}) {
          if (down == 0) {
            fleet[0].kill9();
            fleet[2].start();
          }
          auto [ec, held] = co_await locks.async_acquire_all(set, options, tuple_awaitable);
          BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << held.diagnostics());
          for (const auto& resource : set)
            orders[resource].granted(held.fencing_token(resource).value_or(0));
          co_await held.async_release(tuple_awaitable);
        }
        fleet[0].start();
      });
      for (const auto& resource : set) {
        const auto& violation = orders[resource].violation();
        BOOST_TEST_MESSAGE(resource << ": " << violation.value_or("tokens in order"));
        if (write_back) {
          BOOST_TEST(!violation.has_value(), violation.value_or(""));
        } else {
          BOOST_TEST(violation.has_value(), "the check missed the unsafe variant on " << resource);
        }
      }
    }
  }
}

namespace {

// A plausible set lock that is not atomic: it checks each key with EXISTS on every node, then sets
// each with SET PX where all were free, one command at a time; held on a majority, as the
// library's. Between one contender's checks and its sets another can check and set, and both
// hold a key.
class check_then_set {
 public:
  explicit check_then_set(const rt::proxied_fleet& nodes) {
    for (const auto& proxy : nodes.proxies)
      ports_.push_back(proxy->port());
  }

  void contend(const std::string& who, rt::history& log, const std::atomic<bool>& stop,
               unsigned seed) {
    std::vector<std::unique_ptr<sync_client>> links;
    for (const auto port : ports_)
      links.push_back(std::make_unique<sync_client>(port, "", "", 500ms));
    std::minstd_rand random(seed);
    constexpr auto ttl = 1000ms;
    for (std::size_t round = 0; !stop; ++round) {
      const strings set = random_set(random, {"u", "v", "w"}, 2);
      const std::string token = fmt::format("{}-{}", who, round);
      const auto invoke = mono_now();
      // First the checks on every node, then the sets where every key was free: the whole check
      // pass is the window in which another contender can check too.
      std::vector<bool> free(links.size(), false);
      for (std::size_t n = 0; n < links.size(); ++n) {
        try {
          free[n] = std::all_of(set.begin(), set.end(), [&](const std::string& key) {
            return links[n]->command({"EXISTS", key}).integer == 0;
          });
        } catch (const std::runtime_error&) {
          // A faulty node: no vote.
        }
      }
      std::vector<bool> took(links.size(), false);
      std::size_t votes = 0;
      for (std::size_t n = 0; n < links.size(); ++n) {
        if (!free[n]) continue;
        try {
          for (const auto& key : set)
            links[n]->command({"SET", key, token, "PX", "1000"});
          took[n] = true;
          ++votes;
        } catch (const std::runtime_error&) {
        }
      }
      const bool held = votes * 2 > links.size();
      record_each(
          log, set,
          {who, "", token, rt::op_kind::acquire, held ? rt::op_result::ok : rt::op_result::failed,
           invoke, mono_now(), held ? invoke + std::chrono::nanoseconds(ttl * 9 / 10).count() : 0,
           std::chrono::nanoseconds(ttl).count()});
      // Longer than the takes of a set of two (ten commands): two contenders that both won hold
      // at the same time.
      if (held) std::this_thread::sleep_for(25ms);
      const auto release_invoke = mono_now();
      for (std::size_t n = 0; n < links.size(); ++n) {
        if (!took[n]) continue;
        try {
          for (const auto& key : set) {
            if (links[n]->command({"GET", key}).text == token) links[n]->command({"DEL", key});
          }
        } catch (const std::runtime_error&) {
        }
      }
      if (held) {
        record_each(log, set,
                    {who, "", token, rt::op_kind::release, rt::op_result::ok, release_invoke,
                     mono_now(), 0, 0});
      }
    }
  }

 private:
  std::vector<std::uint16_t> ports_;
};

}  // namespace

// Four contenders on threads of their own, replies 2 ms late on every link (they widen the window
// between the checks and the sets): the checker finds two holds of one resource overlapping within
// 30 s, judged on whole histories (run_unsafe_until_caught).
BOOST_AUTO_TEST_CASE(a_check_then_set_design_is_caught_by_the_checker) {
  rt::proxied_fleet nodes(5);
  for (auto& proxy : nodes.proxies)
    proxy->set_latency(2ms);
  check_then_set unsafe(nodes);
  rt::history log;
  const auto verdict = rt::run_unsafe_until_caught(
      log, "unsafe",
      [&](const std::string& who, const std::atomic<bool>& stop, unsigned seed) {
        unsafe.contend(who, log, stop, seed);
      },
      [](const std::vector<rt::event>& events) { return rt::check_mutual_exclusion(events); });
  BOOST_TEST_MESSAGE("check-then-set: " << verdict.describe());
  BOOST_TEST(!verdict.ok(), "the checker found no overlap in " << log.events().size() << " events");
}

BOOST_AUTO_TEST_SUITE_END()
