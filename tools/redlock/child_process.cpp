#include "child_process.hpp"

#include "exit_codes.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <string>
#include <string_view>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace redlock::cli {
namespace {

// The open descriptors, from /proc/self/fd without the one listing it; false if unreadable.
bool list_descriptors(std::vector<int>& out) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    out.push_back(static_cast<int>(fd));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return true;
}

}  // namespace

inheritance inheritance::capture() {
  inheritance state;
  ::sigprocmask(SIG_SETMASK, nullptr, &state.mask_);
  for (std::size_t i = 0; i < signals_.size(); ++i) {
    ::sigaction(signals_[i], nullptr, &state.actions_[i]);
  }
  state.descriptors_known_ = list_descriptors(state.descriptors_);
  return state;
}

void inheritance::close_own_descriptors_on_exec() const {
  std::vector<int> now;
  if (!descriptors_known_ || !list_descriptors(now)) return;
  for (const int fd : now) {
    if (fd <= STDERR_FILENO || std::binary_search(descriptors_.begin(), descriptors_.end(), fd)) {
      continue;
    }
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

void inheritance::restore_signals() const noexcept {
  for (std::size_t i = 0; i < signals_.size(); ++i) {
    // A handler of ours would not survive exec anyway; what matters is default versus ignored.
    struct sigaction action = actions_[i];
    if (action.sa_handler != SIG_IGN) action.sa_handler = SIG_DFL;
    ::sigaction(signals_[i], &action, nullptr);
  }
  ::sigprocmask(SIG_SETMASK, &mask_, nullptr);
}

bool inheritance::ignored(int signal) const noexcept {
  for (std::size_t i = 0; i < signals_.size(); ++i) {
    if (signals_[i] == signal) return actions_[i].sa_handler == SIG_IGN;
  }
  return false;
}

spawn_result spawn_command(const std::vector<std::string>& command, const inheritance& inherited,
                           const std::vector<std::string>& environment, int death_signal) {
  std::vector<char*> argv;
  for (const auto& word : command)
    argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  // Built before the fork: setenv in the child is not async-signal-safe.
  const auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  const auto replaced = [&](std::string_view inherited_entry) {
    return std::any_of(environment.begin(), environment.end(), [&](const std::string& ours) {
      return name_of(ours) == name_of(inherited_entry);
    });
  };
  std::vector<char*> envp;
  for (char** inherited_entry = environ; *inherited_entry != nullptr; ++inherited_entry) {
    if (!replaced(*inherited_entry)) envp.push_back(*inherited_entry);
  }
  for (const auto& entry : environment) {
    if (entry.find('=') != std::string::npos) envp.push_back(const_cast<char*>(entry.c_str()));
  }
  envp.push_back(nullptr);
  inherited.close_own_descriptors_on_exec();

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return {-1, errno, false};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(report[0]);
    ::close(report[1]);
    return {-1, error, false};
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here on: a resolver thread may hold a lock of malloc.
    ::close(report[0]);
    inherited.restore_signals();
    ::prctl(PR_SET_PDEATHSIG, death_signal);
    if (::getppid() != parent) ::_exit(exit_code::failure);  // redlock died before prctl
    ::execvpe(argv[0], argv.data(), envp.data());
    const int error = errno;
    [[maybe_unused]] const auto written = ::write(report[1], &error, sizeof error);
    ::_exit(error == ENOENT ? exit_code::not_found : exit_code::cannot_execute);
  }
  ::close(report[1]);
  int error = 0;
  ssize_t got = 0;
  do {
    got = ::read(report[0], &error, sizeof error);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got != static_cast<ssize_t>(sizeof error)) return {pid, 0, false};  // exec closed the pipe
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return {-1, error, true};
}

}  // namespace redlock::cli
