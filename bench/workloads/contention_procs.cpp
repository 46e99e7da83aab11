// Workload "contention_procs" of redlock_bench: 4 processes x 4 contenders on one key. Each process
// has one client shared by its contenders, as a server would; only the nodes connect the
// processes. Reports throughput, waits and fairness: how the acquisitions spread over contenders
// and over processes.

#include "bench_support.hpp"
#include "support/async_test.hpp"
#include "support/sync_client.hpp"
#include "workloads/contention.hpp"
#include "workloads/workloads.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <poll.h>
#include <signal.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace redlock::bench {

namespace {

using namespace std::chrono_literals;

constexpr std::size_t processes = 4;
constexpr std::size_t contenders_per_process = 4;

clock_type::duration run_length(bool quick) {
  return quick ? clock_type::duration(1s) : clock_type::duration(10s);
}

// A child's report, written to its pipe as raw values: quorum, acquisitions per contender,
// gave_up, errors, the number of wait samples and the samples.
struct child_report {
  std::uint64_t quorum = 0;
  std::vector<std::uint64_t> per_contender;
  std::uint64_t gave_up = 0;
  std::uint64_t errors = 0;
  std::vector<double> wait_us;
};

void write_all(int fd, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(fmt::format("write to parent: {}", std::strerror(errno)));
    bytes += n;
    size -= static_cast<std::size_t>(n);
  }
}

template <class T>
void write_value(int fd, const T& value) {
  write_all(fd, &value, sizeof value);
}

// The parent's side of the pipes: reads what is there without blocking past `deadline`.
class report_reader {
 public:
  report_reader(int fd, clock_type::time_point deadline) : fd_(fd), deadline_(deadline) {}

  template <class T>
  T value() {
    T v{};
    read_all(&v, sizeof v);
    return v;
  }

  void read_all(void* data, std::size_t size) {
    auto* bytes = static_cast<char*>(data);
    while (size > 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - clock_type::now());
      if (left.count() <= 0) throw std::runtime_error("a contender process did not report in time");
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) continue;  // the deadline check above ends it
      const ssize_t n = ::read(fd_, bytes, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error("a contender process ended without reporting");
      bytes += n;
      size -= static_cast<std::size_t>(n);
    }
  }

 private:
  int fd_;
  clock_type::time_point deadline_;
};

asio::awaitable<void> child_work(const std::vector<redlock::node_config>& nodes, bool announce,
                                 int go_fd, int report_fd, clock_type::duration length,
                                 contention_state& st) {
  const auto ex = co_await asio::this_coro::executor;
  const std::vector<redlock::node_config> witness_node(1, nodes.front());
  connection_set witness(ex, witness_node);
  auto options = bench_client_options;
  if (!announce) options.release_channel.clear();
  redlock::client client(ex, nodes, options);
  st.quorum = client.quorum();
  co_await must_ping(client);
  const std::string_view ping[] = {"PING"};
  co_await must_exec(*witness.all.front(), ping);
  const char ready = 'r';
  write_all(report_fd, &ready, 1);
  // Every process starts contending at the same moment: when the parent says go.
  asio::posix::stream_descriptor go(ex, ::dup(go_fd));
  char byte = 0;
  auto [ec, n] =
      co_await asio::async_read(go, asio::buffer(&byte, 1), asio::as_tuple(asio::use_awaitable));
  if (ec || n != 1) throw std::runtime_error("no start signal from the parent");
  st.end = clock_type::now() + length;
  co_await redlock::test::run_all(contenders_per_process, [&](std::size_t i) {
    return contender(client, *witness.all.front(), st, i);
  });
}

// The body of one forked contender process. It must never return into the parent's code (which
// owns the node fleet), so it ends with _Exit, skipping every destructor it inherited.
[[noreturn]] void run_child(const std::vector<redlock::node_config>& nodes, bool announce,
                            const contention_state& prototype, int go_fd, int report_fd,
                            clock_type::duration length) {
  int code = 0;
  try {
    contention_state st = prototype;
    st.per_contender.assign(contenders_per_process, 0);
    asio::io_context io(1);
    drive(io, child_work(nodes, announce, go_fd, report_fd, length, st), hang_limit + length,
          "contention_procs child",
          [&] { return fmt::format("stage '{}', acquisitions {}", st.stage, st.acquisitions); });
    write_value<std::uint64_t>(report_fd, st.quorum);
    for (const auto count : st.per_contender)
      write_value<std::uint64_t>(report_fd, count);
    write_value<std::uint64_t>(report_fd, st.gave_up);
    write_value<std::uint64_t>(report_fd, st.errors.total());
    write_value<std::uint64_t>(report_fd, st.wait_us.size());
    write_all(report_fd, st.wait_us.data(), st.wait_us.size() * sizeof(double));
    if (st.errors.total() > 0) {
      fmt::print(stderr, "redlock_bench: contention_procs process {}: {} failed operations:\n{}",
                 ::getpid(), st.errors.total(), st.errors.summary());
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "redlock_bench: contention_procs process {}: {}\n", ::getpid(), e.what());
    code = 1;
  }
  std::fflush(stderr);
  std::_Exit(code);
}

