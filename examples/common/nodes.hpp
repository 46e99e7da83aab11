#ifndef REDLOCK_EXAMPLES_COMMON_NODES_HPP
#define REDLOCK_EXAMPLES_COMMON_NODES_HPP

// Where the examples find their Redis nodes: the REDLOCK_NODES environment variable, a
// comma-separated list of redis:// URLs, or a single local node when it is not set. A bad URL ends
// the program with exit code 2 and a message naming it, before any lock is taken.

#include <redlock/redlock.hpp>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <vector>

namespace examples {

inline std::vector<redlock::node_config> nodes_from_environment() {
  const char* from_env = std::getenv("REDLOCK_NODES");
  const std::string_view list = from_env ? from_env : "redis://127.0.0.1:6379";

  std::vector<redlock::node_config> nodes;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = list.find(',', start);
    const std::string_view url = list.substr(start, comma - start);
    try {
      nodes.push_back(redlock::node_config::from_url(url));
    } catch (const std::exception& e) {
      // The message names the URL (password masked) and what is wrong with it.
      std::fprintf(stderr, "REDLOCK_NODES: %s\n", e.what());
      std::exit(2);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return nodes;
}

}  // namespace examples

#endif
