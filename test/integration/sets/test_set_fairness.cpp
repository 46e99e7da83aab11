// Sets of locks and single locks share resources fairly across processes. Three forked processes,
// one client each, on three nodes, for three seconds, each hold 1 ms: A's two coroutines take the
// set {x, y}, B's two take {y, x}, C's one coroutine takes y alone. A process whose coroutines hand
// a set to each other must stop after lock_options::local_handoffs in a row and compete with the
// others, as single locks do: no process may get fewer than half the acquisitions of the busiest,
// and no wait (2 s) may run out. Before, a set's release always woke the next local set at once, so
// the first process to win kept both resources (1 647 acquisitions against 2 and 1). No two holds
// of one resource overlap (the history checker, one hold per resource of a set).

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/history.hpp"
#include "support/printing.hpp"
#include "support/sanitized_build.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace {

namespace rt = redlock::test;
using strings = std::vector<std::string>;

struct process_plan {
  std::string name;
  std::size_t coroutines;
  strings resources;  // one: a single lock
};

struct tally {
  std::uint64_t acquired = 0;
  std::uint64_t waits_ran_out = 0;
  std::uint64_t other_failures = 0;
  std::string first_failure;
};

asio::awaitable<void> contender(redlock::client& locks, const process_plan& plan, std::string who,
                                rt::history& log, tally& counts,
                                std::chrono::steady_clock::time_point end) {
  auto options = lock_for(2s);
  options.wait = 2s;
  options.auto_renew = false;
  const auto ttl_ns = std::chrono::nanoseconds(options.ttl).count();
  while (std::chrono::steady_clock::now() < end) {
    const auto invoke = rt::mono_now();
    // Not one ?: over two co_await expressions: g++ 12 destroys the result's lease too early.
    error_code ec;
    redlock::lease held;
    if (plan.resources.size() == 1) {
      std::tie(ec, held) =
          co_await locks.async_acquire(plan.resources.front(), options, tuple_awaitable);
    } else {
      std::tie(ec, held) =
          co_await locks.async_acquire_all(plan.resources, options, tuple_awaitable);
    }
    rt::event e{who,
                {},
                held.token(),
                rt::op_kind::acquire,
                rt::op_result::ok,
                invoke,
                rt::mono_now(),
                rt::to_mono_ns(held.valid_until()),
                ttl_ns};
    const auto record_each = [&](const rt::event& what) {
      for (const auto& resource : plan.resources) {
        auto one = what;
        one.resource = resource;
        log.record(one);
      }
    };
    if (ec) {
      e.result = rt::op_result::failed;
      record_each(e);
      if (ec == error::wait_timeout) {
        ++counts.waits_ran_out;
      } else {
        ++counts.other_failures;
      }
      if (counts.first_failure.empty())
        counts.first_failure = fmt::format("{}: {}", ec.message(), held.diagnostics());
      continue;
    }
    record_each(e);
    ++counts.acquired;
    co_await sleep_for(1ms);
    const auto release_invoke = rt::mono_now();
    const std::string token = held.token();
    auto [release_ec] = co_await held.async_release(tuple_awaitable);
    record_each({who,
                 {},
                 token,
                 rt::op_kind::release,
                 release_ec ? rt::op_result::failed : rt::op_result::ok,
                 release_invoke,
                 rt::mono_now(),
                 0,
                 0});
  }
}

