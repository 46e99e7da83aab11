#ifndef REDLOCK_TEST_SUPPORT_REDIS_FIXTURE_HELPERS_HPP
#define REDLOCK_TEST_SUPPORT_REDIS_FIXTURE_HELPERS_HPP

#include <chrono>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

// What the fixtures made of several redis-server processes (redis_cluster, redis_sentinel) share
// to read the servers' text replies, to name a command in a message, and to wait for the servers
// to agree.

namespace redlock::test {

// "No such server" where an index is expected.
inline constexpr std::size_t npos = static_cast<std::size_t>(-1);
// How often the fixtures look again while they wait for the servers to agree.
inline constexpr std::chrono::milliseconds poll_interval{50};
// The health probes: a server that takes this long to answer (CLUSTER INFO, ROLE) is not ready
// anyway.
inline constexpr std::chrono::seconds probe_timeout{2};
// Commands of the fixtures and of the tests; a MIGRATE of a batch may take a while on a busy box.
inline constexpr std::chrono::seconds command_timeout{10};

// The non-empty parts of `text` between separators.
std::vector<std::string_view> split(std::string_view text, char separator);

// A decimal number without a sign; throws std::runtime_error quoting `text` otherwise.
std::size_t to_size(std::string_view text);

// The value of "name:value" in an INFO-style reply; "<missing>" when there is no such line.
std::string field_of(std::string_view text, std::string_view name);

// The command for a message: long arguments cut, the word after AUTH hidden, at most 12 words.
std::string describe_command(std::span<const std::string_view> args);

// Calls `problem` until it returns an empty string: at least once, then every `interval` until
// `deadline` (or `timeout` from now) has passed. A std::runtime_error it throws counts as the
// problem it names, so that a server that cannot be reached yet is waited for like one that is not
// ready yet. Returns the empty string when solved, else the last problem; the caller throws, with
// what only it can add (which servers, their logs).
template <class Problem>
std::string poll_until_solved(std::chrono::steady_clock::time_point deadline,
                              std::chrono::milliseconds interval, Problem&& problem) {
  for (;;) {
    std::string last;
    try {
      last = problem();
    } catch (const std::runtime_error& e) {
      last = e.what();
    }
    if (last.empty() || std::chrono::steady_clock::now() >= deadline) return last;
    std::this_thread::sleep_for(interval);
  }
}
template <class Problem>
std::string poll_until_solved(std::chrono::milliseconds timeout, std::chrono::milliseconds interval,
                              Problem&& problem) {
  return poll_until_solved(std::chrono::steady_clock::now() + timeout, interval,
                           std::forward<Problem>(problem));
}

// The same for one of several waits that share `deadline` (a fixture's start-up): when it has
// passed before this wait begins, `problem` is not called, and the answer says so. So a bound too
// short for the whole is reported however quickly the servers happen to get ready.
template <class Problem>
std::string poll_until_solved_within(std::chrono::steady_clock::time_point deadline,
                                     std::chrono::milliseconds interval, Problem&& problem) {
  if (std::chrono::steady_clock::now() >= deadline) {
    return "not looked at: the time allowed ran out before this wait began";
  }
  return poll_until_solved(deadline, interval, std::forward<Problem>(problem));
}

}  // namespace redlock::test

#endif
