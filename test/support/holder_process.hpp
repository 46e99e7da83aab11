#ifndef REDLOCK_TEST_SUPPORT_HOLDER_PROCESS_HPP
#define REDLOCK_TEST_SUPPORT_HOLDER_PROCESS_HPP

// A holder that crashes: a child process (fork) that takes a lock, a permit or a read lock of its
// own client and holds it, renewing, until the test kills it.

#include "support/async_test.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace redlock::test {

// Kills `child` with SIGKILL and reaps it.
inline void kill_process(pid_t child) {
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
}

// Forks a child that runs `hold(io, took)` on an io_context of its own: `hold` takes what it is
// to hold, calls took(true) (took(false) when it could not), and then keeps it until the process
// is killed (a long sleep). Returns the child's pid once it took it; when it did not, kills it and
// throws std::runtime_error. Forking is safe only while no other thread runs in this process (the
// test's servers are child processes).
template <class Hold>
pid_t start_holder_process(Hold hold) {
  int ready[2];
  if (::pipe(ready) != 0) throw std::runtime_error("holder process: pipe failed");
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("holder process: fork failed");
  if (child == 0) {
    ::close(ready[0]);
    const auto took = [&](bool taken) {
      const char byte = taken ? 1 : 0;
      [[maybe_unused]] const auto sent = ::write(ready[1], &byte, 1);
    };
    try {
      run_async([&](boost::asio::io_context& io) { return hold(io, took); });
    } catch (...) {
    }
    std::_Exit(3);
  }
  ::close(ready[1]);
  char byte = 0;
  const auto got = ::read(ready[0], &byte, 1);
  ::close(ready[0]);
  if (got != 1 || byte != 1) {
    kill_process(child);
    throw std::runtime_error("the holder process did not take what it was to hold");
  }
  return child;
}

}  // namespace redlock::test

#endif
