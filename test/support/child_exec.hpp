#ifndef REDLOCK_TEST_SUPPORT_CHILD_EXEC_HPP
#define REDLOCK_TEST_SUPPORT_CHILD_EXEC_HPP

#include <fmt/format.h>

#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace redlock::test {

// The highest descriptor number a child may have inherited, read in the parent before fork
// (getrlimit is not on the async-signal-safe list).
inline unsigned inherited_descriptor_limit() noexcept {
  rlimit files{};
  return ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
             ? static_cast<unsigned>(files.rlim_cur)
             : 65536u;
}

// The last step of a forked child (only async-signal-safe calls): closes every inherited
// descriptor above stderr, so that sockets of the test process do not live on in the new program
// (closing them in the test must close the connection), then runs argv[0]. Exits 127 on failure.
[[noreturn]] inline void close_inherited_and_exec(char* const argv[], unsigned max_fd) noexcept {
  if (::close_range(3, ~0u, 0) != 0) {
    for (unsigned fd = 3; fd < max_fd; ++fd) {
      ::close(static_cast<int>(fd));
    }
  }
  ::execv(argv[0], argv);
  ::_exit(127);
}

// A child's end as waitpid() reported it, for messages: "exited with status 1", "killed by
// signal 9".
inline std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return fmt::format("wait status {}", status);
}

}  // namespace redlock::test

#endif