// Witness set-up and read-out, in the parent, on an io_context of its own.
std::int64_t witness_command(const std::vector<redlock::node_config>& nodes,
                             std::vector<std::string> words) {
  asio::io_context io(1);
  std::int64_t value = 0;
  drive(
      io,
      [](const std::vector<redlock::node_config>& nodes, std::vector<std::string> words,
         std::int64_t& value) -> asio::awaitable<void> {
        const std::vector<redlock::node_config> witness_node(1, nodes.front());
        connection_set witness(co_await asio::this_coro::executor, witness_node);
        std::vector<std::string_view> command(words.begin(), words.end());
        const auto reply = co_await must_exec(*witness.all.front(), command);
        value = to_integer(reply).value_or(0);
      }(nodes, std::move(words), value),
      hang_limit, "contention_procs witness", [] { return std::string(); });
  return value;
}

// One measurement: 4 processes with release announcements on or off.
run_result measure_procs(const run_context& context, bool announce, const std::string& prefix) {
  const auto length = run_length(context.quick);
  contention_state prototype;
  prototype.key = prefix + "lock";
  prototype.witness_key = prefix + "counter";
  prototype.options.ttl = lock_ttl;
  // Bounded, so that a starved contender comes back, is counted, and tries again.
  prototype.options.wait = 1000ms;
  witness_command(context.nodes, {"SET", prototype.witness_key, "0"});

  // No thread of ours runs here (drive() joins its watchdog), so forking is safe.
  int go_pipe[2];
  if (::pipe(go_pipe) != 0) throw std::runtime_error("pipe failed");
  std::vector<pid_t> children;
  std::vector<int> reports;
  const auto stop_children = [&] {
    for (const pid_t child : children)
      ::kill(child, SIGKILL);
    for (const pid_t child : children)
      ::waitpid(child, nullptr, 0);
    for (const int fd : reports)
      ::close(fd);
    ::close(go_pipe[0]);
    ::close(go_pipe[1]);
  };
  std::fflush(stdout);
  std::fflush(stderr);
  for (std::size_t p = 0; p < processes; ++p) {
    int report_pipe[2];
    if (::pipe(report_pipe) != 0) {
      stop_children();
      throw std::runtime_error("pipe failed");
    }
    const pid_t child = ::fork();
    if (child < 0) {
      stop_children();
      throw std::runtime_error("fork failed");
    }
    if (child == 0) {
      ::close(report_pipe[0]);
      ::close(go_pipe[1]);
      for (const int fd : reports)
        ::close(fd);
      run_child(context.nodes, announce, prototype, go_pipe[0], report_pipe[1], length);
    }
    ::close(report_pipe[1]);
    children.push_back(child);
    reports.push_back(report_pipe[0]);
  }

  std::vector<child_report> results(processes);
  double seconds = 0;
  double requests_before = 0;
  try {
    const auto setup_deadline = clock_type::now() + hang_limit;
    for (const int fd : reports) {
      report_reader(fd, setup_deadline).value<char>();
    }
    requests_before = lock_requests_run(context.nodes);
    const std::string go(processes, 'g');
    write_all(go_pipe[1], go.data(), go.size());
    const auto start = clock_type::now();
    const auto deadline = start + length + hang_limit;
    for (std::size_t p = 0; p < processes; ++p) {
      report_reader in(reports[p], deadline);
      auto& r = results[p];
      r.quorum = in.value<std::uint64_t>();
      r.per_contender.resize(contenders_per_process);
      for (auto& count : r.per_contender)
        count = in.value<std::uint64_t>();
      r.gave_up = in.value<std::uint64_t>();
      r.errors = in.value<std::uint64_t>();
      r.wait_us.resize(in.value<std::uint64_t>());
      in.read_all(r.wait_us.data(), r.wait_us.size() * sizeof(double));
    }
    seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  } catch (...) {
    stop_children();
    throw;
  }
  int failed = 0;
  for (const pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  for (const int fd : reports)
    ::close(fd);
  ::close(go_pipe[0]);
  ::close(go_pipe[1]);
  if (failed > 0) throw std::runtime_error(fmt::format("{} contender processes failed", failed));

  const double requests_after = lock_requests_run(context.nodes);
  const auto counter = witness_command(context.nodes, {"GET", prototype.witness_key});
  witness_command(context.nodes, {"DEL", prototype.witness_key});

  std::uint64_t acquisitions = 0;
  std::uint64_t gave_up = 0;
  std::uint64_t errors = 0;
  std::vector<double> per_contender;
  std::vector<double> per_process;
  std::vector<double> waits;
  for (const auto& r : results) {
    std::uint64_t mine = 0;
    for (const auto count : r.per_contender) {
      per_contender.push_back(static_cast<double>(count));
      mine += count;
    }
    per_process.push_back(static_cast<double>(mine));
    acquisitions += mine;
    gave_up += r.gave_up;
    errors += r.errors;
    waits.insert(waits.end(), r.wait_us.begin(), r.wait_us.end());
  }
  const auto [min_c, max_c] = std::minmax_element(per_contender.begin(), per_contender.end());
  const auto [min_p, max_p] = std::minmax_element(per_process.begin(), per_process.end());
  const auto total = static_cast<double>(acquisitions);

  run_result out;
  out.quorum = results.front().quorum;
  out.figures = {
      {"acquisitions_per_s", seconds > 0 ? total / seconds : 0, 1},
      {"acquisitions", total, 0},
      {"wait_p50_us", percentile(waits, 0.50), 1},
      {"wait_p99_us", percentile(waits, 0.99), 1},
      {"min_per_contender", *min_c, 0},
      {"max_per_contender", *max_c, 0},
      {"min_per_process", *min_p, 0},
      {"max_per_process", *max_p, 0},
      // min / max: 1 is perfectly even, 0 means someone never got the lock.
      {"fairness_contenders", *max_c > 0 ? *min_c / *max_c : 0, 3},
      {"fairness_processes", *max_p > 0 ? *min_p / *max_p : 0, 3},
      {"gave_up", static_cast<double>(gave_up), 0},
      {"lost_updates", total - static_cast<double>(counter), 0},
      // The lock's requests (SETs, acquire, release and cleanup scripts) over all nodes, per
      // acquisition: the retry traffic that announcements should cut.
      {"requests_per_acquisition",
       total > 0 && requests_before > 0 ? (requests_after - requests_before) / total - 2 : 0, 1},
      {"errors", static_cast<double>(errors), 0},
  };
  return out;
}

}  // namespace

