#ifndef REDLOCK_TEST_SUPPORT_REDIS_FLEET_HPP
#define REDLOCK_TEST_SUPPORT_REDIS_FLEET_HPP

#include "redlock/node_config.hpp"
#include "support/free_port.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace redlock::test {

struct redis_server_options {
  std::string password;                 // requirepass for the default user, if not empty
  std::vector<std::string> acl_users;   // ACL rules, one user each: "alice on >secret ~* &* +@all"
  std::vector<std::string> extra_args;  // further "--name value" arguments, split into words
  // A network namespace made by `ip netns add` (see support/netns.hpp) to run the server in;
  // empty: the caller's. Port selection and the readiness check then also happen inside it (the
  // calling thread enters it for the moment), so the server must be reachable on 127.0.0.1 there.
  std::string network_namespace;
  // An address to listen on besides 127.0.0.1, listed first (so the process title shows it);
  // returned by config(). Empty: 127.0.0.1 only.
  std::string bind_address;

  // TLS: the server also listens for TLS on tls_port(), with this certificate and key, and
  // trusts `ca_file` for client certificates, which it demands when `require_client_certificate`.
  // port() stays plain, for the readiness check and the tests' inspectors.
  struct tls_listener {
    std::string cert_file;
    std::string key_file;
    std::string ca_file;
    bool require_client_certificate = false;
  };
  std::optional<tls_listener> tls;

  // The server also listens on a Unix socket, unix_path(), with these permission bits.
  bool unix_socket = false;
  std::string unix_socket_permissions = "700";

  // The text of a configuration file, config_path(), written once when the server is made and
  // named first on every start, so that the other arguments override it. The server may rewrite
  // the file (CONFIG REWRITE, which a sentinel sends after turning a server into a replica; a
  // sentinel records there what it has learnt), and a restart then starts from what it wrote, as
  // a server on a real machine would. Unset: no file, and CONFIG REWRITE fails.
  std::optional<std::string> config_file;
  // Runs a Redis Sentinel (redis-server FILE --sentinel) instead of a data node; needs
  // config_file, holding at least one "sentinel monitor" line.
  bool sentinel = false;
};

// One redis-server child process on a free loopback port, with no persistence, started as a
// non-daemonized child (fork/exec) and always reaped with waitpid. It dies with the test process
// (PR_SET_PDEATHSIG) even when the test crashes. DEBUG is enabled for local connections. With
// options.network_namespace the port is a free port of that namespace, and 127.0.0.1:port() is
// that namespace's loopback: reachable only from inside it (bind_address from wherever it routes).
// Its directory (log, configuration file, Unix socket) is in RAM-backed /dev/shm when that has
// room, else in the temporary directory: see servers_root() in redis_fleet.cpp.
class redis_server {
 public:
  explicit redis_server(redis_server_options options = {});  // starts and waits for PING
  ~redis_server();                                           // SIGKILL, reap, remove its dir
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  std::uint16_t port() const noexcept { return port_.number(); }
  std::uint16_t tls_port() const noexcept { return tls_port_.number(); }  // 0 without options.tls
  std::filesystem::path unix_path() const { return dir_ / "redis.sock"; }
  // "sentinel.conf" with options.sentinel, else "redis.conf", in the server's directory; there
  // only with options.config_file.
  std::filesystem::path config_path() const;
  pid_t pid() const noexcept { return pid_; }
  bool running() const noexcept { return pid_ > 0; }

  // The bind address (127.0.0.1 unless options.bind_address), the port, and the default user's
  // password (if any).
  node_config config() const;
  // A rediss:// node on tls_port() at `host` (which the certificate must name), trusting `ca_file`.
  node_config tls_config(const std::string& ca_file, const std::string& host = "127.0.0.1") const;
  // A unix:// node on unix_path(), with the default user's password.
  node_config unix_config() const;

  // The certificate and key the next start() or restart() uses (options.tls must be set).
  void set_tls_certificate(std::string cert_file, std::string key_file);

  void kill9();  // SIGKILL and reap; the port stays reserved for start()
  void start();  // (re)starts on the same port with the same options, waits for PING
  void restart(std::chrono::milliseconds delay = std::chrono::milliseconds(0));
  void pause();   // SIGSTOP: the socket accepts and buffers, nothing is answered
  void resume();  // SIGCONT

  // The last lines of the server's log, for failure messages.
  std::string log_tail(std::size_t lines = 20) const;

 private:
  enum class start_result { ready, port_busy };

  // One attempt on port_: spawns the child and waits for it to answer. Returns port_busy when the
  // child exited because the port was taken (the caller picks another port or waits); throws on
  // any other failure, with the log tail in the message.
  start_result spawn_and_wait_ready();
  // Whether the server answering on port() is our child (INFO server's process_id): a server of
  // another process there would answer our readiness check while our child fails to bind.
  bool answered_by_child() const;
  pid_t spawn() const;

  redis_server_options options_;
  std::filesystem::path dir_;
  // Reserved for the server's whole life, so that no other test process takes them while the
  // server is down between kill9() and start().
  reserved_port port_;
  reserved_port tls_port_;
  pid_t pid_ = -1;
  bool paused_ = false;  // stopped by pause(); its stop report has been collected by waitpid
};

// K servers, started in parallel-friendly order and all stopped by the destructor.
class redis_fleet {
 public:
  explicit redis_fleet(std::size_t count, const redis_server_options& options = {});

  std::size_t size() const noexcept { return servers_.size(); }
  redis_server& operator[](std::size_t i) { return *servers_.at(i); }
  std::vector<node_config> configs() const;
  std::vector<node_config> tls_configs(const std::string& ca_file) const;

 private:
  std::vector<std::unique_ptr<redis_server>> servers_;
};

}  // namespace redlock::test

#endif
