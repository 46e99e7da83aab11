// The checks a client makes of its configuration and of each lock request before anything is
// sent, and how the constructor reports a refusal. No server: a client connects only when a request
// needs it.

#include "options_check.hpp"
#include "redlock/client.hpp"
#include "redlock/error.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace rd = redlock::detail;
using namespace std::chrono_literals;

redlock::node_config node(std::uint16_t port) {
  redlock::node_config config;
  config.host = "127.0.0.1";
  config.port = port;
  return config;
}

std::vector<redlock::node_config> three_nodes() {
  return {node(7001), node(7002), node(7003)};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct client_case {
  const char* what;
  std::function<void(std::vector<redlock::node_config>&, redlock::client_options&)> spoil;
  const char* says;  // a part of the reason given
};

const client_case client_cases[] = {
    {"no node", [](auto& nodes, auto&) { nodes.clear(); }, "at least one node"},
    {"node_timeout 0", [](auto&, auto& options) { options.node_timeout = 0ms; },
     "node_timeout must be positive"},
    {"negative node_timeout", [](auto&, auto& options) { options.node_timeout = -1ms; },
     "node_timeout must be positive"},
    {"connect_timeout 0", [](auto&, auto& options) { options.connect_timeout = 0ms; },
     "connect_timeout must be positive"},
    {"drift_factor 0.5", [](auto&, auto& options) { options.drift_factor = 0.5; },
     "drift_factor 0.5 is outside [0, 0.5)"},
    {"negative drift_factor", [](auto&, auto& options) { options.drift_factor = -0.1; },
     "drift_factor"},
    {"small reply memory", [](auto&, auto& options) { options.replies.max_reply_memory = 1023; },
     "max_reply_memory 1023"},
    {"reply depth 0", [](auto&, auto& options) { options.replies.max_depth = 0; },
     "max_depth must be at least 1"},
    {"empty host", [](auto& nodes, auto&) { nodes[1].host.clear(); }, "empty host name"},
    {"port 0", [](auto& nodes, auto&) { nodes[1].port = 0; }, "node 127.0.0.1:0 has port 0"},
    {"negative database", [](auto& nodes, auto&) { nodes[1].database = -1; },
     "node 127.0.0.1:7002 has a negative database index -1"},
    {"user without password", [](auto& nodes, auto&) { nodes[2].username = "alice"; },
     "node 127.0.0.1:7003 names ACL user \"alice\" without a password"},
    {"one node twice", [](auto& nodes, auto&) { nodes[2] = nodes[0]; },
     "node 127.0.0.1:7001 is listed twice"},
    {"relative unix path", [](auto& nodes, auto&) { nodes[0].unix_path = "run/r.sock"; },
     "node unix:run/r.sock: the Unix socket path must be absolute"},
    {"long unix path", [](auto& nodes, auto&) { nodes[0].unix_path = "/" + std::string(107, 'x'); },
     "longer than the 107 bytes a socket address holds"},
    {"tls over unix",
     [](auto& nodes, auto&) {
       nodes[0].unix_path = "/run/r.sock";
       nodes[0].tls.enabled = true;
     },
     "node unix:/run/r.sock: TLS over a Unix socket is not supported"},
    {"client certificate without key",
     [](auto& nodes, auto&) {
       nodes[1].tls.enabled = true;
       nodes[1].tls.cert_file = "/c.pem";
     },
     "node 127.0.0.1:7002: a TLS client certificate needs both cert_file and key_file"},
    {"one socket twice",
     [](auto& nodes, auto&) {
       nodes[0].unix_path = "/run/r.sock";
       nodes[1].unix_path = "/run/r.sock";
     },
     "node unix:/run/r.sock is listed twice"},
};

struct lock_case {
  const char* what;
  std::string resource;
  std::function<void(redlock::lock_options&)> spoil;
  const char* says;
};

const lock_case lock_cases[] = {
    {"empty resource", "", [](auto&) {}, "the resource name is empty"},
    {"ttl 0", "r", [](auto& options) { options.ttl = 0ms; }, "ttl must be positive (got 0 ms)"},
    {"negative ttl", "r", [](auto& options) { options.ttl = -5ms; },
     "ttl must be positive (got -5 ms)"},
    {"ttl within the drift allowance", "r", [](auto& options) { options.ttl = 2ms; },
     "ttl 2 ms is not longer than the drift allowance"},
    {"negative wait", "r", [](auto& options) { options.wait = -1ms; },
     "wait must not be negative (got -1 ms)"},
    {"max_hold 0", "r", [](auto& options) { options.max_hold = 0ms; },
     "max_hold must be positive (got 0 ms)"},
    {"negative max_hold", "r", [](auto& options) { options.max_hold = -1ms; },
     "max_hold must be positive"},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(options_check)

BOOST_AUTO_TEST_CASE(a_sound_configuration_passes) {
  BOOST_TEST(rd::check_client_options(three_nodes(), {}) == "");
  redlock::client_options edges;
  edges.drift_factor = 0.0;
  edges.replies.max_reply_memory = 1024;
  edges.replies.max_depth = 1;
  std::vector<redlock::node_config> nodes = three_nodes();
  nodes[0].username = "alice";
  nodes[0].password = "secret";
  nodes[1].database = 15;
  nodes[2].host = "localhost";  // another name of a listed server is found once connected
  nodes[2].port = 7001;
  BOOST_TEST(rd::check_client_options(nodes, edges) == "");
}

BOOST_AUTO_TEST_CASE(each_client_rule_names_the_problem) {
  for (const auto& c : client_cases) {
    BOOST_TEST_CONTEXT(c.what) {
      auto nodes = three_nodes();
      redlock::client_options options;
      c.spoil(nodes, options);
      const auto reason = rd::check_client_options(nodes, options);
      BOOST_TEST(contains(reason, c.says), reason);
    }
  }
}

// The constructor throws system_error(invalid_argument) with the reason in its message, before
// it opens anything.
BOOST_AUTO_TEST_CASE(the_client_constructor_throws_the_reason) {
  boost::asio::io_context io;
  for (const auto& c : client_cases) {
    BOOST_TEST_CONTEXT(c.what) {
      auto nodes = three_nodes();
      redlock::client_options options;
      c.spoil(nodes, options);
      std::string message = "<no exception>";
      redlock::error_code code;
      try {
        redlock::client locks(io.get_executor(), nodes, options);
      } catch (const boost::system::system_error& e) {
        message = e.what();
        code = e.code();
      }
      BOOST_TEST((code == redlock::error::invalid_argument), code.message());
      BOOST_TEST(contains(message, c.says), message);
    }
  }
  BOOST_CHECK_NO_THROW(redlock::client(io.get_executor(), three_nodes(), {}));
  BOOST_TEST(io.poll() == 0u);  // nothing was started: no connect, no timer
}

BOOST_AUTO_TEST_CASE(a_sound_lock_request_passes) {
  redlock::lock_options options;
  options.ttl = 3ms;  // just above the 2 ms of drift
  options.wait = 0ms;
  options.max_hold = 1ms;
  BOOST_TEST(rd::check_lock_options("r", options, {}) == "");
}

BOOST_AUTO_TEST_CASE(each_lock_rule_names_the_problem) {
  for (const auto& c : lock_cases) {
    BOOST_TEST_CONTEXT(c.what) {
      redlock::lock_options options;
      options.ttl = 10s;
      c.spoil(options);
      const auto reason = rd::check_lock_options(c.resource, options, {});
      BOOST_TEST(contains(reason, c.says), reason);
    }
  }
  // The drift allowance follows the client's drift_factor: a 3 ms ttl has 2.03 ms of drift at
  // the default 0.01, and 3.47 ms at 0.49.
  redlock::client_options drifty;
  drifty.drift_factor = 0.49;
  redlock::lock_options options;
  options.ttl = 3ms;
  BOOST_TEST(rd::check_lock_options("r", options, {}) == "");
  BOOST_TEST(contains(rd::check_lock_options("r", options, drifty), "drift allowance"));
}

BOOST_AUTO_TEST_SUITE_END()