// With announcements (the default) and without (client_options::release_channel empty), in
// alternating order from run to run; the second's figures carry the suffix "_no_notify".
run_result run_contention_procs(const run_context& context) {
  const std::string prefix = key_prefix("contention_procs", context.run);
  run_result with, without;
  if (context.run % 2 == 0) {
    with = measure_procs(context, true, prefix + "on-");
    without = measure_procs(context, false, prefix + "off-");
  } else {
    without = measure_procs(context, false, prefix + "off-");
    with = measure_procs(context, true, prefix + "on-");
  }
  run_result out = std::move(with);
  const auto errors_at = std::find_if(out.figures.begin(), out.figures.end(),
                                      [](const auto& f) { return f.name == "errors"; });
  double errors = errors_at != out.figures.end() ? errors_at->value : 0;
  if (errors_at != out.figures.end()) out.figures.erase(errors_at);
  for (auto& f : without.figures) {
    if (f.name == "errors") {
      errors += f.value;
      continue;
    }
    f.name += "_no_notify";
    out.figures.push_back(std::move(f));
  }
  out.figures.push_back({"errors", errors, 0});
  return out;
}

std::string contention_procs_params(bool quick) {
  return fmt::format(
      "\"processes\":{},\"contenders_per_process\":{},\"duration_s\":{},\"hold_ms\":1,"
      "\"wait_ms\":1000",
      processes, contenders_per_process, quick ? 1 : 10);
}

}  // namespace redlock::bench
