// redlock_sim: runs the deterministic simulation (docs/testing.md).
//
//   redlock_sim --seeds A..B      every seed in the range; exit 0 when all pass
//   redlock_sim --seconds N       random seeds until N seconds have passed
//   redlock_sim --replay SEED     one seed, its whole history printed
//                [--path I,J,...] the shrunk scenario a failure printed, instead of the seed's own
//   --keep-going                  reports every failing seed (unshrunk) instead of stopping
//   --faults N, --no-network-faults   at most N injected faults a history (0: none); no late
//                                 messages or resets after execution
//   --socket-writes MODE          what client sockets take at once in every run (async: nothing,
//                                 whole, mixed) instead of what each seed chooses
//   --defect NAME                 runs a library with a known defect brought back
//                                 (src/unsafe_switches.hpp); with --expect-failure the run passes
//                                 when some seed fails, and says after how many seeds
//
// A failing seed is shrunk (rapidcheck's shrinks of its scenario, greedily, while they still fail)
// and printed with the problems, the history and the command that replays it exactly.

#include "sim/checkers.hpp"
#include "sim/runner.hpp"
#include "sim/scenario.hpp"
#include "unsafe_switches.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace redlock::sim;

constexpr int generation_size = 100;

using redlock::detail::known_defect;

const std::pair<std::string_view, known_defect> defects[] = {
    {"rw-fence-wrong-counter", known_defect::rw_fence_wrong_counter},
    {"release-without-token", known_defect::release_without_token},
    {"validity-without-elapsed", known_defect::validity_without_elapsed},
    {"failed-round-not-cleaned", known_defect::failed_round_not_cleaned},
    {"announcement-dropped-in-round", known_defect::announcement_dropped_in_round},
    {"set-checks-first-key-only", known_defect::set_checks_first_key_only},
    {"reader-fence-not-written-back", known_defect::reader_fence_not_written_back},
    {"renewal-without-token", known_defect::renewal_without_token},
};

struct outcome {
  std::vector<std::string> problems;
  run_stats stats;
  std::size_t operations = 0;
};

// --socket-writes: every run's socket mode instead of each seed's own.
std::optional<socket_writes> forced_writes;

const std::pair<std::string_view, socket_writes> write_modes[] = {
    {"async", socket_writes::async_only},
    {"whole", socket_writes::whole},
    {"mixed", socket_writes::mixed},
};

std::string forced_writes_argument() {
  if (!forced_writes) return "";
  for (const auto& [name, mode] : write_modes)
    if (mode == *forced_writes) return fmt::format(" --socket-writes {}", name);
  return "";
}

outcome run_one(const scenario& s, bool trace, history* keep = nullptr) {
  outcome out;
  run_options options;
  options.trace = trace;
  options.writes = forced_writes;
  history h = run_scenario(s, options, &out.stats);
  out.problems = check_all(s, h);
  out.operations = s.operations.size();
  if (keep) *keep = std::move(h);
  return out;
}

rc::Shrinkable<scenario> generate(const scenario_space& space, std::uint64_t seed) {
  return scenario_generator(space)(rc::Random(seed), generation_size);
}

// Follows `path` (an index into the shrinks at each level) from the seed's scenario.
std::optional<rc::Shrinkable<scenario>> follow(rc::Shrinkable<scenario> at,
                                               const std::vector<std::size_t>& path) {
  for (std::size_t index : path) {
    auto shrinks = at.shrinks();
    std::optional<rc::Shrinkable<scenario>> next;
    for (std::size_t i = 0; auto candidate = shrinks.next(); ++i) {
      if (i == index) {
        next = std::move(*candidate);
        break;
      }
    }
    if (!next) return std::nullopt;
    at = std::move(*next);
  }
  return at;
}

// Greedy shrinking: the first smaller scenario that still fails, again and again.
std::vector<std::size_t> shrink(rc::Shrinkable<scenario> failing, std::size_t budget) {
  std::vector<std::size_t> path;
  bool progressed = true;
  while (progressed && budget > 0) {
    progressed = false;
    auto shrinks = failing.shrinks();
    for (std::size_t i = 0; budget > 0; ++i) {
      auto candidate = shrinks.next();
      if (!candidate) break;
      --budget;
      if (!run_one(candidate->value(), false).problems.empty()) {
        path.push_back(i);
        failing = std::move(*candidate);
        progressed = true;
        break;
      }
    }
  }
  return path;
}

std::string path_text(const std::vector<std::size_t>& path) {
  return fmt::format("{}", fmt::join(path, ","));
}

void print_history(const scenario& s, const history& h, const std::vector<std::string>& problems) {
  std::cout << s;
  for (const auto& line : h.events)
    std::cout << "  " << line << '\n';
  for (const auto& p : problems)
    std::cout << "PROBLEM " << p << '\n';
}

int report_failure(const scenario_space& space, std::uint64_t seed,
                   const std::vector<std::string>& problems, bool do_shrink) {
  std::cout << fmt::format("seed {} FAILED:\n", seed);
  for (const auto& p : problems)
    std::cout << "  " << p << '\n';
  std::vector<std::size_t> path;
  if (do_shrink) path = shrink(generate(space, seed), 3000);
  auto shrunk = follow(generate(space, seed), path);
  history h;
  const auto again = run_one(shrunk->value(), true, &h);
  std::cout << fmt::format("shrunk to {} operations and {} faults:\n",
                           shrunk->value().operations.size(), shrunk->value().faults.size());
  print_history(shrunk->value(), h, again.problems);
  std::cout << fmt::format("replay: redlock_sim --replay {}{}{}\n", seed,
                           path.empty() ? "" : " --path " + path_text(path),
                           forced_writes_argument());
  return 1;
}

