// Redlock benchmarks over N Redis masters. Prints JSON lines (schema redlock-bench/1): one per run
// and then the median over the runs.
//
//   redlock_bench --workload NAME [--nodes redis://h:p,redis://h:p,...] [--runs R] [--quick]
//
// NAME is latency, throughput, contention or all. Without --nodes it starts five redis-server
// children on free loopback ports (and stops them). --quick: one run with tiny sizes.
//
// It is a measuring tool: nothing is asserted about the figures. A workload that stops making
// progress (a hung operation) is stopped by a watchdog and reported on stderr.

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "net/connection.hpp"
#include "redlock/client.hpp"
#include "redlock/lease.hpp"
#include "redlock/node_config.hpp"
#include "redlock/options.hpp"
#include "support/async_test.hpp"
#include "support/redis_fleet.hpp"

namespace {

namespace asio = boost::asio;
namespace rd = redlock::detail;
using clock_type = std::chrono::steady_clock;
using boost::system::error_code;
using namespace std::chrono_literals;

constexpr std::string_view usage =
    "usage: redlock_bench --workload latency|throughput|contention|all\n"
    "                     [--nodes redis://h:p,redis://h:p,...] [--runs R] [--quick]\n"
    "                     [--node-timeout-ms N]   (default 100; raise it under valgrind)\n";
constexpr std::string_view known_workloads[] = {"latency", "throughput", "contention"};
constexpr std::size_t own_node_count = 5;
constexpr std::chrono::milliseconds lock_ttl = 10s;
// A workload that has not finished this long after its expected duration is considered hung.
constexpr auto hang_limit = 60s;
// After a workload ends (its client destroyed, connections closed) the io_context must go idle.
constexpr auto wind_down_limit = 5s;

// The client options of every workload; --node-timeout-ms changes the per-node deadline.
redlock::client_options bench_client_options;

struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct settings {
  std::vector<std::string> workloads;
  std::vector<redlock::node_config> nodes;  // empty: start our own fleet
  int runs = 3;
  bool quick = false;
};

int parse_positive(std::string_view flag, std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) {
    throw usage_error(fmt::format("{} needs a positive integer, got '{}'", flag, text));
  }
  return value;
}

