#include "integration/prelude.hpp"
#include "support/free_port.hpp"
#include "support/lock_checks.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <signal.h>
#include <span>
#include <spawn.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <thread>
#include <vector>

namespace {

using boost::asio::ip::tcp;
using redlock::resp::type;
using redlock::resp::value;
using redlock::test::redis_server;
using redlock::test::redis_server_options;

bool is_pong(const value& v) {
  return v.kind == type::simple_string && v.text == "PONG";
}

bool has_error_code(const value& v, std::string_view code) {
  return v.is_error() && v.text.starts_with(std::string(code) + " ");
}

// The message of the std::runtime_error `f` throws, or "<no exception>".
template <class F>
std::string runtime_error_of(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "<no exception>";
}

// errno of kill(pid, 0): ESRCH once the process is gone and reaped, 0 while it exists.
int probe_errno(pid_t pid) {
  return ::kill(pid, 0) == 0 ? 0 : errno;
}

// The directory holding the server's log, found through the --dir it was started with.
std::filesystem::path dir_of(redis_server& server) {
  sync_client client(server.port());
  const value reply = client.command({"CONFIG", "GET", "dir"});
  BOOST_TEST_REQUIRE(reply.elements.size() == 2u);
  return reply.elements[1].text;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fleet)

BOOST_AUTO_TEST_CASE(three_servers_on_distinct_ports_answer) {
  redis_fleet servers(3);
  BOOST_TEST_REQUIRE(servers.size() == 3u);

  std::set<std::uint16_t> ports;
  std::set<pid_t> pids;
  for (std::size_t i = 0; i < servers.size(); ++i) {
    BOOST_TEST_CONTEXT("server " << i << " on port " << servers[i].port()) {
      BOOST_TEST(servers[i].running());
      ports.insert(servers[i].port());
      pids.insert(servers[i].pid());

      sync_client client(servers[i].port());
      BOOST_TEST(is_pong(client.command({"PING"})));
      const std::string payload = "value-" + std::to_string(i) + std::string("\r\n\0x", 4);
      BOOST_TEST(client.command({"SET", "key", payload}).text == "OK");
      const value got = client.command({"GET", "key"});
      BOOST_TEST((got.kind == type::bulk_string));
      BOOST_TEST(got.text == payload);
    }
  }
  BOOST_TEST(ports.size() == 3u);
  BOOST_TEST(pids.size() == 3u);

  // Each server has its own data.
  for (std::size_t i = 0; i < servers.size(); ++i) {
    sync_client client(servers[i].port());
    BOOST_TEST(client.command({"GET", "key"}).text.starts_with("value-" + std::to_string(i)));
  }

  const auto configs = servers.configs();
  BOOST_TEST_REQUIRE(configs.size() == 3u);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    BOOST_TEST(configs[i].host == "127.0.0.1");
    BOOST_TEST(configs[i].port == servers[i].port());
    BOOST_TEST(configs[i].password.empty());
    BOOST_TEST(configs[i].username.empty());
  }
}

BOOST_AUTO_TEST_CASE(empty_command_is_rejected) {
  redis_server server;
  sync_client client(server.port());
  BOOST_CHECK_THROW(client.command(std::span<const std::string_view>()), std::invalid_argument);
  BOOST_TEST(is_pong(client.command({"PING"})));
}

BOOST_AUTO_TEST_CASE(debug_command_is_enabled_for_local_connections) {
  redis_server server;
  sync_client client(server.port());
  const value reply = client.command({"DEBUG", "SLEEP", "0"});
  BOOST_TEST(reply.text == "OK", redlock::resp::to_debug_string(reply));
}

BOOST_AUTO_TEST_CASE(kill9_then_start_on_the_same_port_without_the_data) {
  redis_server server;
  const std::uint16_t port = server.port();
  const pid_t first_pid = server.pid();
  {
    sync_client client(port);
    BOOST_TEST(client.command({"SET", "survives", "no"}).text == "OK");
  }

  server.kill9();
  BOOST_TEST(!server.running());
  BOOST_TEST(probe_errno(first_pid) == ESRCH);
  BOOST_TEST(server.port() == port);
  const std::string refused = runtime_error_of([&] { sync_client client(port, {}, {}, 1s); });
  BOOST_TEST(refused.find("127.0.0.1:" + std::to_string(port)) != std::string::npos, refused);
  BOOST_TEST(refused.find("connect") != std::string::npos, refused);

  server.start();
  BOOST_TEST(server.running());
  BOOST_TEST(server.port() == port);
  BOOST_TEST(server.pid() != first_pid);
  sync_client client(port);
  BOOST_TEST(is_pong(client.command({"PING"})));
  BOOST_TEST(client.command({"GET", "survives"}).is_null());
}

