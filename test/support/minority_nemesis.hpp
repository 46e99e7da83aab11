#ifndef REDLOCK_TEST_SUPPORT_MINORITY_NEMESIS_HPP
#define REDLOCK_TEST_SUPPORT_MINORITY_NEMESIS_HPP

// The node faults the safety suites run their workloads under.

#include "support/async_test.hpp"
#include "support/proxied_fleet.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <random>

namespace redlock::test {

// Every 250 ms one fault on one or two nodes for 400 ms, a majority always left answering: a
// stopped server (SIGSTOP), a blackholed link, a reset link, or replies 300 ms late. Counts the
// faults in `faults`; every fault is undone before it returns, at `end` at the latest.
inline boost::asio::awaitable<void> minority_nemesis(proxied_fleet& nodes,
                                                     std::chrono::steady_clock::time_point end,
                                                     std::size_t& faults) {
  using namespace std::chrono_literals;
  std::minstd_rand random(7);
  std::uniform_int_distribution<std::size_t> pick_node(0, nodes.proxies.size() - 1);
  std::uniform_int_distribution<int> pick_fault(0, 3);
  while (std::chrono::steady_clock::now() + 700ms < end) {
    co_await sleep_for(250ms);
    const std::size_t first = pick_node(random);
    const std::size_t second = (first + 1 + pick_node(random) % 2) % nodes.proxies.size();
    const int fault = pick_fault(random);
    for (const std::size_t node : {first, second}) {
      switch (fault) {
        case 0:
          nodes.fleet[node].pause();
          break;
        case 1:
          nodes.proxies[node]->set_blackhole(true);
          break;
        case 2:
          nodes.proxies[node]->set_reset_peer(true);
          break;
        default:
          nodes.proxies[node]->set_latency(300ms);
          break;
      }
    }
    ++faults;
    co_await sleep_for(400ms);
    for (const std::size_t node : {first, second}) {
      if (fault == 0) nodes.fleet[node].resume();
      nodes.proxies[node]->clear();
    }
  }
}

}  // namespace redlock::test

#endif
