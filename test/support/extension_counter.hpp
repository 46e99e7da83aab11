#ifndef REDLOCK_TEST_SUPPORT_EXTENSION_COUNTER_HPP
#define REDLOCK_TEST_SUPPORT_EXTENSION_COUNTER_HPP

#include "redlock/observer.hpp"

#include <cstddef>

namespace redlock::test {

// Counts the extension outcomes and losses the observer is told of; called on the client's
// executor, so read it there (or once the client's work is done).
class extension_counter final : public observer {
 public:
  void on_extend(const lease_event& event) override { ++(event.error ? failed : confirmed); }
  void on_lost(const lease_event&) override { ++lost; }
  std::size_t confirmed = 0;
  std::size_t failed = 0;
  std::size_t lost = 0;
};

}  // namespace redlock::test

#endif
