#include "support/netns.hpp"

#include "support/child_exec.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <sched.h>
#include <signal.h>
#include <stdexcept>
#include <string_view>
#include <sys/wait.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <utility>

namespace redlock::test {
namespace {

using namespace std::chrono_literals;

// Where `ip netns add` keeps the namespaces it names (iproute2's NETNS_RUN_DIR).
constexpr std::string_view netns_dir = "/var/run/netns";
constexpr std::string_view name_prefix = "redlock-";
constexpr auto carrier_timeout = 5s;

[[noreturn]] void throw_errno(const std::string& what) {
  const int err = errno;
  throw std::system_error(err, std::generic_category(), fmt::format("netns: {}", what));
}

std::optional<std::filesystem::path> find_on_path(std::string_view program) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path == nullptr ? "/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin" : path;
  for (;;) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    const auto candidate = std::filesystem::path(dir.empty() ? "." : std::string(dir)) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    rest = rest.substr(colon + 1);
  }
  // Root's PATH has the sbin directories; a user's often does not, and ip lives there.
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    const auto candidate = std::filesystem::path(dir) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

const std::filesystem::path& ip_program() {
  static const std::optional<std::filesystem::path> found = find_on_path("ip");
  if (!found) throw std::runtime_error("netns: `ip` (iproute2) not found");
  return *found;
}

// Runs `ip args...` and returns what it printed (stdout and stderr together). Throws when it cannot
// be run or does not exit with status 0.
std::string run_ip(std::vector<std::string> args) {
  const std::filesystem::path& program = ip_program();
  args.insert(args.begin(), program.string());
  const std::string command = fmt::format("{}", fmt::join(args, " "));

  // Prepared before fork: the child of a multi-threaded process may only make async-signal-safe
  // calls until exec.
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw_errno("pipe2");
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    const int saved = errno;
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    errno = saved;
    throw_errno("open /dev/null");
  }
  const unsigned max_fd = inherited_descriptor_limit();

  const pid_t pid = ::fork();
  if (pid < 0) {
    const int saved = errno;
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::close(null_fd);
    errno = saved;
    throw_errno("fork");
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::dup2(null_fd, STDIN_FILENO) < 0 || ::dup2(pipe_fds[1], STDOUT_FILENO) < 0 ||
        ::dup2(pipe_fds[1], STDERR_FILENO) < 0) {
      ::_exit(127);
    }
    close_inherited_and_exec(argv.data(), max_fd);
  }
  ::close(null_fd);
  ::close(pipe_fds[1]);

  std::string output;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (n > 0) {
      output.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(pipe_fds[0]);

  int status = 0;
  pid_t waited = -1;
  do {
    waited = ::waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited != pid) throw_errno(fmt::format("waitpid for `{}`", command));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!output.empty() && output.back() == '\n') {
      output.pop_back();
    }
    throw std::runtime_error(fmt::format("netns: `{}` failed ({}): {}", command,
                                         describe_wait_status(status),
                                         output.empty() ? "no output" : output));
  }
  return output;
}

std::string unique_prefix() {
  static std::atomic<unsigned> counter{0};
  return fmt::format("{}{}-{}-", name_prefix, ::getpid(), counter++);
}

// Namespaces named by test processes that are gone (killed before their destructors ran). Only
// names with our prefix and a pid that no longer exists are touched, so a parallel run's
// namespaces are left alone.
void remove_stale_namespaces() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(netns_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(name_prefix)) continue;
    const std::string_view rest = std::string_view(name).substr(name_prefix.size());
    pid_t pid = 0;
    const auto [end, parse_error] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (parse_error != std::errc() || end == rest.data() || *end != '-' || pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    try {
      run_ip({"netns", "delete", name});
    } catch (const std::exception&) {
      // Another process may be sweeping the same name; the constructor must not fail for that.
    }
  }
}

}  // namespace

netns::guard::guard(const std::string& name) {
  if (name.empty()) return;
  // thread-self, not self: /proc/self names the main thread, and this thread may be elsewhere.
  previous_fd_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (previous_fd_ < 0) throw_errno("open /proc/thread-self/ns/net");
  const std::string path = path_of(name);
  const int target = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (target < 0 || ::setns(target, CLONE_NEWNET) != 0) {
    const int saved = errno;
    if (target >= 0) ::close(target);
    ::close(previous_fd_);
    errno = saved;
    throw_errno(fmt::format("enter network namespace {}", name));
  }
  ::close(target);
}