BOOST_AUTO_TEST_CASE(restart_with_delay) {
  redis_server server;
  const std::uint16_t port = server.port();
  const auto before = std::chrono::steady_clock::now();
  server.restart(100ms);
  BOOST_TEST((std::chrono::steady_clock::now() - before >= 100ms));
  BOOST_TEST(server.port() == port);
  sync_client client(port);
  BOOST_TEST(is_pong(client.command({"PING"})));
}

// Another socket listening on the port: start() keeps trying for a while instead of failing.
BOOST_AUTO_TEST_CASE(start_waits_for_a_briefly_busy_port) {
  redis_server server;
  const std::uint16_t port = server.port();
  server.kill9();

  boost::asio::io_context io;
  tcp::acceptor blocker(io, tcp::endpoint(boost::asio::ip::address_v4::loopback(), port));
  const auto before = std::chrono::steady_clock::now();
  std::jthread releaser([&] {
    std::this_thread::sleep_for(300ms);
    blocker.close();
  });
  server.start();
  BOOST_TEST((std::chrono::steady_clock::now() - before >= 300ms));
  BOOST_TEST(server.port() == port);
  sync_client client(port);
  BOOST_TEST(is_pong(client.command({"PING"})));
}

BOOST_AUTO_TEST_CASE(start_gives_up_on_a_port_that_stays_busy) {
  redis_server server;
  const std::uint16_t port = server.port();
  server.kill9();

  boost::asio::io_context io;
  tcp::acceptor blocker(io, tcp::endpoint(boost::asio::ip::address_v4::loopback(), port));
  const std::string message = runtime_error_of([&] { server.start(); });
  BOOST_TEST(message.find("port " + std::to_string(port) + " stayed busy") != std::string::npos,
             message);
  BOOST_TEST(message.find("Address already in use") != std::string::npos, message);
  BOOST_TEST(!server.running());

  blocker.close();
  server.start();
  BOOST_TEST(server.running());
}

// A redis-server that no fixture knows of (another test process's, say), listening on `port`;
// killed and reaped by the destructor.
class foreign_server {
 public:
  explicit foreign_server(std::uint16_t port) {
    const std::string port_text = std::to_string(port);
    const char* argv[] = {"redis-server", "--port", port_text.c_str(), "--bind", "127.0.0.1",
                          "--save",       "",       "--appendonly",    "no",     "--logfile",
                          "/dev/null",    nullptr};
    if (::posix_spawnp(&pid_, "redis-server", nullptr, nullptr, const_cast<char**>(argv),
                       environ) != 0) {
      pid_ = -1;
      BOOST_FAIL("cannot spawn redis-server");
    }
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    for (;;) {
      try {
        if (is_pong(sync_client(port).command({"PING"}))) return;
      } catch (const std::runtime_error&) {
      }
      BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < give_up));
      std::this_thread::sleep_for(10ms);
    }
  }
  foreign_server(const foreign_server&) = delete;
  foreign_server& operator=(const foreign_server&) = delete;
  ~foreign_server() { stop(); }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

long long process_id_of(std::uint16_t port) {
  const value info = sync_client(port).command({"INFO", "server"});
  const auto at = info.text.find("process_id:");
  BOOST_TEST_REQUIRE(at != std::string::npos);
  return std::stoll(info.text.substr(at + 11));
}

// Another process's server on the port answers PING before our child has failed to bind it: it
// must not be taken for ours (the fixture would then act on another test's keys while its own
// server is dead), so start() treats the port as busy.
BOOST_AUTO_TEST_CASE(a_foreign_server_on_the_port_is_not_taken_for_ours) {
  redis_server server;
  const std::uint16_t port = server.port();
  server.kill9();
  {
    foreign_server other(port);
    const std::string message = runtime_error_of([&] { server.start(); });
    BOOST_TEST(message.find("port " + std::to_string(port) + " stayed busy") != std::string::npos,
               message);
    BOOST_TEST(!server.running());
  }
  server.start();
  BOOST_TEST(process_id_of(port) == server.pid());
}

// A reserved port is not handed out again while its reservation lives, in this process or any
// other (flock(2) locks of two open files exclude each other whichever processes hold them), and
// is free again once it ends.
BOOST_AUTO_TEST_CASE(a_reserved_port_is_not_reserved_twice) {
  auto first = redlock::test::reserved_port::pick();
  BOOST_TEST_REQUIRE(first.number() != 0);
  BOOST_TEST(!redlock::test::reserved_port::reserve(first.number()));
  std::set<std::uint16_t> seen{first.number()};
  std::vector<redlock::test::reserved_port> more;
  for (int i = 0; i < 50; ++i) {
    more.push_back(redlock::test::reserved_port::pick());
    BOOST_TEST(seen.insert(more.back().number()).second,
               "port " << more.back().number() << " twice");
  }
  const std::uint16_t number = first.number();
  first = {};
  auto again = redlock::test::reserved_port::reserve(number);
  BOOST_TEST_REQUIRE(again.has_value());
  BOOST_TEST(again->number() == number);
}

