// The checks a client makes of its configuration and of each lock request before anything is
// sent, and how the constructor reports a refusal. No server: a client connects only when a request
// needs it.

#include "config/options_check.hpp"
#include "redlock/client.hpp"
#include "redlock/error.hpp"
#include "support/text_contains.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
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

redlock::node_config cluster(std::uint16_t port, std::vector<std::string> seeds) {
  redlock::node_config config = node(port);
  config.kind = redlock::node_kind::cluster;
  config.seeds = std::move(seeds);
  return config;
}

// A sentinel node with nothing wrong in it.
redlock::node_config sentinel(std::uint16_t port) {
  redlock::node_config config = node(port);
  config.kind = redlock::node_kind::sentinel;
  config.seeds = {"127.0.0.1:26380", "[::1]:26381"};
  config.sentinel_master = "mymaster";
  config.sentinel_username = "watcher";
  config.sentinel_password = "secret";
  config.database = 3;
  return config;
}

std::vector<redlock::node_config> three_nodes() {
  return {node(7001), node(7002), node(7003)};
}

using redlock::test::contains;

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
    // Cluster and sentinel nodes built by hand.
    {"cluster over a unix socket",
     [](auto& nodes, auto&) {
       nodes[0].kind = redlock::node_kind::cluster;
       nodes[0].unix_path = "/run/r.sock";
     },
     "node unix:/run/r.sock: a cluster is reached over TCP at host:port; unix_path must be empty"},
    {"cluster with a database",
     [](auto& nodes, auto&) {
       nodes[1].kind = redlock::node_kind::cluster;
       nodes[1].database = 2;
     },
     "node 127.0.0.1:7002: a cluster has only database 0, not 2"},
    {"sentinel over a unix socket",
     [](auto& nodes, auto&) {
       nodes[2] = sentinel(26379);
       nodes[2].unix_path = "/run/s.sock";
     },
     "node unix:/run/s.sock: sentinels are reached over TCP at host:port; unix_path must be empty"},
    {"sentinel without a master",
     [](auto& nodes, auto&) {
       nodes[2] = sentinel(26379);
       nodes[2].sentinel_master.clear();
     },
     "node 127.0.0.1:26379: a sentinel node needs sentinel_master, the name the sentinels know "
     "the master by"},
    {"sentinel user without password",
     [](auto& nodes, auto&) {
       nodes[2] = sentinel(26379);
       nodes[2].sentinel_password.clear();
     },
     "node 127.0.0.1:26379 names sentinel user \"watcher\" without a sentinel_password"},
    {"sentinel fields on a cluster",
     [](auto& nodes, auto&) {
       nodes[0].kind = redlock::node_kind::cluster;
       nodes[0].sentinel_master = "m";
     },
     "node 127.0.0.1:7001: sentinel_master, sentinel_username and sentinel_password are for "
     "sentinel nodes"},
    {"sentinel password on a standalone node",
     [](auto& nodes, auto&) { nodes[0].sentinel_password = "secret"; },
     "node 127.0.0.1:7001: sentinel_master, sentinel_username and sentinel_password are for "
     "sentinel nodes"},
    {"seeds on a standalone node", [](auto& nodes, auto&) { nodes[1].seeds = {"127.0.0.1:7004"}; },
     "node 127.0.0.1:7002: seeds are for cluster and sentinel nodes, not a standalone one"},
    {"seed without a port",
     [](auto& nodes, auto&) {
       nodes[0] = cluster(7001, {"h:1", "h"});
     },
     "node 127.0.0.1:7001: seed \"h\" is not \"host:port\": the port is missing"},
    {"empty seed", [](auto& nodes, auto&) { nodes[0] = cluster(7001, {""}); },
     "node 127.0.0.1:7001: seed \"\" is not \"host:port\": host is empty"},
    {"seed with port 0", [](auto& nodes, auto&) { nodes[0] = cluster(7001, {"h:0"}); },
     "seed \"h:0\" is not \"host:port\": port 0 is out of range 1-65535"},
    {"seed with a bad port", [](auto& nodes, auto&) { nodes[0] = cluster(7001, {"h:70000"}); },
     "seed \"h:70000\" is not \"host:port\": port 70000 is out of range 1-65535"},
    {"seed that is a URL", [](auto& nodes, auto&) { nodes[0] = cluster(7001, {"redis://h:7000"}); },
     "seed \"redis://h:7000\" is not \"host:port\": write host:port, without a scheme"},
    {"IPv6 seed without brackets",
     [](auto& nodes, auto&) { nodes[0] = cluster(7001, {"::1:7000"}); },
     "seed \"::1:7000\" is not \"host:port\": host looks like an IPv6 address; write it in "
     "brackets: \"[::1]:7000\""},
    {"IPv6 seed without a port", [](auto& nodes, auto&) { nodes[0] = cluster(7001, {"[::1]"}); },
     "seed \"[::1]\" is not \"host:port\": the port is missing"},
    {"seed of a sentinel",
     [](auto& nodes, auto&) {
       nodes[2] = sentinel(26379);
       nodes[2].seeds = {"s2"};
     },
     "node 127.0.0.1:26379: seed \"s2\" is not \"host:port\": the port is missing"},
    {"wait_replicas above the limit", [](auto& nodes, auto&) { nodes[1].wait_replicas = 65; },
     "node 127.0.0.1:7002: wait_replicas 65 is above the limit of 64"},
    {"wait_replicas of a cluster above the limit",
     [](auto& nodes, auto&) {
       nodes[0] = cluster(7001, {});
       nodes[0].wait_replicas = 1000;
     },
     "node 127.0.0.1:7001: wait_replicas 1000 is above the limit of 64"},
    {"unknown kind", [](auto& nodes, auto&) { nodes[0].kind = static_cast<redlock::node_kind>(7); },
     "node 127.0.0.1:7001 has an unknown kind 7"},
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

