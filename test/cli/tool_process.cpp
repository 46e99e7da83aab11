#include "cli/tool_process.hpp"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <signal.h>
#include <stdexcept>
#include <string_view>
#include <sys/wait.h>
#include <system_error>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace redlock::test {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int open_or_throw(const char* path, int flags) {
  const int fd = ::open(path, flags | O_CLOEXEC, 0600);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), path);
  return fd;
}

// The test's environment with REDLOCK_NODES replaced, so that a developer's own setting cannot
// point the tool at real servers.
std::vector<std::string> child_environment(const std::string& nodes) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!std::string_view(*entry).starts_with("REDLOCK_NODES=")) env.emplace_back(*entry);
  }
  if (!nodes.empty()) env.push_back("REDLOCK_NODES=" + nodes);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& words) {
  std::vector<char*> out;
  for (auto& word : words)
    out.push_back(word.data());
  out.push_back(nullptr);
  return out;
}

int shell_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

tool_process::tool_process(const std::vector<std::string>& args, const std::string& nodes,
                           const std::filesystem::path& scratch) {
  static int runs = 0;
  const int run = ++runs;
  out_path_ = scratch / fmt::format("tool-{}.out", run);
  err_path_ = scratch / fmt::format("tool-{}.err", run);

  std::vector<std::string> argv_words{REDLOCK_CLI_PATH};
  argv_words.insert(argv_words.end(), args.begin(), args.end());
  auto env_words = child_environment(nodes);
  auto argv = pointers(argv_words);
  auto envp = pointers(env_words);

  const int in = open_or_throw("/dev/null", O_RDONLY);
  const int out = open_or_throw(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC);
  const int err = open_or_throw(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC);
  started_ = clock::now();
  pid_ = ::fork();
  if (pid_ == 0) {
    // The tool starts with descriptors 0, 1 and 2 only, as from a shell: none of the test's
    // sockets to the servers may live on in it.
    if (::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(125);
    // Whatever the test runner ignores or blocks, the tool starts as from an interactive shell.
    for (const int number : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD})
      ::signal(number, SIG_DFL);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::close_range(3, ~0u, 0);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(125);
  }
  const int fork_error = errno;
  ::close(in);
  ::close(out);
  ::close(err);
  if (pid_ < 0) throw std::system_error(fork_error, std::generic_category(), "fork");
}

tool_process::~tool_process() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void tool_process::signal(int number) const {
  if (pid_ > 0 && !status_) ::kill(pid_, number);
}

bool tool_process::running() {
  if (status_) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
  status_ = status;
  ended_ = clock::now();
  return false;
}

tool_result tool_process::wait(std::chrono::milliseconds limit) {
  const auto until = clock::now() + limit;
  while (running()) {
    if (clock::now() > until) {
      ::kill(pid_, SIGKILL);
      while (running())
        std::this_thread::sleep_for(1ms);
      throw std::runtime_error(fmt::format("redlock did not end within {} ms; stderr: {}",
                                           limit.count(), read_file(err_path_)));
    }
    std::this_thread::sleep_for(5ms);
  }
  tool_result result;
  result.exit_code = shell_code(*status_);
  result.out = read_file(out_path_);
  result.err = read_file(err_path_);
  result.took = std::chrono::duration_cast<std::chrono::milliseconds>(ended_ - started_);
  return result;
}

tool_result run_tool(const std::vector<std::string>& args, const std::string& nodes,
                     const std::filesystem::path& scratch, std::chrono::milliseconds limit) {
  tool_process process(args, nodes, scratch);
  return process.wait(limit);
}

scratch_dir::scratch_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "redlock-cli-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp");
  }
  path_ = pattern;
}

scratch_dir::~scratch_dir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace redlock::test