std::vector<redlock::node_config> parse_nodes(std::string_view list) {
  std::vector<redlock::node_config> nodes;
  while (true) {
    const auto comma = list.find(',');
    const std::string_view url = list.substr(0, comma);
    if (url.empty()) throw usage_error("--nodes has an empty entry");
    try {
      nodes.push_back(redlock::node_config::from_url(url));
    } catch (const std::invalid_argument& e) {
      throw usage_error(fmt::format("--nodes: bad URL '{}': {}", url, e.what()));
    }
    for (std::size_t i = 0; i + 1 < nodes.size(); ++i) {
      if (nodes[i] == nodes.back()) {
        throw usage_error(fmt::format("--nodes: {} is listed twice", nodes.back().address()));
      }
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return nodes;
}

settings parse(int argc, char** argv) {
  settings s;
  std::optional<int> runs;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) throw usage_error(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    if (arg == "--workload") {
      const std::string_view name = value();
      if (name == "all") {
        s.workloads.assign(std::begin(known_workloads), std::end(known_workloads));
      } else if (std::find(std::begin(known_workloads), std::end(known_workloads), name) !=
                 std::end(known_workloads)) {
        s.workloads.assign(1, std::string(name));
      } else {
        throw usage_error(fmt::format("unknown workload '{}'", name));
      }
    } else if (arg == "--nodes") {
      s.nodes = parse_nodes(value());
    } else if (arg == "--runs") {
      runs = parse_positive(arg, value());
    } else if (arg == "--quick") {
      s.quick = true;
    } else if (arg == "--node-timeout-ms") {
      bench_client_options.node_timeout = std::chrono::milliseconds(parse_positive(arg, value()));
    } else {
      throw usage_error(fmt::format("unknown argument '{}'", arg));
    }
  }
  if (s.workloads.empty()) throw usage_error("--workload is required");
  s.runs = runs.value_or(s.quick ? 1 : 3);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Measuring helpers

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

// Failed operations grouped by what failed and why; the first diagnostics text of each group is
// kept, so that a misbehaving library can be described precisely.
class error_tally {
 public:
  void add(std::string_view operation, error_code ec, std::string_view detail = {}) {
    auto& entry = groups_[fmt::format("{}: {}", operation, ec ? ec.message() : "error reply")];
    if (entry.count++ == 0) entry.first_detail = std::string(detail);
    ++total_;
  }
  std::uint64_t total() const noexcept { return total_; }
  std::string summary() const {
    std::string out;
    for (const auto& [what, entry] : groups_) {
      out += fmt::format("  {} x{}{}{}\n", what, entry.count,
                         entry.first_detail.empty() ? "" : " | ", entry.first_detail);
    }
    return out;
  }

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
  connection_set(asio::any_io_executor ex, const std::vector<redlock::node_config>& nodes) {
    for (const auto& node : nodes)
      all.push_back(rd::connection::create(ex, node));
  }
  ~connection_set() {
    for (const auto& c : all)
      c->close();
  }
  connection_set(const connection_set&) = delete;
  connection_set& operator=(const connection_set&) = delete;
};

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
  auto [ec] = co_await client.async_ping(asio::as_tuple(asio::use_awaitable));
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

// ---------------------------------------------------------------------------------------------
// Results

struct figure {
  std::string name;
  double value;
  int decimals;
};

struct run_result {
  std::size_t quorum = 0;
  std::vector<figure> figures;
  error_tally errors;
};

struct workload_info {
  std::string name;
  std::string params;  // extra JSON members describing the sizes, e.g. "\"pairs\":20000"
};

std::string key_prefix(std::string_view workload, int run) {
  return fmt::format("redlock-bench:{}:{}:{}:", getpid(), workload, run);
}

// ---------------------------------------------------------------------------------------------
// latency: one caller, sequential acquire + release on one key; plain SET beside it.

struct latency_sizes {
  int warmup;
  int iterations;
};

struct latency_state {
  std::string stage = "starting";
  int iteration = 0;
  std::size_t quorum = 0;
  std::vector<double> acquire_us, release_us, set_us, fanout_us;
  error_tally errors;
};

asio::awaitable<void> latency_work(const std::vector<redlock::node_config>& nodes,
                                   latency_sizes sizes, std::string prefix, latency_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  const int total = sizes.warmup + sizes.iterations;
  {
    redlock::client client(ex, nodes, bench_client_options);
    st.quorum = client.quorum();
    st.stage = "ping";
    co_await must_ping(client);
    redlock::lock_options options;
    options.ttl = lock_ttl;
    const std::string key = prefix + "lock";
    for (st.iteration = 0; st.iteration < total; ++st.iteration) {
      st.stage = "acquire";
      const auto t0 = clock_type::now();
      auto [ec, lease] =
          co_await client.async_acquire(key, options, asio::as_tuple(asio::use_awaitable));
      const auto t1 = clock_type::now();
      if (ec) {
        st.errors.add("acquire", ec, lease.diagnostics());
        continue;
      }
      st.stage = "release";
      auto [release_ec] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
      const auto t2 = clock_type::now();
      if (release_ec) st.errors.add("release", release_ec, lease.diagnostics());
      if (st.iteration < sizes.warmup) continue;
      st.acquire_us.push_back(micros(t1 - t0));
      if (!release_ec) st.release_us.push_back(micros(t2 - t1));
    }
    st.stage = "destroying the client";
  }

  connection_set conns(ex, nodes);
  const std::string key = prefix + "set";
  const std::string_view set_command[] = {"SET", key, "xxx"};
  const std::string_view del_command[] = {"DEL", key};
  auto& first = *conns.all.front();
  for (st.iteration = 0; st.iteration < total; ++st.iteration) {
    st.stage = "plain SET";
    const auto t0 = clock_type::now();
    auto [ec, reply] =
        co_await first.async_exec(set_command, {}, asio::as_tuple(asio::use_awaitable));
    const auto t1 = clock_type::now();
    if (ec || reply.is_error()) {
      st.errors.add("SET", ec, reply.text);
    } else if (st.iteration >= sizes.warmup) {
      st.set_us.push_back(micros(t1 - t0));
    }
  }
  const std::size_t needed = nodes.size() / 2 + 1;
  for (st.iteration = 0; st.iteration < total; ++st.iteration) {
    st.stage = "fan-out SET";
    const auto decided = co_await fan_out(conns.all, set_command, needed, st.errors);
    if (st.iteration >= sizes.warmup) st.fanout_us.push_back(micros(decided));
  }
  st.stage = "clean-up";
  for (const auto& conn : conns.all)
    co_await must_exec(*conn, del_command);
  st.stage = "closing";
}

run_result run_latency(const std::vector<redlock::node_config>& nodes, bool quick, int run) {
  const latency_sizes sizes = quick ? latency_sizes{20, 200} : latency_sizes{200, 2000};
  latency_state st;
  asio::io_context io(1);
  drive(io, latency_work(nodes, sizes, key_prefix("latency", run), st), hang_limit,
        fmt::format("latency run {}", run), [&] {
          return fmt::format("stage '{}', iteration {}, errors so far {}\n{}", st.stage,
                             st.iteration, st.errors.total(), st.errors.summary());
        });
  run_result r;
  r.quorum = st.quorum;
  const double acquire_p50 = percentile(st.acquire_us, 0.50);
  const double release_p50 = percentile(st.release_us, 0.50);
  const double set_p50 = percentile(st.set_us, 0.50);
  const double fanout_p50 = percentile(st.fanout_us, 0.50);
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0; };
  r.figures = {
      {"acquire_p50_us", acquire_p50, 1},
      {"acquire_p99_us", percentile(st.acquire_us, 0.99), 1},
      {"release_p50_us", release_p50, 1},
      {"release_p99_us", percentile(st.release_us, 0.99), 1},
      {"set_rtt_p50_us", set_p50, 1},
      {"set_rtt_p99_us", percentile(st.set_us, 0.99), 1},
      {"set_fanout_quorum_p50_us", fanout_p50, 1},
      {"set_fanout_quorum_p99_us", percentile(st.fanout_us, 0.99), 1},
      // Against one SET to one node, and against the same SET sent to every node and decided at
      // a quorum of replies: the network work a Redlock round cannot avoid.
      {"acquire_vs_set", ratio(acquire_p50, set_p50), 2},
      {"acquire_vs_fanout", ratio(acquire_p50, fanout_p50), 2},
      {"release_vs_set", ratio(release_p50, set_p50), 2},
      {"release_vs_fanout", ratio(release_p50, fanout_p50), 2},
      {"errors", static_cast<double>(st.errors.total()), 0},
  };
  r.errors = std::move(st.errors);
  return r;
}

// ---------------------------------------------------------------------------------------------
// throughput: distinct keys, many coroutines in flight, try_acquire + release pairs.

struct throughput_sizes {
  std::uint64_t pairs;
  std::size_t inflight;
};

struct throughput_state {
  std::string stage = "starting";
  std::size_t quorum = 0;
  std::uint64_t issued = 0;
  std::uint64_t completed = 0;
  double seconds = 0;
  double cpu = 0;
  std::vector<pid_t> server_pids;  // empty with --nodes
  double server_cpu = 0;
  error_tally errors;
};

asio::awaitable<void> throughput_worker(redlock::client& client,
                                        const redlock::lock_options& options,
                                        const std::string& prefix, std::uint64_t pairs,
                                        throughput_state& st) {
  while (st.issued < pairs) {
    const std::string key = prefix + std::to_string(st.issued++);
    auto [ec, lease] =
        co_await client.async_try_acquire(key, options, asio::as_tuple(asio::use_awaitable));
    if (ec) {
      st.errors.add("try_acquire", ec, lease.diagnostics());
    } else {
      auto [release_ec] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
      if (release_ec) st.errors.add("release", release_ec, lease.diagnostics());
    }
    ++st.completed;
  }
}

asio::awaitable<void> throughput_work(const std::vector<redlock::node_config>& nodes,
                                      throughput_sizes sizes, std::string prefix,
                                      throughput_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  redlock::client client(ex, nodes, bench_client_options);
  st.quorum = client.quorum();
  st.stage = "ping";
  co_await must_ping(client);
  redlock::lock_options options;
  options.ttl = lock_ttl;
  st.stage = "pairs";
  const double cpu0 = cpu_seconds();
  const double server_cpu0 = cpu_seconds_of(st.server_pids);
  const auto t0 = clock_type::now();
  co_await redlock::test::run_all(sizes.inflight, [&](std::size_t) {
    return throughput_worker(client, options, prefix, sizes.pairs, st);
  });
  st.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  st.cpu = cpu_seconds() - cpu0;
  st.server_cpu = cpu_seconds_of(st.server_pids) - server_cpu0;
  st.stage = "destroying the client";
}

run_result run_throughput(const std::vector<redlock::node_config>& nodes,
                          const std::vector<pid_t>& server_pids, bool quick, int run) {
  const throughput_sizes sizes{quick ? 2'000u : 20'000u, 256};
  throughput_state st;
  st.server_pids = server_pids;
  asio::io_context io(1);
  drive(io, throughput_work(nodes, sizes, key_prefix("throughput", run), st), hang_limit,
        fmt::format("throughput run {}", run), [&] {
          return fmt::format("stage '{}', pairs started {}, finished {}, errors so far {}\n{}",
                             st.stage, st.issued, st.completed, st.errors.total(),
                             st.errors.summary());
        });
  run_result r;
  r.quorum = st.quorum;
  const auto pairs = static_cast<double>(sizes.pairs);
  r.figures = {
      {"pairs_per_s", st.seconds > 0 ? pairs / st.seconds : 0, 0},
      {"client_cpu_us_per_pair", st.cpu * 1e6 / pairs, 2},
  };
  if (!server_pids.empty()) {
    // Our own nodes only: with --nodes their processes are not ours to measure.
    r.figures.push_back({"server_cpu_us_per_pair", st.server_cpu * 1e6 / pairs, 2});
    r.figures.push_back({"client_share_of_cpu", st.cpu / (st.cpu + st.server_cpu), 2});
  }
  r.figures.push_back({"errors", static_cast<double>(st.errors.total()), 0});
  r.errors = std::move(st.errors);
  return r;
}

// ---------------------------------------------------------------------------------------------
// contention: contenders in one client on one key, each doing a slow read-modify-write of a
// counter on a witness key under the lock. Any update lost shows a mutual-exclusion failure.

struct contention_sizes {
  std::size_t contenders;
  clock_type::duration duration;
};

struct contention_state {
  std::string stage = "starting";
  std::size_t quorum = 0;
  std::string key;
  std::string witness_key;
  redlock::lock_options options;
  clock_type::time_point end{};
  std::size_t waiting = 0;  // contenders inside async_acquire
  std::uint64_t acquisitions = 0;
  std::int64_t final_counter = 0;
  double seconds = 0;
  std::vector<double> wait_us;
  error_tally errors;
};

std::optional<std::int64_t> to_integer(const redlock::resp::value& reply) {
  std::int64_t value = 0;
  const auto& t = reply.text;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (!reply.is_string() || ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return value;
}

asio::awaitable<void> contender(redlock::client& client, rd::connection& witness,
                                contention_state& st) {
  asio::steady_timer pause(co_await asio::this_coro::executor);
  const std::string_view get_command[] = {"GET", st.witness_key};
  while (clock_type::now() < st.end) {
    const auto t0 = clock_type::now();
    ++st.waiting;
    auto [ec, lease] =
        co_await client.async_acquire(st.key, st.options, asio::as_tuple(asio::use_awaitable));
    --st.waiting;
    if (ec) {
      st.errors.add("acquire", ec, lease.diagnostics());
      pause.expires_after(1ms);  // do not spin on a persistent failure
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    st.wait_us.push_back(micros(clock_type::now() - t0));
    ++st.acquisitions;

    auto [get_ec, got] =
        co_await witness.async_exec(get_command, {}, asio::as_tuple(asio::use_awaitable));
    const auto counter = get_ec ? std::nullopt : to_integer(got);
    if (!counter) {
      st.errors.add("witness GET", get_ec, got.text);
    } else {
      pause.expires_after(1ms);
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      const std::string next = std::to_string(*counter + 1);
      const std::string_view set_command[] = {"SET", st.witness_key, next};
      auto [set_ec, set_reply] =
          co_await witness.async_exec(set_command, {}, asio::as_tuple(asio::use_awaitable));
      if (set_ec || set_reply.is_error()) st.errors.add("witness SET", set_ec, set_reply.text);
    }

    auto [release_ec] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
    if (release_ec) st.errors.add("release", release_ec, lease.diagnostics());
  }
}

asio::awaitable<void> contention_work(const std::vector<redlock::node_config>& nodes,
                                      contention_sizes sizes, contention_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  const std::vector<redlock::node_config> witness_node(1, nodes.front());
  connection_set witness(ex, witness_node);
  auto& conn = *witness.all.front();
  const std::string_view init_command[] = {"SET", st.witness_key, "0"};
  const std::string_view get_command[] = {"GET", st.witness_key};
  const std::string_view del_command[] = {"DEL", st.witness_key};
  st.stage = "witness setup";
  co_await must_exec(conn, init_command);
  {
    redlock::client client(ex, nodes, bench_client_options);
    st.quorum = client.quorum();
    st.stage = "ping";
    co_await must_ping(client);
    st.stage = "contending";
    const auto t0 = clock_type::now();
    st.end = t0 + sizes.duration;
    co_await redlock::test::run_all(sizes.contenders,
                                    [&](std::size_t) { return contender(client, conn, st); });
    st.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    st.stage = "destroying the client";
  }
  st.stage = "witness read";
  const auto final_reply = co_await must_exec(conn, get_command);
  const auto final_counter = to_integer(final_reply);
  if (!final_counter) {
    throw std::runtime_error(
        fmt::format("witness key holds '{}', not a counter", to_debug_string(final_reply)));
  }
  st.final_counter = *final_counter;
  co_await must_exec(conn, del_command);
  st.stage = "closing";
}

run_result run_contention(const std::vector<redlock::node_config>& nodes, bool quick, int run) {
  const contention_sizes sizes{16, quick ? clock_type::duration(1s) : clock_type::duration(10s)};
  contention_state st;
  const std::string prefix = key_prefix("contention", run);
  st.key = prefix + "lock";
  st.witness_key = prefix + "counter";
  st.options.ttl = lock_ttl;  // no wait limit
  asio::io_context io(1);
  drive(io, contention_work(nodes, sizes, st), hang_limit + sizes.duration,
        fmt::format("contention run {}", run), [&] {
          return fmt::format(
              "stage '{}', acquisitions {}, contenders waiting in async_acquire {}, errors so far "
              "{}\n{}",
              st.stage, st.acquisitions, st.waiting, st.errors.total(), st.errors.summary());
        });
  run_result r;
  r.quorum = st.quorum;
  const auto acquisitions = static_cast<double>(st.acquisitions);
  r.figures = {
      {"acquisitions_per_s", st.seconds > 0 ? acquisitions / st.seconds : 0, 1},
      {"acquisitions", acquisitions, 0},
      {"wait_p50_us", percentile(st.wait_us, 0.50), 1},
      {"wait_p99_us", percentile(st.wait_us, 0.99), 1},
      {"lost_updates", acquisitions - static_cast<double>(st.final_counter), 0},
      {"errors", static_cast<double>(st.errors.total()), 0},
  };
  r.errors = std::move(st.errors);
  return r;
}

// ---------------------------------------------------------------------------------------------

std::string line_start(std::string_view workload, std::size_t nodes, std::size_t quorum) {
  return fmt::format(
      "{{\"schema\":\"redlock-bench/1\",\"lib\":\"redlock-asio\",\"workload\":\"{}\","
      "\"nodes\":{},\"quorum\":{},\"ttl_ms\":{}",
      workload, nodes, quorum, lock_ttl.count());
}

std::string figures_json(const std::vector<figure>& figures) {
  std::string out;
  for (const auto& f : figures)
    out += fmt::format(",\"{}\":{:.{}f}", f.name, f.value, f.decimals);
  return out;
}

std::string params_json(std::string_view workload, bool quick) {
  if (workload == "latency") {
    return quick ? "\"warmup\":20,\"iterations\":200" : "\"warmup\":200,\"iterations\":2000";
  }
  if (workload == "throughput") {
    return fmt::format("\"pairs\":{},\"inflight\":256", quick ? 2'000 : 20'000);
  }
  return fmt::format("\"contenders\":16,\"duration_s\":{},\"hold_ms\":1", quick ? 1 : 10);
}

void run_workload(std::string_view workload, const std::vector<redlock::node_config>& nodes,
                  const std::vector<pid_t>& server_pids, const settings& s) {
  std::vector<run_result> results;
  for (int run = 0; run < s.runs; ++run) {
    run_result r = workload == "latency"      ? run_latency(nodes, s.quick, run)
                   : workload == "throughput" ? run_throughput(nodes, server_pids, s.quick, run)
                                              : run_contention(nodes, s.quick, run);
    fmt::print("{},{},\"run\":{}{}}}\n", line_start(workload, nodes.size(), r.quorum),
               params_json(workload, s.quick), run, figures_json(r.figures));
    std::fflush(stdout);
    if (r.errors.total() > 0) {
      fmt::print(stderr, "redlock_bench: {} run {}: {} failed operations:\n{}", workload, run,
                 r.errors.total(), r.errors.summary());
    }
    results.push_back(std::move(r));
  }
  std::vector<figure> medians;
  for (std::size_t i = 0; i < results.front().figures.size(); ++i) {
    std::vector<double> values;
    for (const auto& r : results)
      values.push_back(r.figures[i].value);
    const auto& first = results.front().figures[i];
    medians.push_back({first.name, median(values), first.decimals});
    if (first.name == "errors" || first.name == "lost_updates") {
      double sum = 0;
      for (double v : values)
        sum += v;
      medians.push_back({first.name + "_total", sum, 0});
    }
  }
  fmt::print("{},{},\"stat\":\"median\",\"runs\":{}{}}}\n",
             line_start(workload, nodes.size(), results.front().quorum),
             params_json(workload, s.quick), s.runs, figures_json(medians));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  settings s;
  try {
    s = parse(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "redlock_bench: {}\n{}", e.what(), usage);
    return 2;
  }
  try {
    std::optional<redlock::test::redis_fleet> fleet;
    std::vector<redlock::node_config> nodes = s.nodes;
    std::vector<pid_t> server_pids;
    if (nodes.empty()) {
      fleet.emplace(own_node_count);
      nodes = fleet->configs();
      for (std::size_t i = 0; i < fleet->size(); ++i)
        server_pids.push_back((*fleet)[i].pid());
    }
    for (const auto& workload : s.workloads)
      run_workload(workload, nodes, server_pids, s);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "redlock_bench: {}\n", e.what());
    return 1;
  }
}
