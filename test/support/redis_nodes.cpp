// redis_nodes: runs a command with local redis-server nodes of its own.
//
//   redis_nodes [--count N | --cluster] [--quiet] -- COMMAND [ARGS...]
//
// Starts N (default 5) redis-server processes on free loopback ports, with no persistence, runs
// COMMAND with REDLOCK_NODES set to their URLs ("redis://127.0.0.1:P1,redis://127.0.0.1:P2,..."),
// stops the servers when it ends and exits with COMMAND's exit code (128 + signal if it was
// killed). Ctrl-C reaches COMMAND (same process group); the servers are stopped after it has
// ended. The servers also die if this process is killed (they are its children, with a parent-death
// signal). Used by the examples' tests and by scripts/demo.sh.
//
// --cluster starts a Redis Cluster instead (three masters with a replica each) and sets
// REDLOCK_NODES to one redis+cluster:// URL naming every member as a seed: the cluster is the one
// Redlock node.

#include "support/redis_cluster.hpp"
#include "support/redis_fleet.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "redis_nodes: %s\n"
               "usage: redis_nodes [--count N | --cluster] [--quiet] -- COMMAND [ARGS...]\n",
               why);
  return 2;
}

// Runs argv to its end. SIGINT and SIGTERM are ignored here meanwhile: the terminal sends Ctrl-C
// to the command as well, and this process must live on to stop the servers afterwards.
int run_command(char* const argv[]) {
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("redis_nodes: fork");
    return 127;
  }
  if (child == 0) {
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execvp(argv[0], argv);
    std::fprintf(stderr, "redis_nodes: cannot run %s\n", argv[0]);
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

}  // namespace

int main(int argc, char* argv[]) {
  std::size_t count = 5;
  bool quiet = false;
  bool cluster = false;
  int first = 1;
  for (; first < argc; ++first) {
    const std::string_view arg = argv[first];
    if (arg == "--") {
      ++first;
      break;
    }
    if (arg == "--quiet") {
      quiet = true;
    } else if (arg == "--cluster") {
      cluster = true;
    } else if (arg == "--count" && first + 1 < argc) {
      char* end = nullptr;
      const long value = std::strtol(argv[++first], &end, 10);
      if (*end != '\0' || value < 1 || value > 64) return usage("--count wants 1 to 64");
      count = static_cast<std::size_t>(value);
    } else {
      return usage(fmt::format("unknown argument \"{}\"", arg).c_str());
    }
  }
  if (first >= argc) return usage("no command given");

  // Ignored before the servers start, so that an early Ctrl-C cannot skip their shutdown.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  try {
    const auto run_with = [&](const std::string& urls, std::string_view what) {
      ::setenv("REDLOCK_NODES", urls.c_str(), 1);
      if (!quiet)
        std::fprintf(stderr, "redis_nodes: %s: %s\n", std::string(what).c_str(), urls.c_str());
      const int code = run_command(argv + first);
      if (!quiet) std::fprintf(stderr, "redis_nodes: stopping the nodes\n");
      return code;
    };
    if (cluster) {
      redlock::test::redis_cluster servers;
      return run_with(servers.seeds_url(), "a Redis Cluster of 3 masters and 3 replicas");
    }
    redlock::test::redis_fleet fleet(count);
    std::string urls;
    for (const auto& node : fleet.configs()) {
      if (!urls.empty()) urls += ',';
      urls += fmt::format("redis://{}", node.address());
    }
    return run_with(urls, fmt::format("{} nodes", count));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redis_nodes: %s\n", e.what());
    return 127;
  }
}
