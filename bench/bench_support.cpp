#include "bench_support.hpp"

#include "redlock/observer.hpp"
#include "support/reach.hpp"
#include "support/sync_client.hpp"

#ifdef REDLOCK_BENCH_PROMETHEUS
#include "redlock/prometheus.hpp"

#include <prometheus/registry.h>
#endif

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

// valgrind's header (Debian: valgrind) only defines macros that do nothing outside valgrind.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define REDLOCK_BENCH_HAS_CALLGRIND 1
#else
#define REDLOCK_BENCH_HAS_CALLGRIND 0
#endif

namespace redlock::bench {

redlock::client_options bench_client_options;

namespace {

// The least an observer can do: one increment per event, so that what remains is the library's
// cost of building and delivering events.
class counting_observer final : public redlock::observer {
 public:
  void on_acquire(const redlock::acquire_event&) override { ++events_; }
  void on_extend(const redlock::lease_event&) override { ++events_; }
  void on_lost(const redlock::lease_event&) override { ++events_; }
  void on_release(const redlock::lease_event&) override { ++events_; }
  void on_node(const redlock::node_event&) override { ++events_; }

 private:
  std::atomic<std::uint64_t> events_{0};
};

}  // namespace

std::shared_ptr<redlock::observer> make_bench_observer(std::string_view name) {
  if (name == "none") return nullptr;
  if (name == "counting") return std::make_shared<counting_observer>();
#ifdef REDLOCK_BENCH_PROMETHEUS
  if (name == "prometheus") {
    // The registry lives as long as the observer that fills it.
    struct with_registry {
      prometheus::Registry registry;
      redlock::prometheus_observer observer{registry};
    };
    auto both = std::make_shared<with_registry>();
    return std::shared_ptr<redlock::observer>(both, &both->observer);
  }
#endif
#ifdef REDLOCK_BENCH_PROMETHEUS
  constexpr std::string_view others = ", prometheus";
#else
  constexpr std::string_view others = " (built without prometheus-cpp)";
#endif
  throw std::invalid_argument(
      fmt::format("--observer: '{}' is not one of none, counting{}", name, others));
}

bool bench_fencing = false;
std::size_t bench_renewal_leases = 0;

double micros(clock_type::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// Nearest-rank percentile (p in (0, 1]); 0 for an empty sample.
double percentile(std::vector<double> sample, double p) {
  if (sample.empty()) return 0;
  std::sort(sample.begin(), sample.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sample.size())));
  return sample[std::clamp<std::size_t>(rank, 1, sample.size()) - 1];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Under callgrind (run with --collect-atstart=no), what runs between these two is counted.
void start_counting_instructions() noexcept {
#if REDLOCK_BENCH_HAS_CALLGRIND
  CALLGRIND_TOGGLE_COLLECT;
#endif
}

void stop_counting_instructions() noexcept {
#if REDLOCK_BENCH_HAS_CALLGRIND
  CALLGRIND_TOGGLE_COLLECT;
#endif
}

// User + system CPU seconds of this process (the redis-server children are not included).
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// User + system CPU seconds of other processes on this machine (our own redis-server children),
// from /proc; 0 for a process that is gone.
double cpu_seconds_of(const std::vector<pid_t>& pids) {
  static const double ticks_per_second = static_cast<double>(::sysconf(_SC_CLK_TCK));
  double total = 0;
  for (const pid_t pid : pids) {
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string line;
    if (!std::getline(stat, line)) continue;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    double ticks = 0;
    for (int index = 3; index <= 15 && rest >> field; ++index) {
      if (index >= 14) ticks += std::stod(field);
    }
    total += ticks / ticks_per_second;
  }
  return total;
}

void error_tally::add(std::string_view operation, error_code ec, std::string_view detail) {
  auto& entry = groups_[fmt::format("{}: {}", operation, ec ? ec.message() : "error reply")];
  if (entry.count++ == 0) entry.first_detail = std::string(detail);
  ++total_;
}

void error_tally::merge(const error_tally& other, std::string_view prefix) {
  for (const auto& [what, theirs] : other.groups_) {
    auto& entry = groups_[fmt::format("{}{}", prefix, what)];
    if (entry.count == 0) entry.first_detail = theirs.first_detail;
    entry.count += theirs.count;
  }
  total_ += other.total_;
}

std::string error_tally::summary() const {
  std::string out;
  for (const auto& [what, entry] : groups_) {
    out += fmt::format("  {} x{}{}{}\n", what, entry.count, entry.first_detail.empty() ? "" : " | ",
                       entry.first_detail);
  }
  return out;
}

connection_set::connection_set(asio::any_io_executor ex,
                               const std::vector<redlock::node_config>& nodes) {
  for (const auto& node : nodes)
    all.push_back(rd::connection::create(ex, node));
}

connection_set::~connection_set() {
  for (const auto& c : all)
    c->close();
}

// Runs one command on one connection; throws if it gets no reply or an error reply (used for
// setup and clean-up, where a failure means the measurement cannot go on).
asio::awaitable<redlock::resp::value> must_exec(rd::connection& conn,
                                                std::span<const std::string_view> command) {
  auto [ec, reply] = co_await conn.async_exec(command, {}, asio::as_tuple(asio::use_awaitable));
  if (ec || reply.is_error()) {
    throw std::runtime_error(fmt::format("{} on {} failed: {}", command.front(),
                                         conn.node().address(),
                                         ec ? reply.text + " (" + ec.message() + ")" : reply.text));
  }
  co_return std::move(reply);
}

asio::awaitable<void> must_ping(redlock::client& client) {
  // A first connect that takes longer than node_timeout (TLS, a distant node) goes on while the
  // pings fail: ping for up to a second.
  const auto ec = co_await redlock::test::ping_until_answered(client, std::chrono::seconds(1));
  if (ec) throw std::runtime_error(fmt::format("cannot reach a quorum of nodes: {}", ec.message()));
}

// Issues `command` on every connection at once. Returns the time until `needed` of them replied,
// but only once all have replied, so that consecutive rounds do not overlap.
asio::awaitable<clock_type::duration> fan_out(
    const std::vector<std::shared_ptr<rd::connection>>& conns,
    std::span<const std::string_view> command, std::size_t needed, error_tally& errors) {
  struct round {
    explicit round(asio::any_io_executor ex) : all_in(ex, clock_type::time_point::max()) {}
    std::size_t replies = 0;
    std::vector<std::pair<error_code, std::string>> failures;
    clock_type::time_point decided{};
    asio::steady_timer all_in;
  };
  const auto ex = co_await asio::this_coro::executor;
  const auto r = std::make_shared<round>(ex);
  const std::size_t count = conns.size();
  const auto t0 = clock_type::now();
  for (const auto& conn : conns) {
    conn->async_exec(
        command, {},
        asio::bind_executor(ex, [r, count, needed](error_code ec, redlock::resp::value reply) {
          if (ec || reply.is_error()) r->failures.emplace_back(ec, reply.text);
          if (++r->replies == needed) r->decided = clock_type::now();
          if (r->replies == count) r->all_in.cancel();
        }));
  }
  if (r->replies < count) co_await r->all_in.async_wait(asio::as_tuple(asio::use_awaitable));
  for (const auto& [ec, text] : r->failures)
    errors.add("fan-out SET", ec, text);
  co_return r->decided - t0;
}

// Runs `work` on `io` until the io_context has nothing left to do. A watchdog thread stops the
// io_context when the work has not finished within `limit`, or when the io_context has not gone
// idle within wind_down_limit after it finished (something the workload created kept running).
// `progress` describes where the work stood, for the failure message.
void drive(asio::io_context& io, asio::awaitable<void> work, clock_type::duration limit,
           std::string_view what, const std::function<std::string()>& progress) {
  std::mutex mutex;
  std::condition_variable changed;
  bool finished = false;
  bool idle = false;
  bool hung = false;
  bool stuck_winding_down = false;
  std::exception_ptr failure;

  asio::co_spawn(io, std::move(work), [&](std::exception_ptr e) {
    const std::lock_guard lock(mutex);
    failure = e;
    finished = true;
    changed.notify_all();
  });
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (!changed.wait_for(lock, limit, [&] { return finished || idle; })) {
      hung = true;
      io.stop();
      return;
    }
    if (!changed.wait_for(lock, wind_down_limit, [&] { return idle; })) {
      stuck_winding_down = true;
      io.stop();
    }
  });
  io.run();
  {
    const std::lock_guard lock(mutex);
    idle = true;
    changed.notify_all();
  }
  watchdog.join();

  if (hung) {
    throw std::runtime_error(
        fmt::format("{}: not finished after {:.0f} s, stopped (an operation never completed?); {}",
                    what, std::chrono::duration<double>(limit).count(), progress()));
  }
  if (!finished) {
    throw std::runtime_error(fmt::format(
        "{}: the io_context ran out of work before the workload finished (a completion handler "
        "was dropped without being called); {}",
        what, progress()));
  }
  if (failure) std::rethrow_exception(failure);
  if (stuck_winding_down) {
    fmt::print(stderr,
               "redlock_bench: warning: {}: the io_context still had work {:.0f} s after the "
               "client was destroyed and the connections closed; stopped it\n",
               what, std::chrono::duration<double>(wind_down_limit).count());
  }
}

std::string key_prefix(std::string_view workload, int run) {
  return fmt::format("redlock-bench:{}:{}:{}:", getpid(), workload, run);
}

// Requests the lock sends that the nodes have run so far, summed over the nodes; 0 when a node
// cannot tell. INFO commandstats also counts the commands a script calls, so requests are counted
// by what each one runs exactly once: a plain SET and the acquire script one SET, the release and
// extend scripts one GET. The witness's GET and SET are among them, two per acquisition.
double lock_requests_run(const std::vector<redlock::node_config>& nodes) {
  double total = 0;
  for (const auto& node : nodes) {
    if (node.tls.enabled || !node.unix_path.empty()) return 0;
    try {
      redlock::test::sync_client c(node.port, node.password, node.username);
      const auto info = c.command({"INFO", "commandstats"}).text;
      for (const std::string_view name : {"set", "get"}) {
        const std::string field = fmt::format("cmdstat_{}:calls=", name);
        const auto at = info.find(field);
        if (at != std::string::npos) total += std::stod(info.substr(at + field.size()));
      }
    } catch (const std::exception&) {
      return 0;
    }
  }
  return total;
}

}  // namespace redlock::bench
