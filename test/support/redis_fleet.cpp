#include "support/redis_fleet.hpp"

#include "support/child_exec.hpp"
#include "support/free_port.hpp"
#include "support/netns.hpp"
#include "support/sync_client.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <sched.h>
#include <signal.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <utility>

namespace redlock::test {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

constexpr int max_port_attempts = 5;
constexpr auto ready_timeout = 10s;
constexpr auto ready_poll_interval = 10ms;
// After kill9 the same port is normally free at once (redis-server binds with SO_REUSEADDR), but a
// connect() elsewhere may briefly hold it as its ephemeral port.
constexpr auto same_port_retry_for = 2s;
constexpr auto same_port_retry_interval = 50ms;

// Takes errno first thing: formatting `what` may allocate and overwrite errno.
[[noreturn]] void throw_errno(const char* what) {
  const int err = errno;
  throw std::system_error(err, std::generic_category(), fmt::format("redis_server: {}", what));
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto start = text.find_first_not_of(" \t\n", i);
    if (start == std::string_view::npos) break;
    const auto end = std::min(text.find_first_of(" \t\n", start), text.size());
    words.emplace_back(text.substr(start, end - start));
    i = end;
  }
  return words;
}

std::filesystem::path find_redis_server() {
  // Resolved here rather than with execvp in the child, which is not async-signal-safe.
  const char* path = std::getenv("PATH");
  std::string_view rest = path == nullptr ? "/usr/local/bin:/usr/bin:/bin" : path;
  for (;;) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    const std::filesystem::path candidate =
        std::filesystem::path(dir.empty() ? "." : std::string(dir)) / "redis-server";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    rest = rest.substr(colon + 1);
  }
  throw std::runtime_error("redis_server: redis-server not found on PATH");
}

// Where the servers' directories go: RAM-backed /dev/shm when it is there with room to spare,
// else the temporary directory. Sentinels and cluster nodes rewrite and fsync their configuration
// file on every change, inside their event loop; on a disk kept busy by a parallel build, one such
// fsync stalled a sentinel for 4.5 s in the middle of a failover, long enough for it to enter
// TILT mode and hold the failover up for 30 s.
std::filesystem::path servers_root() {
  constexpr std::uintmax_t room_needed = std::uintmax_t{256} << 20;
  const std::filesystem::path shared_memory = "/dev/shm";
  std::error_code ec;
  const auto space = std::filesystem::space(shared_memory, ec);
  if (!ec && space.available >= room_needed && ::access(shared_memory.c_str(), W_OK | X_OK) == 0) {
    return shared_memory;
  }
  return std::filesystem::temp_directory_path();
}

std::filesystem::path make_temp_dir() {
  static const std::filesystem::path root = servers_root();
  std::string pattern = (root / "redlock-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw_errno("mkdtemp");
  return pattern;
}

// waitpid, retried on EINTR. Returns the pid, 0 (WNOHANG and nothing to report) or -1 with errno.
pid_t wait_for(pid_t pid, int& status, int options) {
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, options);
    if (r >= 0 || errno != EINTR) return r;
  }
}

std::uintmax_t file_size_or_zero(const std::filesystem::path& file) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  return ec ? 0 : size;
}

