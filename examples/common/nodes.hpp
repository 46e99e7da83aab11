#ifndef REDLOCK_EXAMPLES_COMMON_NODES_HPP
#define REDLOCK_EXAMPLES_COMMON_NODES_HPP

// Where the examples find their Redis nodes: the REDLOCK_NODES environment variable, a
// comma-separated list of redis:// URLs, or a single local node when it is not set. A bad URL ends
// the program with exit code 2 and a message naming it, before any lock is taken.

#include <redlock/redlock.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

namespace examples {

inline std::vector<redlock::node_config> nodes_from_environment() {
  const char* from_env = std::getenv("REDLOCK_NODES");
  try {
    return redlock::node_config::from_url_list(from_env ? from_env : "redis://127.0.0.1:6379");
  } catch (const std::exception& e) {
    // The message names the problem: an empty entry, a bad URL (password masked), a repeated node.
    std::fprintf(stderr, "REDLOCK_NODES: %s\n", e.what());
    std::exit(2);
  }
}

}  // namespace examples

#endif