bool parse_range(std::string_view text, std::uint64_t& from, std::uint64_t& to) {
  const auto dots = text.find("..");
  if (dots == std::string_view::npos) return false;
  from = std::stoull(std::string(text.substr(0, dots)));
  to = std::stoull(std::string(text.substr(dots + 2)));
  return from <= to;
}

int usage() {
  std::cerr
      << "usage: redlock_sim --seeds A..B | --seconds N | --replay SEED [--path I,J,...]\n"
         "       [--no-shrink] [--operations N] [--faults N] [--no-network-faults] [--quiet]\n"
         "       [--defect NAME [--expect-failure]] [--keep-going]\n"
         "       [--socket-writes async|whole|mixed]\n"
         "defects:";
  for (const auto& [name, defect] : defects)
    std::cerr << ' ' << name;
  std::cerr << '\n';
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<std::pair<std::uint64_t, std::uint64_t>> seeds;
  std::optional<double> seconds;
  std::optional<std::uint64_t> replay;
  std::vector<std::size_t> path;
  bool do_shrink = true;
  bool quiet = false;
  bool expect_failure = false;
  bool keep_going = false;
  std::uint64_t failures = 0;
  scenario_space space;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    try {
      if (arg == "--seeds" && has_value) {
        std::uint64_t from = 0, to = 0;
        if (!parse_range(argv[++i], from, to)) return usage();
        seeds.emplace(from, to);
      } else if (arg == "--seconds" && has_value) {
        seconds = std::stod(argv[++i]);
      } else if (arg == "--replay" && has_value) {
        replay = std::stoull(argv[++i]);
      } else if (arg == "--path" && has_value) {
        std::stringstream list(argv[++i]);
        for (std::string part; std::getline(list, part, ',');)
          path.push_back(std::stoul(part));
      } else if (arg == "--no-shrink") {
        do_shrink = false;
      } else if (arg == "--operations" && has_value) {
        space.most_operations = static_cast<std::uint32_t>(std::stoul(argv[++i]));
      } else if (arg == "--faults" && has_value) {
        space.most_faults = static_cast<std::uint32_t>(std::stoul(argv[++i]));
      } else if (arg == "--no-network-faults") {
        space.network_faults = false;
      } else if (arg == "--socket-writes" && has_value) {
        const std::string_view wanted = argv[++i];
        const auto* found = std::find_if(std::begin(write_modes), std::end(write_modes),
                                         [&](const auto& m) { return m.first == wanted; });
        if (found == std::end(write_modes)) return usage();
        forced_writes = found->second;
      } else if (arg == "--quiet") {
        quiet = true;
      } else if (arg == "--keep-going") {
        keep_going = true;
      } else if (arg == "--expect-failure") {
        expect_failure = true;
      } else if (arg == "--defect" && has_value) {
        const std::string_view wanted = argv[++i];
        const auto* found = std::find_if(std::begin(defects), std::end(defects),
                                         [&](const auto& d) { return d.first == wanted; });
        if (found == std::end(defects)) return usage();
        redlock::detail::defect_for_tests = found->second;
      } else {
        return usage();
      }
    } catch (const std::exception&) {
      return usage();
    }
  }

  if (replay) {
    auto chosen = follow(generate(space, *replay), path);
    if (!chosen) {
      std::cerr << "redlock_sim: --path leads nowhere from this seed\n";
      return 2;
    }
    history h;
    const auto result = run_one(chosen->value(), true, &h);
    print_history(chosen->value(), h, result.problems);
    std::cout << (result.problems.empty() ? "PASSED\n" : "FAILED\n");
    return result.problems.empty() ? 0 : 1;
  }
  if (!seeds && !seconds) return usage();

  const auto began = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  };
  std::mt19937_64 pick_seed(std::random_device{}());
  std::uint64_t histories = 0, operations = 0, commands = 0, batched_renewals = 0;
  double virtual_seconds = 0;
  for (std::uint64_t next = seeds ? seeds->first : 0;; ++next) {
    std::uint64_t seed = next;
    if (seeds) {
      if (next > seeds->second) break;
    } else {
      if (elapsed() >= *seconds) break;
      seed = pick_seed() >> 1;
    }
    const auto result = run_one(generate(space, seed).value(), false);
    ++histories;
    operations += result.operations;
    commands += result.stats.commands;
    batched_renewals += result.stats.batched_renewals;
    virtual_seconds += result.stats.virtual_seconds;
    if (!result.problems.empty()) {
      if (expect_failure) {
        std::cout << fmt::format("found after {} seeds (seed {}): {}\n", histories, seed,
                                 result.problems.front());
        return 0;
      }
      if (!keep_going) return report_failure(space, seed, result.problems, do_shrink);
      ++failures;
      std::cout << fmt::format("seed {} FAILED: {}\n", seed, result.problems.front());
    }
    if (!quiet && histories % 100 == 0) {
      std::cerr << fmt::format("{} histories, {:.0f} s\n", histories, elapsed());
    }
  }
  const double took = elapsed();
  if (failures != 0) {
    std::cout << fmt::format("{} of {} histories FAILED\n", failures, histories);
    return 1;
  }
  if (expect_failure) {
    std::cout << fmt::format("NOT FOUND: {} histories passed with the defect in\n", histories);
    return 1;
  }
  std::cout << fmt::format(
      "passed: {} histories in {:.1f} s ({:.0f} histories a minute, {:.0f} operations a second, "
      "{:.0f} server commands a second, {:.0f} virtual seconds, {} batched renewal scripts)\n",
      histories, took, histories / took * 60, operations / took, commands / took, virtual_seconds,
      batched_renewals);
  return 0;
}