std::string read_from(const std::filesystem::path& file, std::uintmax_t offset) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(offset));
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string last_lines(const std::filesystem::path& file, std::size_t count) {
  std::ifstream in(file);
  std::deque<std::string> kept;
  for (std::string line; std::getline(in, line);) {
    kept.push_back(std::move(line));
    if (kept.size() > count) kept.pop_front();
  }
  std::string out;
  for (const auto& line : kept) {
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace

redis_server::redis_server(redis_server_options options)
    : options_(std::move(options)), dir_(make_temp_dir()) {
  // The destructor does not run when the constructor throws, so clean up here.
  try {
    if (options_.sentinel && !options_.config_file) {
      throw std::invalid_argument("redis_server: a sentinel needs a config_file");
    }
    if (options_.config_file) {
      std::ofstream out(config_path(), std::ios::binary);
      out << *options_.config_file << '\n';
      if (!out.flush()) {
        throw std::runtime_error(
            fmt::format("redis_server: cannot write {}", config_path().string()));
      }
    }
    for (int attempt = 1;; ++attempt) {
      {
        // Sockets belong to the namespace of the thread that creates them.
        const netns::guard inside(options_.network_namespace);
        port_ = reserved_port::pick();
        if (options_.tls) tls_port_ = reserved_port::pick();
      }
      if (spawn_and_wait_ready() == start_result::ready) return;
      if (attempt == max_port_attempts) {
        throw std::runtime_error(
            fmt::format("redis_server: no free port after {} attempts; last log lines:\n{}",
                        attempt, log_tail()));
      }
    }
  } catch (...) {
    kill9();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

redis_server::~redis_server() {
  // SIGKILL also ends a stopped (paused) process, and waitpid reaps it, so no SIGCONT is needed.
  kill9();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::filesystem::path redis_server::config_path() const {
  return dir_ / (options_.sentinel ? "sentinel.conf" : "redis.conf");
}

node_config redis_server::config() const {
  node_config config;
  config.host = options_.bind_address.empty() ? "127.0.0.1" : options_.bind_address;
  config.port = port_.number();
  config.password = options_.password;
  return config;
}

node_config redis_server::tls_config(const std::string& ca_file, const std::string& host) const {
  if (!options_.tls) throw std::logic_error("redis_server: tls_config() of a server without TLS");
  node_config config;
  config.host = host;
  config.port = tls_port_.number();
  config.password = options_.password;
  config.tls.enabled = true;
  config.tls.ca_file = ca_file;
  return config;
}

node_config redis_server::unix_config() const {
  if (!options_.unix_socket) {
    throw std::logic_error("redis_server: unix_config() of a server without a Unix socket");
  }
  node_config config;
  config.unix_path = unix_path().string();
  config.host.clear();
  config.port = 0;
  config.password = options_.password;
  return config;
}

void redis_server::set_tls_certificate(std::string cert_file, std::string key_file) {
  if (!options_.tls) throw std::logic_error("redis_server: a certificate for a server without TLS");
  options_.tls->cert_file = std::move(cert_file);
  options_.tls->key_file = std::move(key_file);
}

void redis_server::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  // Blocking is fine: SIGKILL cannot be caught or delayed by a stopped process. ECHILD (someone
  // reaped it, e.g. SIGCHLD set to SIG_IGN) also means it is gone.
  int status = 0;
  (void)wait_for(pid_, status, 0);
  pid_ = -1;
  paused_ = false;
}

void redis_server::start() {
  if (running()) {
    // A server stopped behind our back (SHUTDOWN, a crash) is reaped here rather than refused.
    int status = 0;
    if (wait_for(pid_, status, WNOHANG) == 0) {
      throw std::logic_error(
          fmt::format("redis_server: already running on port {}", port_.number()));
    }
    pid_ = -1;
    paused_ = false;
  }
  const auto give_up = clock::now() + same_port_retry_for;
  while (spawn_and_wait_ready() == start_result::port_busy) {
    if (clock::now() >= give_up) {
      throw std::runtime_error(fmt::format(
          "redis_server: port {} stayed busy for {} ms; last log lines:\n{}", port_.number(),
          std::chrono::milliseconds(same_port_retry_for).count(), log_tail()));
    }
    std::this_thread::sleep_for(same_port_retry_interval);
  }
}

void redis_server::restart(std::chrono::milliseconds delay) {
  kill9();
  std::this_thread::sleep_for(delay);
  start();
}

void redis_server::pause() {
  if (!running()) throw std::logic_error("redis_server: pause() of a server that is not running");
  if (paused_) return;  // a second stop report would never come, so do not wait for one
  if (::kill(pid_, SIGSTOP) != 0) throw_errno("kill SIGSTOP");
  // Wait until it has really stopped: a signal to another process is delivered asynchronously, and
  // a test that sends a request right after pause() must not get it answered.
  int status = 0;
  if (wait_for(pid_, status, WUNTRACED) != pid_) {
    pid_ = -1;  // not our child any more (reaped elsewhere): never signal that pid again
    throw_errno("waitpid WUNTRACED");
  }
  if (!WIFSTOPPED(status)) {
    pid_ = -1;  // it died instead, and has been reaped
    throw std::runtime_error(fmt::format("redis_server: port {} {} instead of stopping",
                                         port_.number(), describe_wait_status(status)));
  }
  paused_ = true;
}

void redis_server::resume() {
  if (!running()) throw std::logic_error("redis_server: resume() of a server that is not running");
  if (::kill(pid_, SIGCONT) != 0) throw_errno("kill SIGCONT");
  if (!paused_) return;
  // Collect the continue report so that reports do not pile up; it is generated when SIGCONT is
  // sent, so this does not block.
  int status = 0;
  (void)wait_for(pid_, status, WCONTINUED);
  paused_ = false;
}

std::string redis_server::log_tail(std::size_t lines) const {
  std::string out = last_lines(dir_ / "redis.log", lines);
  // Errors found before the log file is opened (bad arguments) go to stdout/stderr.
  if (const std::string stdio = last_lines(dir_ / "stdio.log", lines); !stdio.empty()) {
    out += "--- stdout/stderr ---\n";
    out += stdio;
  }
  return out;
}

pid_t redis_server::spawn() const {
  static const std::filesystem::path executable = find_redis_server();

  const std::pair<const char*, std::string> settings[] = {
      {"--port", std::to_string(port_.number())},
      {"--save", ""},  // no RDB snapshots: a restarted server starts empty
      {"--appendonly", "no"},
      {"--daemonize", "no"},  // stay our child, so that waitpid works
      {"--dir", dir_.string()},
      {"--logfile", (dir_ / "redis.log").string()},
      {"--enable-debug-command", "local"},
      {"--protected-mode", "no"},
  };
  std::vector<std::string> args = {executable.string()};
  // The file comes first (redis-server reads a first argument that is not an option as its
  // configuration file); the arguments after it override it.
  if (options_.config_file) args.push_back(config_path().string());
  if (options_.sentinel) args.emplace_back("--sentinel");
  for (const auto& [name, value] : settings) {
    args.emplace_back(name);
    args.push_back(value);
  }
  // Loopback always, so that the readiness check and the tests' inspectors reach the server from
  // inside its namespace even while that namespace is cut off.
  args.push_back("--bind");
  if (!options_.bind_address.empty()) args.push_back(options_.bind_address);
  args.push_back("127.0.0.1");
  if (!options_.password.empty()) {
    args.push_back("--requirepass");
    args.push_back(options_.password);
  }
  for (const std::string& rule : options_.acl_users) {
    args.push_back("--user");
    for (auto& word : split_words(rule)) {
      args.push_back(std::move(word));
    }
  }
  if (options_.tls) {
    const auto& tls = *options_.tls;
    for (std::string word :
         {std::string("--tls-port"), std::to_string(tls_port_.number()),
          std::string("--tls-cert-file"), tls.cert_file, std::string("--tls-key-file"),
          tls.key_file, std::string("--tls-ca-cert-file"), tls.ca_file,
          std::string("--tls-auth-clients"),
          std::string(tls.require_client_certificate ? "yes" : "no")}) {
      args.push_back(std::move(word));
    }
  }
  if (options_.unix_socket) {
    args.push_back("--unixsocket");
    args.push_back(unix_path().string());
    args.push_back("--unixsocketperm");
    args.push_back(options_.unix_socket_permissions);
  }
  for (const std::string& extra : options_.extra_args) {
    for (auto& word : split_words(extra)) {
      args.push_back(std::move(word));
    }
  }

  // Everything the child needs is prepared here: between fork and exec only async-signal-safe
  // calls are allowed, since another thread may have held the allocator's lock at fork time.
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);

  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) throw_errno("open /dev/null");
  const std::string stdio_path = (dir_ / "stdio.log").string();
  const int out_fd = ::open(stdio_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (out_fd < 0) {
    const int saved = errno;
    ::close(null_fd);
    errno = saved;
    throw_errno("open stdio.log");
  }
  int netns_fd = -1;
  if (!options_.network_namespace.empty()) {
    const std::string netns_path = netns::path_of(options_.network_namespace);
    netns_fd = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (netns_fd < 0) {
      const int saved = errno;
      ::close(null_fd);
      ::close(out_fd);
      errno = saved;
      throw_errno(fmt::format("open {}", netns_path).c_str());
    }
  }
  const unsigned max_fd = inherited_descriptor_limit();

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int saved = errno;
    ::close(null_fd);
    ::close(out_fd);
    if (netns_fd >= 0) ::close(netns_fd);
    errno = saved;
    throw_errno("fork");
  }
  if (pid == 0) {
    // The death signal is sent when the forking *thread* exits; fixtures create servers on the
    // test's main thread. If the parent died before prctl, the death signal will never come.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::dup2(null_fd, STDIN_FILENO) < 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 ||
        ::dup2(out_fd, STDERR_FILENO) < 0) {
      ::_exit(127);
    }
    // The forking thread is normally in the namespace already (spawn_and_wait_ready enters it),
    // but the child must not depend on that: a server outside its namespace would bind the
    // caller's loopback and be neither partitioned nor reachable at its address.
    if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) ::_exit(127);
    close_inherited_and_exec(argv.data(), max_fd);
  }
  ::close(null_fd);
  ::close(out_fd);
  if (netns_fd >= 0) ::close(netns_fd);
  return pid;
}

