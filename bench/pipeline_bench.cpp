// SET throughput through one pipelined connection with many coroutines in flight, beside
// redis-benchmark on the same node in the same run. Prints JSON lines.
//
//   pipeline_bench [--port P] [--requests N] [--inflight K] [--runs R] [--quick]
//
// Without --port it starts its own redis-server on a free loopback port (and stops it).

#include "net/connection.hpp"
#include "support/redis_fleet.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace rd = redlock::detail;

// redis-benchmark's defaults for -t set without -r: one fixed key, a 3-byte value.
constexpr std::string_view bench_key = "key:__rand_int__";
constexpr std::string_view bench_value = "xxx";

struct settings {
  std::optional<std::uint16_t> port;
  std::uint64_t requests = 1'000'000;
  int inflight = 256;
  int runs = 5;
};

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    if (arg == "--port") {
      s.port = static_cast<std::uint16_t>(std::stoul(std::string(value())));
    } else if (arg == "--requests") {
      s.requests = std::stoull(std::string(value()));
    } else if (arg == "--inflight") {
      s.inflight = std::stoi(std::string(value()));
    } else if (arg == "--runs") {
      s.runs = std::stoi(std::string(value()));
    } else if (arg == "--quick") {
      s.requests = 20'000;
      s.runs = 1;
    } else {
      throw std::invalid_argument(fmt::format("unknown argument {}", arg));
    }
  }
  if (s.inflight < 1 || s.runs < 1 || s.requests < 1) {
    throw std::invalid_argument("--inflight, --runs and --requests must be positive");
  }
  return s;
}

// One run: `inflight` coroutines share `requests` SETs on one connection. Returns SETs per second.
double run_ours(std::uint16_t port, const settings& s, std::uint64_t& errors) {
  asio::io_context io(1);
  redlock::node_config node;
  node.port = port;
  auto conn = rd::connection::create(io.get_executor(), node);
  std::uint64_t issued = 0;
  int running = s.inflight;
  std::chrono::steady_clock::time_point start;

  auto worker = [&]() -> asio::awaitable<void> {
    const std::string_view command[] = {"SET", bench_key, bench_value};
    while (issued < s.requests) {
      ++issued;
      auto [ec, reply] =
          co_await conn->async_exec(command, {}, asio::as_tuple(asio::use_awaitable));
      if (ec || reply.text != "OK") ++errors;
    }
    if (--running == 0) conn->close();
  };
  // Connect first so the timing covers only steady-state pipelining.
  conn->async_exec({"PING"}, {}, [&](boost::system::error_code ec, redlock::resp::value) {
    if (ec) throw std::runtime_error("cannot reach the node: " + conn->last_error());
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < s.inflight; ++i)
      asio::co_spawn(io, worker(), asio::detached);
  });
  io.run();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(s.requests) / seconds;
}

// redis-benchmark -P 16 -c 1 on the same node; returns its requests per second.
double run_redis_benchmark(std::uint16_t port, const settings& s) {
  const std::string command =
      fmt::format("redis-benchmark -h 127.0.0.1 -p {} -P 16 -c 1 -n {} -t set --csv 2>/dev/null",
                  port, s.requests);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) throw std::runtime_error("cannot run redis-benchmark");
  char line[512];
  while (std::fgets(line, sizeof line, pipe.get())) {
    // CSV: "SET","123456.78",...
    if (std::strncmp(line, "\"SET\",\"", 7) == 0) return std::strtod(line + 7, nullptr);
  }
  throw std::runtime_error("redis-benchmark printed no SET result");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) try {
  const settings s = parse(argc, argv);
  std::optional<redlock::test::redis_server> own_server;
  std::uint16_t port = 0;
  if (s.port) {
    port = *s.port;
  } else {
    own_server.emplace();
    port = own_server->port();
  }

  std::vector<double> ours;
  std::vector<double> theirs;
  for (int run = 0; run < s.runs; ++run) {
    // Alternate the two so that machine noise hits both alike.
    std::uint64_t errors = 0;
    ours.push_back(run_ours(port, s, errors));
    theirs.push_back(run_redis_benchmark(port, s));
    fmt::print(
        "{{\"schema\":\"redlock-bench/1\",\"lib\":\"redlock-asio\",\"workload\":\"pipeline_set\","
        "\"nodes\":1,\"inflight\":{},\"requests\":{},\"ops_per_s\":{:.0f},\"errors\":{},"
        "\"run\":{}}}\n",
        s.inflight, s.requests, ours.back(), errors, run);
    fmt::print(
        "{{\"schema\":\"redlock-bench/"
        "1\",\"lib\":\"redis-benchmark\",\"workload\":\"pipeline_set\","
        "\"nodes\":1,\"pipeline\":16,\"clients\":1,\"requests\":{},\"ops_per_s\":{:.0f},"
        "\"run\":{}}}\n",
        s.requests, theirs.back(), run);
    std::fflush(stdout);
  }
  const double ours_median = median(ours);
  const double theirs_median = median(theirs);
  fmt::print(
      "{{\"schema\":\"redlock-bench/1\",\"lib\":\"redlock-asio\",\"workload\":\"pipeline_set\","
      "\"stat\":\"median\",\"runs\":{},\"inflight\":{},\"ops_per_s\":{:.0f},"
      "\"redis_benchmark_ops_per_s\":{:.0f},\"ratio\":{:.2f}}}\n",
      s.runs, s.inflight, ours_median, theirs_median, ours_median / theirs_median);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "pipeline_bench: {}\n", e.what());
  return 1;
}