// A server's ports stay reserved while it is down, so that no other test picks them.
BOOST_AUTO_TEST_CASE(a_killed_servers_port_stays_reserved) {
  redis_server server;
  server.kill9();
  BOOST_TEST(!redlock::test::reserved_port::reserve(server.port()));
  server.start();
  BOOST_TEST(server.running());
}

BOOST_AUTO_TEST_CASE(start_after_the_server_shut_itself_down) {
  redis_server server;
  const pid_t pid = server.pid();
  {
    sync_client client(server.port());
    const std::string message = runtime_error_of([&] { client.command({"SHUTDOWN", "NOSAVE"}); });
    BOOST_TEST(message.find("SHUTDOWN: connection closed by the server") != std::string::npos,
               message);
  }
  // The socket closes a moment before the process has exited (all its threads), and start()
  // only reaps an exited child: until then it is still running.
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    try {
      server.start();
      break;
    } catch (const std::logic_error&) {
      BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < give_up));
      std::this_thread::sleep_for(10ms);
    }
  }
  BOOST_TEST(server.pid() != pid);
  sync_client client(server.port());
  BOOST_TEST(is_pong(client.command({"PING"})));
}

BOOST_AUTO_TEST_CASE(start_of_a_running_server_is_a_logic_error) {
  redis_server server;
  BOOST_CHECK_THROW(server.start(), std::logic_error);
}

BOOST_AUTO_TEST_CASE(paused_server_times_out_then_answers_after_resume) {
  redis_server server;
  sync_client connected_before(server.port(), {}, {}, 200ms);
  BOOST_TEST(is_pong(connected_before.command({"PING"})));

  server.pause();
  BOOST_TEST(server.running());

  // The kernel still accepts connections for a stopped process (backlog), so only the command's
  // deadline can end this.
  const auto start = std::chrono::steady_clock::now();
  const std::string message = runtime_error_of([&] {
    sync_client client(server.port(), {}, {}, 200ms);
    client.command({"PING"});
  });
  const auto elapsed = std::chrono::steady_clock::now() - start;
  BOOST_TEST(message.find("timed out after 200 ms") != std::string::npos, message);
  BOOST_TEST(message.find("PING") != std::string::npos, message);
  BOOST_TEST(message.find("127.0.0.1:" + std::to_string(server.port())) != std::string::npos,
             message);
  BOOST_TEST((elapsed >= 190ms));
  BOOST_TEST((elapsed < 3s));

  // An established connection times out the same way and is unusable afterwards.
  BOOST_CHECK_THROW(connected_before.command({"PING"}), std::runtime_error);
  const std::string after = runtime_error_of([&] { connected_before.command({"PING"}); });
  BOOST_TEST(after.find("not connected") != std::string::npos, after);

  server.pause();  // pausing twice is harmless
  server.resume();
  sync_client client(server.port(), {}, {}, 2s);
  BOOST_TEST(is_pong(client.command({"PING"})));
  server.resume();  // resuming a running server is harmless
  BOOST_TEST(is_pong(client.command({"PING"})));
}

BOOST_AUTO_TEST_CASE(destroying_a_paused_server_leaves_no_process) {
  pid_t pid = -1;
  {
    redis_server server;
    pid = server.pid();
    server.pause();
  }
  BOOST_TEST(probe_errno(pid) == ESRCH);
}

BOOST_AUTO_TEST_CASE(requirepass) {
  redis_server_options options;
  options.password = "s3cret pass";
  redis_server server(options);
  BOOST_TEST(server.config().password == "s3cret pass");

  sync_client anonymous(server.port());
  const value refused = anonymous.command({"GET", "k"});
  BOOST_TEST(has_error_code(refused, "NOAUTH"), refused.text);
  BOOST_TEST(refused.text == "NOAUTH Authentication required.");

  sync_client authenticated(server.port(), "s3cret pass");
  BOOST_TEST(is_pong(authenticated.command({"PING"})));
  BOOST_TEST(authenticated.command({"SET", "k", "v"}).text == "OK");

  // A wrong password fails the constructor with the server's reply, but never shows the password.
  const std::string wrong = runtime_error_of([&] { sync_client c(server.port(), "not-it"); });
  BOOST_TEST(wrong.find("AUTH") != std::string::npos, wrong);
  BOOST_TEST(wrong.find("WRONGPASS") != std::string::npos, wrong);
  BOOST_TEST(wrong.find("not-it") == std::string::npos, wrong);
}