redis_server::start_result redis_server::spawn_and_wait_ready() {
  const auto log_file = dir_ / "redis.log";
  const auto stdio_file = dir_ / "stdio.log";
  const std::uintmax_t log_offset = file_size_or_zero(log_file);
  const std::uintmax_t stdio_offset = file_size_or_zero(stdio_file);
  // Spawned and probed from inside the namespace: the probes connect to its loopback.
  const netns::guard inside(options_.network_namespace);

  pid_ = spawn();
  paused_ = false;

  const auto deadline = clock::now() + ready_timeout;
  std::string last_error = "no attempt made";
  for (;;) {
    int status = 0;
    const pid_t waited = wait_for(pid_, status, WNOHANG);
    if (waited < 0) {
      pid_ = -1;  // reaped elsewhere (SIGCHLD ignored?): never signal that pid again
      throw_errno("waitpid");
    }
    if (waited == pid_) {
      pid_ = -1;
      const std::string output =
          read_from(log_file, log_offset) + read_from(stdio_file, stdio_offset);
      if (output.find("Address already in use") != std::string::npos) {
        return start_result::port_busy;
      }
      throw std::runtime_error(fmt::format("redis_server: port {}: redis-server {}; log:\n{}",
                                           port_.number(), describe_wait_status(status),
                                           log_tail()));
    }

    // Any reply means the server has finished starting; NOAUTH only says the default user has a
    // password (set by --requirepass or an ACL rule), which is checked below.
    try {
      sync_client probe(port_.number(), {}, {}, std::chrono::seconds(1));
      const resp::value reply = probe.command({"PING"});
      if (!reply.is_error() || reply.text.starts_with("NOAUTH")) break;
      last_error = fmt::format("PING answered {}", reply.text);
    } catch (const std::runtime_error& e) {
      last_error = e.what();
    }

    if (clock::now() >= deadline) {
      kill9();
      throw std::runtime_error(fmt::format(
          "redis_server: port {}: no answer to PING within {} s ({}); log:\n{}", port_.number(),
          std::chrono::seconds(ready_timeout).count(), last_error, log_tail()));
    }
    std::this_thread::sleep_for(ready_poll_interval);
  }

  if (!options_.password.empty()) {
    try {
      sync_client authenticated(port_.number(), options_.password);
      const resp::value reply = authenticated.command({"PING"});
      if (reply.is_error()) throw std::runtime_error(reply.text);
    } catch (const std::runtime_error& e) {
      kill9();
      throw std::runtime_error(
          fmt::format("redis_server: port {}: the configured password does not work ({}); log:\n{}",
                      port_.number(), e.what(), log_tail()));
    }
  }
  if (!answered_by_child()) {
    // Another process's server holds the port, so ours cannot bind it and would exit shortly.
    kill9();
    return start_result::port_busy;
  }
  return start_result::ready;
}

