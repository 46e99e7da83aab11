#ifndef REDLOCK_BACKOFF_HPP
#define REDLOCK_BACKOFF_HPP

#include "redlock/options.hpp"

#include <algorithm>
#include <chrono>
#include <random>

namespace redlock::detail {

// Exponential backoff with full jitter over a retry_policy. Pure: randomness comes from the
// caller's generator so tests can seed it.
class backoff {
 public:
  explicit backoff(const retry_policy& policy) noexcept
      : policy_(sanitize(policy)), ceiling_(policy_.initial_delay) {}

  // The next delay, uniform in [0, current ceiling]; then the ceiling grows by the multiplier up to
  // max_delay.
  template <class Generator>
  std::chrono::milliseconds next(Generator& generator) {
    const auto ceiling = ceiling_;
    const double grown = static_cast<double>(ceiling_.count()) * policy_.multiplier;
    const double cap = static_cast<double>(policy_.max_delay.count());
    ceiling_ = std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(
        std::max(static_cast<double>(policy_.initial_delay.count()), std::min(grown, cap))));
    std::uniform_int_distribution<std::chrono::milliseconds::rep> pick(0, ceiling.count());
    return std::chrono::milliseconds(pick(generator));
  }

  // The upper bound of the delay next() will return.
  std::chrono::milliseconds ceiling() const noexcept { return ceiling_; }

  void reset() noexcept { ceiling_ = policy_.initial_delay; }

 private:
  // Negative delays become zero, max below initial is raised to initial, and a multiplier below 1
  // (which would shrink the delay) is treated as 1.
  static retry_policy sanitize(retry_policy p) noexcept {
    p.initial_delay = std::max(p.initial_delay, std::chrono::milliseconds(0));
    p.max_delay = std::max(p.max_delay, p.initial_delay);
    if (!(p.multiplier >= 1.0)) p.multiplier = 1.0;
    return p;
  }

  retry_policy policy_;
  std::chrono::milliseconds ceiling_;
};

}  // namespace redlock::detail

#endif
