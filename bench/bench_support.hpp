// Shared by the workloads of redlock_bench: measuring helpers, the results a run reports, and a
// driver that runs a workload on an io_context under a watchdog.
#ifndef REDLOCK_BENCH_SUPPORT_HPP
#define REDLOCK_BENCH_SUPPORT_HPP

#include "net/connection.hpp"
#include "redlock/client.hpp"
#include "redlock/node_config.hpp"
#include "redlock/observer.hpp"
#include "redlock/options.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace redlock::bench {

namespace asio = boost::asio;
namespace rd = redlock::detail;
using clock_type = std::chrono::steady_clock;
using boost::system::error_code;

inline constexpr std::chrono::milliseconds lock_ttl{10'000};
// A workload that has not finished this long after its expected duration is considered hung.
inline constexpr std::chrono::seconds hang_limit{60};
// After a workload ends (its client destroyed, connections closed) the io_context must go idle.
inline constexpr std::chrono::seconds wind_down_limit{5};

// The client options of every workload; --node-timeout-ms changes the per-node deadline.
extern redlock::client_options bench_client_options;

// The observer for --observer NAME: none (null), counting (adds one to a counter per event), or
// prometheus (redlock::prometheus_observer on a registry of its own; only when built with
// prometheus-cpp). Throws std::invalid_argument for another name.
std::shared_ptr<redlock::observer> make_bench_observer(std::string_view name);
// --fencing: the latency and throughput workloads acquire with lock_options::fencing.
extern bool bench_fencing;
// --leases N: how many leases renewal_scale holds (0: its default, 10 000, or 500 with --quick).
extern std::size_t bench_renewal_leases;

double micros(clock_type::duration d);
// Nearest-rank percentile (p in (0, 1]); 0 for an empty sample.
double percentile(std::vector<double> sample, double p);
double median(std::vector<double> v);
// User + system CPU seconds of this process (the redis-server children are not included).
double cpu_seconds();

// Callgrind's counting around a measured loop. Under `valgrind --tool=callgrind
// --collect-atstart=no` only what runs between the two calls is counted (the client's
// instructions per pair: bench/instructions.py); outside valgrind they cost a few instructions.
// Calls pair up: each start is followed by one stop.
void start_counting_instructions() noexcept;
void stop_counting_instructions() noexcept;
// User + system CPU seconds of other processes on this machine (our own redis-server children),
// from /proc; 0 for a process that is gone.
double cpu_seconds_of(const std::vector<pid_t>& pids);
// Requests of the lock (SETs and scripts) that `nodes` have run so far, summed; 0 when a node
// cannot tell (TLS, Unix socket, INFO refused). Every other command run meanwhile with SET or GET
// counts too.
double lock_requests_run(const std::vector<redlock::node_config>& nodes);

// Failed operations grouped by what failed and why; the first diagnostics text of each group is
// kept, so that a misbehaving library can be described precisely.
class error_tally {
 public:
  void add(std::string_view operation, error_code ec, std::string_view detail = {});
  // Adds every failure of `other`, each group's name after `prefix` (which tells the phases of
  // one run apart once their tallies are one).
  void merge(const error_tally& other, std::string_view prefix = {});
  std::uint64_t total() const noexcept { return total_; }
  std::string summary() const;

 private:
  struct entry {
    std::uint64_t count = 0;
    std::string first_detail;
  };
  std::map<std::string, entry> groups_;
  std::uint64_t total_ = 0;
};

// Closes the raw connections it holds when it goes out of scope (their owner must close them).
struct connection_set {
  std::vector<std::shared_ptr<rd::connection>> all;
  connection_set(asio::any_io_executor ex, const std::vector<redlock::node_config>& nodes);
  ~connection_set();
  connection_set(const connection_set&) = delete;
  connection_set& operator=(const connection_set&) = delete;
};

// Runs one command on one connection; throws if it gets no reply or an error reply (used for
// setup and clean-up, where a failure means the measurement cannot go on).
asio::awaitable<redlock::resp::value> must_exec(rd::connection& conn,
                                                std::span<const std::string_view> command);
asio::awaitable<void> must_ping(redlock::client& client);

// Issues `command` on every connection at once. Returns the time until `needed` of them replied,
// but only once all have replied, so that consecutive rounds do not overlap.
asio::awaitable<clock_type::duration> fan_out(
    const std::vector<std::shared_ptr<rd::connection>>& conns,
    std::span<const std::string_view> command, std::size_t needed, error_tally& errors);

// Runs `work` on `io` until the io_context has nothing left to do. A watchdog thread stops the
// io_context when the work has not finished within `limit`, or when the io_context has not gone
// idle within wind_down_limit after it finished (something the workload created kept running).
// `progress` describes where the work stood, for the failure message.
void drive(asio::io_context& io, asio::awaitable<void> work, clock_type::duration limit,
           std::string_view what, const std::function<std::string()>& progress);

struct figure {
  std::string name;
  double value;
  int decimals;
};

struct run_result {
  std::size_t quorum = 0;
  // The Redlock nodes the figures are of, when not every node of the run (one_node: 1).
  std::optional<std::size_t> nodes;
  std::vector<figure> figures;
  error_tally errors;
};

// Keys of one run of one workload: distinct per process, workload and run.
std::string key_prefix(std::string_view workload, int run);

// What a workload is given for one run.
struct run_context {
  const std::vector<redlock::node_config>& nodes;
  const std::vector<pid_t>& server_pids;  // our own nodes' processes; empty with --nodes
  bool quick;
  int run;
};

// One workload: its runs, and the JSON members that describe its sizes ("\"pairs\":20000").
struct workload {
  std::string_view name;
  run_result (*run)(const run_context&);
  std::string (*params)(bool quick);
};

}  // namespace redlock::bench

#endif
