#ifndef REDLOCK_ALGO_VALIDITY_HPP
#define REDLOCK_ALGO_VALIDITY_HPP

#include <chrono>

namespace redlock::detail {

using std::chrono::steady_clock;

// Whole milliseconds of a duration, for messages.
inline long long to_ms(steady_clock::duration d) noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// Clock drift allowance of the Redlock paper: ttl * drift_factor + 2 ms.
inline steady_clock::duration drift_allowance(std::chrono::milliseconds ttl,
                                              double drift_factor) noexcept {
  const auto scaled = std::chrono::duration<double, std::micro>(
      static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(ttl).count()) *
      drift_factor);
  return std::chrono::duration_cast<steady_clock::duration>(scaled) + std::chrono::milliseconds(2);
}

// How long a lock set with `ttl` at `start` stays ours when the quorum answered at `now`:
// ttl - (now - start) - drift. Zero or negative: not usable.
inline steady_clock::duration validity(std::chrono::milliseconds ttl, double drift_factor,
                                       steady_clock::time_point start,
                                       steady_clock::time_point now) noexcept {
  return ttl - (now - start) - drift_allowance(ttl, drift_factor);
}

}  // namespace redlock::detail

#endif
