// Redlock benchmarks over N Redis masters. Prints JSON lines (schema redlock-bench/1): one per run
// and then the median over the runs.
//
//   redlock_bench --workload NAME [--nodes redis://h:p,redis://h:p,...] [--runs R] [--quick]
//                 [--table]
//
// NAME is one of the workloads in the table below (latency, throughput, contention,
// contention_procs, semaphore, rw_lock, multi, slow_node, renewal_scale, scale_curve, tls,
// wake_latency, cluster, one_node) or all. Without --nodes it starts five redis-server children on
// free loopback ports (and stops them); with --nodes the workloads use those nodes. tls, which
// compares plain TCP with TLS, starts five servers of its own that listen for both when --nodes is
// not given; with --nodes it measures the rediss:// nodes over TLS and the redis:// ones over plain
// TCP, and needs one rediss:// node at least (--workload tls refuses such a list; all leaves tls
// out, saying so on stderr). cluster always starts a three-master Redis Cluster and a standalone
// server of its own.
// --quick: one run with tiny sizes.
// --table: after the JSON lines, a readable table of the medians. bench/run.sh runs them all.
// --observer: what the clients report their events to (what an observer costs: run throughput and
// latency with none, counting and prometheus in one batch).
//
// It is a measuring tool: nothing is asserted about the figures. A workload that stops making
// progress (a hung operation) is stopped by a watchdog and reported on stderr.

#include "bench_support.hpp"
#include "bench_table.hpp"
#include "redlock/node_config.hpp"
#include "support/redis_fleet.hpp"
#include "workloads/workloads.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace redlock::bench;

constexpr workload workloads[] = {
    {"latency", run_latency, latency_params},
    {"throughput", run_throughput, throughput_params},
    {"contention", run_contention, contention_params},
    {"contention_procs", run_contention_procs, contention_procs_params},
    {"semaphore", run_semaphore, semaphore_params},
    {"rw_lock", run_rw_lock, rw_lock_params},
    {"multi", run_multi, multi_params},
    {"slow_node", run_slow_node, slow_node_params},
    {"renewal_scale", run_renewal_scale, renewal_scale_params},
    {"scale_curve", run_scale_curve, scale_curve_params},
    {"tls", run_tls, tls_params},
    {"wake_latency", run_wake_latency, wake_latency_params},
    {"cluster", run_cluster, cluster_params},
    {"one_node", run_one_node, one_node_params},
};

constexpr std::string_view usage =
    "usage: redlock_bench --workload NAME|all\n"
    "                     [--nodes redis://h:p,redis://h:p,...] [--runs R] [--quick]\n"
    "                     (--nodes: use these nodes instead of starting five; tls measures\n"
    "                      the rediss:// ones over TLS and the redis:// ones over plain TCP,\n"
    "                      and needs a rediss:// one)\n"
    "                     [--node-timeout-ms N]   (default 100; raise it under valgrind)\n"
    "                     [--release-channel NAME]   ('' turns release announcements off)\n"
    "                     [--fencing]   (latency and throughput acquire with fencing tokens)\n"
    "                     [--leases N]   (renewal_scale holds N leases; default 10 000)\n"
    "                     [--observer none|counting|prometheus]   (client_options::observer:\n"
    "                      none, one that counts events, or redlock::prometheus_observer)\n"
    "                     [--table]   (then a readable table of the medians)\n";
constexpr std::size_t own_node_count = 5;

struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct settings {
  std::vector<std::string> workloads;
  std::vector<std::string> left_out;        // "NAME: why", for stderr
  std::vector<redlock::node_config> nodes;  // empty: start our own fleet
  int runs = 3;
  bool quick = false;
  bool table = false;
};

