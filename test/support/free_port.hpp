#ifndef REDLOCK_TEST_SUPPORT_FREE_PORT_HPP
#define REDLOCK_TEST_SUPPORT_FREE_PORT_HPP

#include <cstdint>
#include <optional>

namespace redlock::test {

// A TCP port on 127.0.0.1 (of the calling thread's network namespace), chosen by the kernel, that
// no other holder of a reserved_port on this machine can pick while this object lives.
//
// Test processes run side by side, and a fixture that kills a server and starts it again on the
// same port leaves that port free in between. A bare bind(0) elsewhere may be handed exactly that
// port; the other process's server then answers at the first one's address, and each test acts
// on the other's keys. The reservation is an exclusive flock(2) on a file named after the port in
// a directory every test process shares (under the temporary directory): a pick skips ports whose
// file another process holds, and the kernel drops the lock when the holder exits, however it
// exits, so a crashed test never strands a port.
//
// The reservation does not bind the port: the caller's server must still detect "Address already
// in use" (a process outside the tests, or a connect() holding it as its ephemeral port) and pick
// again. Move-only; destruction releases the port. Throws std::system_error when no socket can be
// bound or the directory cannot be used.
class reserved_port {
 public:
  reserved_port() = default;  // holds nothing; number() is 0
  static reserved_port pick();
  // That port, if no one else holds its reservation; nullopt if someone does.
  static std::optional<reserved_port> reserve(std::uint16_t port);

  reserved_port(reserved_port&& other) noexcept;
  reserved_port& operator=(reserved_port&& other) noexcept;
  reserved_port(const reserved_port&) = delete;
  reserved_port& operator=(const reserved_port&) = delete;
  ~reserved_port();

  std::uint16_t number() const noexcept { return port_; }

 private:
  reserved_port(std::uint16_t port, int lock_fd) noexcept : port_(port), lock_fd_(lock_fd) {}
  void release() noexcept;

  std::uint16_t port_ = 0;
  int lock_fd_ = -1;
};

}  // namespace redlock::test

#endif
