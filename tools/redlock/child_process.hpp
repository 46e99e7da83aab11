#ifndef REDLOCK_TOOLS_REDLOCK_CHILD_PROCESS_HPP
#define REDLOCK_TOOLS_REDLOCK_CHILD_PROCESS_HPP

#include <array>
#include <signal.h>
#include <string>
#include <sys/types.h>
#include <vector>

namespace redlock::cli {

// What COMMAND inherits: the state redlock itself was started with, captured in main() before
// Asio changes it. Asio ignores SIGPIPE (for every io_context) and catches SIGINT, SIGTERM, SIGHUP
// and SIGCHLD (signal_set); COMMAND must see them as a shell would have left them. Likewise
// COMMAND gets the descriptors redlock was given (a script's "3>file" still works) but not
// redlock's own sockets to the nodes.
class inheritance {
 public:
  static inheritance capture();

  // Marks every descriptor opened since capture() close-on-exec (redlock itself never execs).
  // Does nothing when /proc/self/fd could not be read at capture time.
  void close_own_descriptors_on_exec() const;

  // In the forked child only: async-signal-safe.
  void restore_signals() const noexcept;

  // Whether `signal` (one of SIGINT, SIGTERM, SIGHUP) was ignored when redlock started, as a shell
  // does for background jobs: redlock then leaves it alone as well.
  bool ignored(int signal) const noexcept;

 private:
  static constexpr std::array<int, 5> signals_ = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};

  sigset_t mask_{};
  std::array<struct sigaction, signals_.size()> actions_{};
  std::vector<int> descriptors_;  // sorted
  bool descriptors_known_ = false;
};

struct spawn_result {
  pid_t pid = -1;            // > 0: COMMAND is running
  int error = 0;             // otherwise: errno of fork, or of exec when exec_failed
  bool exec_failed = false;  // COMMAND could not be executed (the child was reaped already)
};

// Forks and runs `command` (non-empty; PATH search as execvp) with the inherited signal state,
// and with this process's environment changed by `environment`: a "NAME=value" entry sets NAME,
// a bare "NAME" removes it.
// Returns once COMMAND runs or its exec has failed, which a close-on-exec pipe reports. COMMAND
// gets `death_signal` if redlock dies first (PR_SET_PDEATHSIG): its lock is no longer renewed
// then. SIGTERM, or SIGKILL with --grace 0.
spawn_result spawn_command(const std::vector<std::string>& command, const inheritance& inherited,
                           const std::vector<std::string>& environment, int death_signal = SIGTERM);

}  // namespace redlock::cli

#endif