int parse_positive(std::string_view flag, std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) {
    throw usage_error(fmt::format("{} needs a positive integer, got '{}'", flag, text));
  }
  return value;
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
      const auto known = [&](const workload& w) { return w.name == name; };
      if (name == "all") {
        s.workloads.clear();
        for (const auto& w : workloads)
          s.workloads.emplace_back(w.name);
      } else if (std::any_of(std::begin(workloads), std::end(workloads), known)) {
        s.workloads.assign(1, std::string(name));
      } else {
        throw usage_error(fmt::format("unknown workload '{}'", name));
      }
    } else if (arg == "--nodes") {
      try {
        s.nodes = redlock::node_config::from_url_list(value());
      } catch (const std::invalid_argument& e) {
        throw usage_error(fmt::format("--nodes: {}", e.what()));
      }
    } else if (arg == "--runs") {
      runs = parse_positive(arg, value());
    } else if (arg == "--table") {
      s.table = true;
    } else if (arg == "--quick") {
      s.quick = true;
    } else if (arg == "--node-timeout-ms") {
      bench_client_options.node_timeout = std::chrono::milliseconds(parse_positive(arg, value()));
    } else if (arg == "--leases") {
      bench_renewal_leases = static_cast<std::size_t>(parse_positive(arg, value()));
    } else if (arg == "--fencing") {
      bench_fencing = true;
    } else if (arg == "--observer") {
      bench_client_options.observer = make_bench_observer(value());
    } else if (arg == "--release-channel") {
      bench_client_options.release_channel = value();  // empty: releases announce nothing
    } else {
      throw usage_error(fmt::format("unknown argument '{}'", arg));
    }
  }
  if (s.workloads.empty()) throw usage_error("--workload is required");
  // Checked before anything runs: asked for alone, tls on unfit nodes is a usage error; among
  // all the workloads it is left out so that the others still run.
  if (const auto tls = std::find(s.workloads.begin(), s.workloads.end(), "tls");
      tls != s.workloads.end() && !s.nodes.empty()) {
    if (auto problem = tls_nodes_problem(s.nodes); !problem.empty()) {
      if (s.workloads.size() == 1) throw usage_error(std::move(problem));
      s.workloads.erase(tls);
      s.left_out.push_back(fmt::format("tls: {}", problem));
    }
  }
  s.runs = runs.value_or(s.quick ? 1 : 3);
  return s;
}

// ---------------------------------------------------------------------------------------------

std::string line_start(std::string_view workload, std::size_t nodes, std::size_t quorum) {
  return fmt::format(
      "{{\"schema\":\"redlock-bench/1\",\"lib\":\"redlock-asio\",\"workload\":\"{}\","
      "\"nodes\":{},\"quorum\":{},\"ttl_ms\":{}{}",
      workload, nodes, quorum, lock_ttl.count(), bench_fencing ? ",\"fencing\":true" : "");
}

std::string figures_json(const std::vector<figure>& figures) {
  std::string out;
  for (const auto& f : figures)
    out += fmt::format(",\"{}\":{:.{}f}", f.name, f.value, f.decimals);
  return out;
}

const workload& find_workload(std::string_view name) {
  for (const auto& w : workloads)
    if (w.name == name) return w;
  throw std::logic_error(fmt::format("no workload '{}'", name));
}

std::vector<figure> run_workload(std::string_view name,
                                 const std::vector<redlock::node_config>& nodes,
                                 const std::vector<pid_t>& server_pids, const settings& s) {
  const workload& chosen = find_workload(name);
  std::vector<run_result> results;
  for (int run = 0; run < s.runs; ++run) {
    run_result r = chosen.run(run_context{nodes, server_pids, s.quick, run});
    fmt::print("{},{},\"run\":{}{}}}\n", line_start(name, r.nodes.value_or(nodes.size()), r.quorum),
               chosen.params(s.quick), run, figures_json(r.figures));
    std::fflush(stdout);
    if (r.errors.total() > 0) {
      fmt::print(stderr, "redlock_bench: {} run {}: {} failed operations:\n{}", name, run,
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
             line_start(name, results.front().nodes.value_or(nodes.size()), results.front().quorum),
             chosen.params(s.quick), s.runs, figures_json(medians));
  std::fflush(stdout);
  return medians;
}

}  // namespace

int main(int argc, char** argv) {
  settings s;
  try {
    s = parse(argc, argv);
  } catch (const std::exception& e) {
    std::string names;
    for (const auto& w : workloads)
      names += fmt::format(" {}", w.name);
    fmt::print(stderr, "redlock_bench: {}\n{}workloads:{}\n", e.what(), usage, names);
    return 2;
  }
  for (const auto& note : s.left_out)
    fmt::print(stderr, "redlock_bench: workload left out, {}\n", note);
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
    std::vector<table_row> rows;
    for (const auto& workload : s.workloads)
      rows.push_back({workload, run_workload(workload, nodes, server_pids, s)});
    if (s.table) fmt::print("{}", format_table(rows, s.runs, nodes.size()));
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "redlock_bench: {}\n", e.what());
    return 1;
  }
}