netns::guard::~guard() {
  if (previous_fd_ < 0) return;
  if (::setns(previous_fd_, CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "netns: cannot return to the previous network namespace (errno %d)\n",
                 errno);
    std::abort();
  }
  ::close(previous_fd_);
}

std::string netns::path_of(const std::string& name) {
  return fmt::format("{}/{}", netns_dir, name);
}

bool netns::permitted(std::string& reason) {
  if (!find_on_path("ip")) {
    reason = "`ip` (iproute2) not found";
    return false;
  }
  const std::string probe = unique_prefix() + "probe";
  try {
    run_ip({"netns", "add", probe});
  } catch (const std::exception& e) {
    reason =
        ::geteuid() == 0 ? e.what() : fmt::format("not root (euid {}): {}", ::geteuid(), e.what());
    return false;
  }
  bool ok = true;
  try {
    const guard inside(probe);
  } catch (const std::exception& e) {
    reason = e.what();
    ok = false;
  }
  try {
    run_ip({"netns", "delete", probe});
  } catch (const std::exception& e) {
    if (ok) reason = e.what();
    ok = false;
  }
  return ok;
}

netns::netns(std::size_t servers) {
  if (servers == 0 || servers > 255) throw std::invalid_argument("netns: 1 to 255 servers");
  remove_stale_namespaces();
  const std::string prefix = unique_prefix();
  client_ = prefix + "client";
  for (std::size_t i = 0; i < servers; ++i) {
    servers_.push_back(fmt::format("{}s{}", prefix, i));
  }
  partitioned_.assign(servers, false);
  // The destructor does not run when the constructor throws, so clean up here.
  try {
    const auto add_namespace = [this](const std::string& name) {
      run_ip({"netns", "add", name});
      created_.push_back(name);
      run_ip({"-n", name, "link", "set", "lo", "up"});
    };
    add_namespace(client_);
    for (const std::string& name : servers_) {
      add_namespace(name);
    }
    for (std::size_t i = 0; i < servers; ++i) {
      const std::string client_end = fmt::format("srv{}", i);
      // Created inside the client namespace with the peer placed straight into the server's:
      // no end ever exists in the caller's namespace, and names only need to be unique there.
      run_ip({"-n", client_, "link", "add", client_end, "type", "veth", "peer", "name", "cli",
              "netns", servers_[i]});
      run_ip({"-n", client_, "addr", "add", client_address(i) + "/30", "dev", client_end});
      run_ip({"-n", servers_[i], "addr", "add", server_address(i) + "/30", "dev", "cli"});
      run_ip({"-n", servers_[i], "link", "set", "cli", "up"});
      run_ip({"-n", client_, "link", "set", client_end, "up"});
    }
    for (std::size_t i = 0; i < servers; ++i) {
      set_server_end(i, true);
    }
  } catch (...) {
    destroy();
    throw;
  }
}

netns::~netns() {
  destroy();
}

std::string netns::server_address(std::size_t i) const {
  return fmt::format("10.200.{}.2", static_cast<unsigned>(i));
}

std::string netns::client_address(std::size_t i) const {
  return fmt::format("10.200.{}.1", static_cast<unsigned>(i));
}

void netns::partition(std::size_t i) {
  set_server_end(i, false);
  partitioned_.at(i) = true;
}

void netns::heal(std::size_t i) {
  set_server_end(i, true);
  partitioned_.at(i) = false;
}

void netns::set_server_end(std::size_t i, bool up) {
  run_ip({"-n", server_namespace(i), "link", "set", "cli", up ? "up" : "down"});
  if (!up) return;
  // Carrier comes back through the kernel's link watcher, not with the command; until it does the
  // client end drops what it sends. Waiting here makes "healed" mean "packets flow".
  const auto until = std::chrono::steady_clock::now() + carrier_timeout;
  const std::string client_end = fmt::format("srv{}", i);
  for (;;) {
    const std::string shown = run_ip({"-n", client_, "-o", "link", "show", "dev", client_end});
    if (shown.find("LOWER_UP") != std::string::npos) return;
    if (std::chrono::steady_clock::now() >= until) {
      throw std::runtime_error(fmt::format("netns: {} in {} has no carrier after {} s: {}",
                                           client_end, client_,
                                           std::chrono::seconds(carrier_timeout).count(), shown));
    }
    std::this_thread::sleep_for(10ms);
  }
}

void netns::destroy() noexcept {
  // Deleting a namespace removes its end of every veth pair, and with it the peer.
  while (!created_.empty()) {
    try {
      run_ip({"netns", "delete", created_.back()});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
    }
    created_.pop_back();
  }
}

}  // namespace redlock::test
