#ifndef REDLOCK_TEST_SUPPORT_UNSAFE_PHASES_HPP
#define REDLOCK_TEST_SUPPORT_UNSAFE_PHASES_HPP

// How the negative tests run an unsafe design until the checker catches it.

#include "support/history.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace redlock::test {

// Runs `contend(who, stop, seed)` on four threads, in phases of 2 s, until `check(events)` over
// the whole of `log` finds a violation or `limit` has passed; returns the last verdict. The
// history is judged only after each phase's threads have stopped: a hold whose release is not yet
// recorded counts as held to its deadline, so a history read while they run can show an overlap
// that their releases, recorded a moment later, rule out.
template <class Contend, class Check>
check_result run_unsafe_until_caught(const history& log, const std::string& name, Contend contend,
                                     Check check,
                                     std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  check_result verdict;
  for (unsigned phase = 0; verdict.ok() && std::chrono::steady_clock::now() < give_up; ++phase) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (unsigned k = 0; k < 4; ++k) {
      threads.emplace_back(
          [&, k] { contend(fmt::format("{}/p{}/k{}", name, phase, k), stop, 100 * phase + k); });
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
    stop = true;
    for (auto& thread : threads)
      thread.join();
    verdict = check(log.events());
  }
  return verdict;
}

}  // namespace redlock::test

#endif
