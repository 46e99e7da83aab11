#ifndef REDLOCK_TEST_SUPPORT_RECORDED_ACQUIRE_HPP
#define REDLOCK_TEST_SUPPORT_RECORDED_ACQUIRE_HPP

// An acquire as the local queues see one (queued_acquire), that only records what they tell it:
// "NAME wakes", "NAME competes", "NAME claims" in a shared log, and the end of its last claim.

#include "lock/local_queues.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace redlock::test {

using event_log = std::vector<std::string>;

class recorded_acquire final : public detail::queued_acquire {
 public:
  recorded_acquire() = default;
  recorded_acquire(std::string name, event_log& log) : name_(std::move(name)), log_(&log) {}

  void wake() override { note("wakes"); }
  void compete(std::chrono::steady_clock::time_point) override { note("competes"); }
  void announced(std::size_t, std::size_t) override {}
  void permit_released_here(std::size_t) override {}
  void subscription_changed(bool) override {}
  void claims_until(std::chrono::steady_clock::time_point until) override {
    claimed_until = until;
    note("claims");
  }

  std::optional<std::chrono::steady_clock::time_point> claimed_until;

 private:
  void note(const char* what) {
    if (log_ != nullptr) log_->push_back(name_ + " " + what);
  }

  std::string name_;
  event_log* log_ = nullptr;
};

}  // namespace redlock::test

#endif