// Runs in a forked child: reports by files and its exit code only.
[[noreturn]] void run_process(const std::vector<redlock::node_config>& nodes,
                              const process_plan& plan, std::chrono::milliseconds duration,
                              const std::filesystem::path& out) {
  int code = 0;
  try {
    rt::history log;
    std::vector<tally> counts(plan.coroutines);
    run_async(
        [&](asio::io_context& io) -> asio::awaitable<void> {
          redlock::client locks(io.get_executor(), nodes, fast_client_options());
          const auto end = std::chrono::steady_clock::now() + duration;
          std::size_t running = plan.coroutines;
          for (std::size_t c = 0; c < plan.coroutines; ++c) {
            asio::co_spawn(
                io,
                [&, c]() -> asio::awaitable<void> {
                  co_await contender(locks, plan, fmt::format("{}/c{}", plan.name, c), log,
                                     counts[c], end);
                  --running;
                },
                asio::detached);
          }
          co_await eventually([&] { return running == 0; }, duration + 30s);
        },
        std::chrono::duration_cast<std::chrono::seconds>(duration) + 60s);
    std::ofstream history_file(out.string() + ".history");
    log.write(history_file);
    std::ofstream tally_file(out.string() + ".tally");
    for (const auto& t : counts) {
      tally_file << t.acquired << ' ' << t.waits_ran_out << ' ' << t.other_failures << ' '
                 << (t.first_failure.empty() ? "-" : t.first_failure) << '\n';
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", plan.name.c_str(), e.what());
    code = 1;
  }
  std::_Exit(code);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(set_fairness)

BOOST_AUTO_TEST_CASE(sets_and_single_locks_share_resources_fairly_across_processes) {
  redis_fleet fleet(3);
  const std::vector<process_plan> plans = {
      {"A", 2, {"x", "y"}},
      {"B", 2, {"y", "x"}},
      {"C", 1, {"y"}},
  };
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("redlock-set-fairness-{}", ::getpid());
  std::filesystem::create_directories(dir);
  // No thread runs in this process (the servers are child processes), so forking is safe.
  std::vector<pid_t> children;
  for (const auto& plan : plans) {
    const pid_t child = ::fork();
    BOOST_TEST_REQUIRE(child >= 0);
    if (child == 0) run_process(fleet.configs(), plan, 3s, dir / plan.name);
    children.push_back(child);
  }
  for (const pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    BOOST_TEST_REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }

  std::vector<rt::event> events;
  std::map<std::string, std::uint64_t> per_process;
  std::uint64_t waits_ran_out = 0;
  std::string shown;
  for (const auto& plan : plans) {
    std::ifstream history_file((dir / plan.name).string() + ".history");
    const auto some = rt::history::read_lines(history_file);
    events.insert(events.end(), some.begin(), some.end());
    std::ifstream tally_file((dir / plan.name).string() + ".tally");
    std::string line;
    while (std::getline(tally_file, line)) {
      std::uint64_t acquired = 0, ran_out = 0, other = 0;
      std::string first;
      std::istringstream fields(line);
      fields >> acquired >> ran_out >> other;
      std::getline(fields >> std::ws, first);
      per_process[plan.name] += acquired;
      waits_ran_out += ran_out;
      BOOST_TEST(other == 0u, plan.name << ": " << first);
      if (ran_out > 0) BOOST_TEST_MESSAGE(plan.name << ": " << first);
    }
    shown += fmt::format(" {} {}", plan.name, per_process[plan.name]);
  }
  std::filesystem::remove_all(dir);

  const auto [low, high] =
      std::minmax_element(per_process.begin(), per_process.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; });
  const double spread = high->second == 0
                            ? 0.0
                            : static_cast<double>(low->second) / static_cast<double>(high->second);
  BOOST_TEST_MESSAGE("acquisitions:" << shown << "; min/max " << spread);
  const auto verdict = rt::check_mutual_exclusion(events);
  BOOST_TEST(verdict.ok(), verdict.describe());
  BOOST_TEST(spread >= 0.5, "acquisitions:" << shown);
  BOOST_TEST(waits_ran_out == 0u, "acquisitions:" << shown);
  // Enough acquisitions for the spread to mean something: over 100 for the busiest process in an
  // optimized build (several hundred on a quiet machine); the sanitized build beside a loaded
  // machine made 94.
  const std::uint64_t enough = redlock::test::sanitized_build ? 40 : 100;
  BOOST_TEST(high->second > enough, "acquisitions:" << shown);
}

BOOST_AUTO_TEST_SUITE_END()
