#include "sim/history.hpp"

#include <fmt/format.h>

#include <chrono>

namespace redlock::sim {

std::string at_text(time_point t) {
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(t - detail::lock_clock::epoch())
          .count();
  return fmt::format("{}.{:03}", us / 1000, us % 1000);
}

}  // namespace redlock::sim