bool redis_server::answered_by_child() const {
  std::string info;
  try {
    sync_client owner(port_.number(), options_.password);
    const resp::value reply = owner.command({"INFO", "server"});
    // A user without INFO (an ACL rule) cannot tell; the port reservation is the main defence.
    if (reply.is_error()) return true;
    info = reply.text;
  } catch (const std::runtime_error&) {
    return false;  // it answered PING a moment ago; gone now, so it was not a stable server of ours
  }
  constexpr std::string_view field = "process_id:";
  const auto at = info.find(field);
  if (at == std::string::npos) return true;
  return std::strtol(info.c_str() + at + field.size(), nullptr, 10) == pid_;
}

redis_fleet::redis_fleet(std::size_t count, const redis_server_options& options) {
  servers_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    servers_.push_back(std::make_unique<redis_server>(options));
  }
}

std::vector<node_config> redis_fleet::configs() const {
  std::vector<node_config> configs;
  configs.reserve(servers_.size());
  for (const auto& server : servers_) {
    configs.push_back(server->config());
  }
  return configs;
}

std::vector<node_config> redis_fleet::tls_configs(const std::string& ca_file) const {
  std::vector<node_config> configs;
  configs.reserve(servers_.size());
  for (const auto& server : servers_) {
    configs.push_back(server->tls_config(ca_file));
  }
  return configs;
}

}  // namespace redlock::test
