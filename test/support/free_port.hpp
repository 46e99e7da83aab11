#ifndef REDLOCK_TEST_SUPPORT_FREE_PORT_HPP
#define REDLOCK_TEST_SUPPORT_FREE_PORT_HPP

#include <cstdint>

namespace redlock::test {

// A TCP port on 127.0.0.1 (of the calling thread's network namespace) that was free a moment ago,
// chosen by the kernel. Nothing holds it afterwards, so whoever binds it first wins: a caller that
// hands it to a server must detect "Address already in use" and ask again. Throws
// std::system_error when no socket can be bound.
std::uint16_t pick_free_port();

}  // namespace redlock::test

#endif
