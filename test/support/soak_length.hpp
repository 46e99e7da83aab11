#pragma once

// How long a soak runs: its own short length in the suite, or REDLOCK_SOAK_SECONDS (scripts/soak.sh
// sets it for the long runs of a nightly job). The suite's lengths are short because the
// simulation (test/sim) now covers the long random histories; a soak shows the same properties on
// real servers, real sockets and forked processes.

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace redlock::test {

inline std::chrono::seconds soak_length(std::chrono::seconds in_the_suite) {
  const char* text = std::getenv("REDLOCK_SOAK_SECONDS");
  if (text == nullptr || *text == '\0') return in_the_suite;
  char* end = nullptr;
  const long seconds = std::strtol(text, &end, 10);
  if (*end != '\0' || seconds <= 0 || seconds > 7 * 24 * 3600)
    throw std::invalid_argument("REDLOCK_SOAK_SECONDS=\"" + std::string(text) +
                                "\" is not a number of seconds between 1 and 604800");
  return std::chrono::seconds(seconds);
}

}  // namespace redlock::test