BOOST_AUTO_TEST_CASE(acl_user) {
  redis_server_options options;
  options.acl_users = {"alice on >wonder ~* &* +@all", "bob on >builder ~bob:* +get +set"};
  redis_server server(options);

  sync_client alice(server.port(), "wonder", "alice");
  BOOST_TEST(is_pong(alice.command({"PING"})));
  BOOST_TEST(alice.command({"SET", "k", "v"}).text == "OK");
  BOOST_TEST(alice.command({"ACL", "WHOAMI"}).text == "alice");

  // The rule words are passed through: bob may only touch bob:* keys.
  sync_client bob(server.port(), "builder", "bob");
  BOOST_TEST(bob.command({"SET", "bob:1", "v"}).text == "OK");
  const value denied = bob.command({"SET", "k", "v"});
  BOOST_TEST(has_error_code(denied, "NOPERM"), denied.text);

  const std::string wrong =
      runtime_error_of([&] { sync_client c(server.port(), "bad-password", "alice"); });
  BOOST_TEST(wrong.find("WRONGPASS invalid username-password pair or user is disabled.") !=
                 std::string::npos,
             wrong);
  BOOST_TEST(wrong.find("bad-password") == std::string::npos, wrong);

  // Without --requirepass the default user needs no password.
  sync_client anonymous(server.port());
  BOOST_TEST(anonymous.command({"ACL", "WHOAMI"}).text == "default");
}

BOOST_AUTO_TEST_CASE(extra_args_are_passed) {
  redis_server_options options;
  options.extra_args = {"--maxmemory 12mb", "--hz", "17"};
  redis_server server(options);
  sync_client client(server.port());
  const value hz = client.command({"CONFIG", "GET", "hz"});
  BOOST_TEST_REQUIRE(hz.elements.size() == 2u);
  BOOST_TEST(hz.elements[1].text == "17");
  const value maxmemory = client.command({"CONFIG", "GET", "maxmemory"});
  BOOST_TEST_REQUIRE(maxmemory.elements.size() == 2u);
  BOOST_TEST(maxmemory.elements[1].text == std::to_string(12 * 1024 * 1024));
}

BOOST_AUTO_TEST_CASE(bad_arguments_fail_with_the_server_output) {
  redis_server_options options;
  options.extra_args = {"--no-such-option 1"};
  const std::string message = runtime_error_of([&] { redis_server server(options); });
  BOOST_TEST(message.find("exited with status 1") != std::string::npos, message);
  BOOST_TEST(message.find("no-such-option") != std::string::npos, message);
}

BOOST_AUTO_TEST_CASE(destructor_stops_the_process_and_removes_the_directory) {
  pid_t pid = -1;
  std::filesystem::path dir;
  {
    redis_server server;
    pid = server.pid();
    dir = dir_of(server);
    BOOST_TEST(std::filesystem::is_directory(dir));
    BOOST_TEST(std::filesystem::exists(dir / "redis.log"));
    BOOST_TEST(dir.filename().string().starts_with("redlock-test-"));
    BOOST_TEST(!server.log_tail().empty());
  }
  BOOST_TEST(probe_errno(pid) == ESRCH);
  BOOST_TEST(!std::filesystem::exists(dir));
}

BOOST_AUTO_TEST_CASE(fleet_destructor_stops_all) {
  std::vector<pid_t> pids;
  {
    redis_fleet servers(3);
    for (std::size_t i = 0; i < servers.size(); ++i)
      pids.push_back(servers[i].pid());
    servers[1].kill9();  // a mix of running and killed servers
  }
  for (pid_t pid : pids) {
    BOOST_TEST_CONTEXT("pid " << pid) {
      BOOST_TEST(probe_errno(pid) == ESRCH);
    }
  }
}

// The leftover check of the safety suites (support/lock_checks.hpp) tells a key that was deleted
// while it still had time from one that its TTL removed, and from one with no TTL at all.
BOOST_AUTO_TEST_CASE(keys_not_released_tells_a_release_from_an_expiry) {
  redis_fleet servers(2);
  sync_client first(servers[0].port());
  sync_client second(servers[1].port());
  first.command({"SET", "leaked", "t", "PX", "300"});
  first.command({"SET", "kept", "t"});
  second.command({"SET", "released", "t", "PX", "5000"});
  const std::vector<std::uint16_t> ports = {servers[0].port(), servers[1].port()};
  const std::vector<std::string> keys = {"leaked", "released", "kept"};
  std::vector<std::string> complaints;
  redlock::test::run_async([&](boost::asio::io_context& io) -> boost::asio::awaitable<void> {
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
          co_await redlock::test::sleep_for(100ms);
          second.command({"DEL", "released"});
        },
        boost::asio::detached);
    complaints = co_await redlock::test::keys_not_released(ports, keys, 1s);
  });
  const std::vector<std::string> expected = {"kept left on node 0 without a TTL",
                                             "leaked on node 0 went only when its TTL ran out"};
  BOOST_TEST(complaints == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