// Cluster nodes are not refused: their seeds, TLS, credentials and wait_replicas as allowed.
BOOST_AUTO_TEST_CASE(sound_cluster_nodes_pass) {
  std::vector<redlock::node_config> nodes = three_nodes();
  nodes[0] = cluster(7001, {"127.0.0.1:7004", "[::1]:7005", "redis-2.example:65535", "h:1"});
  nodes[0].username = "alice";
  nodes[0].password = "secret";
  nodes[0].tls.enabled = true;
  nodes[0].wait_replicas = 64;
  nodes[1] = cluster(7002, {});
  nodes[2].wait_replicas = 1;
  BOOST_TEST(rd::check_client_options(nodes, {}) == "");
}

BOOST_AUTO_TEST_CASE(a_sound_sentinel_node_is_accepted_and_needs_its_master_name) {
  auto nodes = three_nodes();
  nodes[0] = sentinel(26379);
  BOOST_TEST(rd::check_client_options(nodes, {}) == "");
  nodes[0].sentinel_master.clear();
  BOOST_TEST(contains(rd::check_client_options(nodes, {}), "needs sentinel_master"));
}

BOOST_AUTO_TEST_CASE(seeds_are_host_and_port) {
  for (const char* seed :
       {"h:1", "127.0.0.1:7000", "[::1]:7000", "[2001:db8::7]:65535", "redis-1.example_x:06379"}) {
    BOOST_TEST_CONTEXT(seed) {
      BOOST_TEST(rd::seed_problem(seed) == "");
    }
  }
  const struct {
    const char* seed;
    const char* problem;
  } bad[] = {
      {"", "host is empty"},
      {"h", "the port is missing"},
      {"h:", "port is empty"},
      {":1", "host is empty"},
      {"h:0", "port 0 is out of range 1-65535"},
      {"h:x", "port \"x\" is not a decimal number"},
      {"h :1", "host \"h \" has an invalid character"},
      {"::1", "host looks like an IPv6 address; write it in brackets: \"[::1]:7000\""},
      {"[::1]", "the port is missing"},
      {"[::1]:", "port is empty"},
      {"[::1", "IPv6 host is missing its closing ']'"},
      {"[x]:1", "host \"[x]\" is not an IPv6 address"},
      {"[::1]7000", "unexpected \"7000\" after the IPv6 host"},
      {"h:1:2", "port \"1:2\" is not a decimal number"},
      {"2001:db8::7:7000", "host looks like an IPv6 address; write it in brackets: \"[::1]:7000\""},
  };
  for (const auto& c : bad) {
    BOOST_TEST_CONTEXT(c.seed) {
      BOOST_TEST(rd::seed_problem(c.seed) == c.problem);
    }
  }
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
