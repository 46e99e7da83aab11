#ifndef REDLOCK_TEST_SUPPORT_LOCK_WORKLOAD_HPP
#define REDLOCK_TEST_SUPPORT_LOCK_WORKLOAD_HPP

#include "redlock/client.hpp"
#include "redlock/node_config.hpp"
#include "redlock/options.hpp"
#include "support/history.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace redlock::test {

// Contenders that take one lock in turn and, under it, do a deliberately slow read-modify-write
// of a counter on a separate "witness" Redis: GET, sleep for the hold time, SET value + 1. If two
// holders ever overlap, an increment is lost and the final counter falls short of the number of
// increments made. An occupancy counter (INCR on entry, DECR on exit) shows the overlap directly.
struct workload_options {
  std::string process = "p0";  // prefix of the contenders' names in the history
  std::string resource = "workload";
  std::size_t contenders = 4;
  std::chrono::milliseconds duration{2000};
  lock_options lock;  // its `wait` bounds each attempt
  std::chrono::milliseconds hold_min{1};
  std::chrono::milliseconds hold_max{10};
  node_config witness;
  std::string counter_key = "witness:counter";
  std::string occupancy_key = "witness:occupancy";
};

struct workload_stats {
  std::uint64_t attempts = 0;
  std::uint64_t acquisitions = 0;
  std::uint64_t increments = 0;         // counter writes made while the lease said it was held
  std::uint64_t lost_before_write = 0;  // holds given up because the lease was no longer held
  std::int64_t max_occupancy = 0;
  std::map<std::string, std::uint64_t> failures;  // "acquire: no quorum ..." -> count
  std::vector<mono_ns> acquired_at;               // completion times of successful acquires

  void merge(const workload_stats& other);
};

// Runs the contenders on `locks` (and the coroutine's executor) for options.duration, records every
// acquire, release and signalled loss in `log`, and leaves the figures in `stats`. Throws when the
// witness fails (the run would prove nothing).
boost::asio::awaitable<void> run_lock_workload(client& locks, workload_options options,
                                               history& log, workload_stats& stats);

}  // namespace redlock::test

#endif
