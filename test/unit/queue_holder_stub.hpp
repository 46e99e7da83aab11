#ifndef REDLOCK_TEST_UNIT_QUEUE_HOLDER_STUB_HPP
#define REDLOCK_TEST_UNIT_QUEUE_HOLDER_STUB_HPP

#include "lock/local_queues.hpp"

namespace redlock::test {

// A lease of this client in a queue, as the queues and the round strategies see one: an address,
// only compared and stored.
inline detail::queue_holder* some_lease() {
  static detail::queue_holder holder;
  return &holder;
}

}  // namespace redlock::test

#endif
