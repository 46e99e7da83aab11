// rediss:// nodes against real redis-server processes listening for TLS with certificates made by
// the fixture (support/test_pki.hpp): the lock over TLS, every verification failure named with
// its cause, client certificates, SNI, verification after a reconnect, a handshake that never
// ends, servers and clients that disagree about TLS, and fleets that mix TLS, plain TCP and Unix
// sockets.

#include "integration/prelude.hpp"
#include "net/connection.hpp"
#include "redlock/redlock.hpp"
#include "resp/encoder.hpp"
#include "support/acquire_once.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/client_options.hpp"
#include "support/inspector.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"
#include "support/test_pki.hpp"
#include "support/tls_probe_server.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace {

namespace rd = redlock::detail;
using redlock::condition;
using redlock::test::acquire_once;
using redlock::test::check_fails_at_once;
using redlock::test::contains;
using redlock::test::default_wait;
using redlock::test::long_wait;
using redlock::test::redis_server;
using redlock::test::redis_server_options;
using redlock::test::renewal;
using redlock::test::test_pki;
using redlock::test::tls_probe_server;

// Made once per test process: a dozen openssl runs.
const test_pki& pki() {
  return redlock::test::shared_test_pki();
}

redis_server_options tls_server(const test_pki::identity& identity,
                                bool require_client_certificate = false) {
  redis_server_options options;
  options.tls = redis_server_options::tls_listener{identity.cert.string(), identity.key.string(),
                                                   pki().ca().string(), require_client_certificate};
  return options;
}

std::string ca() {
  return pki().ca().string();
}

// Five servers with certificates of the trusted CA, and an inspector on their plain ports.
struct five_tls_nodes {
  redis_fleet fleet{5, tls_server(pki().server())};
  inspector nodes{fleet};
};

// A server with `identity` as its certificate, reached over TLS at 127.0.0.1.
struct tls_node {
  explicit tls_node(const test_pki::identity& identity) : server(tls_server(identity)) {}
  redis_server server;
  redlock::node_config config() const { return server.tls_config(ca()); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(tls)

// The whole lock over TLS: acquire, renewal at half-life past the TTL, release. Three nodes are
// named by address (checked against the certificate's IP entry), two by name (its DNS entry).
BOOST_FIXTURE_TEST_CASE(acquire_renew_release_over_five_tls_nodes, five_tls_nodes) {
  auto configs = fleet.tls_configs(ca());
  configs[3].host = "localhost";
  configs[4].host = "localhost";
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), configs, fast_client_options());
    auto [ec, lease] =
        co_await locks.async_acquire("tls:job", lock_for(600ms, renewal::on), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(co_await redlock::test::eventually(
        [&] { return nodes.holding("tls:job", lease.token()) == 5u; }, 3000ms));
    // Three TTLs: only renewal over TLS keeps it.
    co_await sleep_for(1800ms);
    BOOST_TEST(lease.held(), lease.diagnostics());
    BOOST_TEST(nodes.holding("tls:job", lease.token()) >= 3u);
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
    BOOST_TEST(
        co_await redlock::test::eventually([&] { return nodes.present("tls:job") == 0u; }, 2000ms));
  });
}

// Each way a certificate can be wrong costs that node its vote, with the cause in the diagnostics;
// the others carry the lock.
BOOST_AUTO_TEST_CASE(each_bad_certificate_loses_its_node_the_vote) {
  redis_fleet good(3, tls_server(pki().server()));
  tls_node wrong_ca(pki().server_of_other_ca());
  tls_node expired(pki().server_expired());
  auto nodes = good.tls_configs(ca());
  nodes.push_back(wrong_ca.config());
  nodes.push_back(expired.config());
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), nodes, fast_client_options());
    auto [ec, lease] = co_await locks.async_acquire("tls:partly", default_wait(), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    for (int i = 0;
         i < 100 && lease.diagnostics().find(expired.config().address()) == std::string::npos;
         ++i) {
      co_await sleep_for(10ms);
    }
    const std::string said = lease.diagnostics();
    BOOST_TEST(lease.granted_nodes() == 3u, said);
    BOOST_TEST(contains(said, wrong_ca.config().address()), said);
    BOOST_TEST(contains(said, "unable to get local issuer certificate"), said);
    BOOST_TEST(contains(said, expired.config().address()), said);
    BOOST_TEST(contains(said, "certificate has expired"), said);
    co_await lease.async_release(tuple_awaitable);
  });
}

// Bad certificates on a majority: the acquire ends at once (also without `wait`) as a node
// failure, naming the nodes and the causes: an untrusted CA, a name the certificate does not
// carry, an expired certificate.
BOOST_AUTO_TEST_CASE(a_majority_of_bad_certificates_fails_at_once) {
  tls_node good_a(pki().server());
  tls_node good_b(pki().server());
  tls_node wrong_ca(pki().server_of_other_ca());
  tls_node wrong_name(pki().server_wrong_name());
  tls_node expired(pki().server_expired());
  const std::vector<redlock::node_config> nodes = {
      good_a.config(), wrong_ca.config(), wrong_name.config(), expired.config(), good_b.config()};
  for (const auto& options : {default_wait(), long_wait()}) {
    const auto result = acquire_once(nodes, options);
    check_fails_at_once(result, error::certificate_rejected, wrong_ca.config().address(),
                        "unable to get local issuer certificate");
    BOOST_TEST(contains(result.diagnostics, wrong_name.config().address()), result.diagnostics);
    BOOST_TEST(contains(result.diagnostics, "IP address mismatch"), result.diagnostics);
    BOOST_TEST(contains(result.diagnostics, expired.config().address()), result.diagnostics);
    BOOST_TEST(contains(result.diagnostics, "certificate has expired"), result.diagnostics);
  }
  // By name, the wrong-name certificate fails the host name check instead.
  auto by_name = wrong_name.config();
  by_name.host = "localhost";
  const auto result = acquire_once({by_name}, default_wait());
  check_fails_at_once(result, error::certificate_rejected, by_name.address(), "hostname mismatch");
}

// verify=no accepts a certificate nobody vouches for, and says so in the log on every connect.
BOOST_AUTO_TEST_CASE(verification_off_accepts_any_certificate_and_warns) {
  tls_node untrusted(pki().server_of_other_ca());
  auto node = untrusted.config();
  node.tls.verify_peer = false;
  std::mutex mutex;
  std::vector<std::string> warnings;
  auto options = fast_client_options();
  options.logger = [&](redlock::log_level level, std::string_view message) {
    const std::lock_guard guard(mutex);
    if (level == redlock::log_level::warning && contains(std::string(message), "verification"))
      warnings.emplace_back(message);
  };
  const auto result = acquire_once({node}, default_wait(), false, "tls:insecure", options);
  BOOST_TEST(!result.ec, result.ec.message() << ": " << result.diagnostics);
  BOOST_TEST_REQUIRE(warnings.size() >= 1u);
  BOOST_TEST(contains(warnings.front(), node.address()), warnings.front());
  BOOST_TEST(contains(warnings.front(), "verification is off"), warnings.front());
}

// tls-auth-clients yes: without a certificate the node refuses the client (said in words), with
// the CA's client certificate it serves the lock.
BOOST_AUTO_TEST_CASE(client_certificate_required_by_the_server) {
  redis_server server(tls_server(pki().server(), true));
  auto node = server.tls_config(ca());
  auto result = acquire_once({node}, default_wait());
  check_fails_at_once(result, error::tls_handshake_failed, node.address(),
                      "the server requires a client certificate");

  node.tls.cert_file = pki().client().cert.string();
  node.tls.key_file = pki().client().key.string();
  result = acquire_once({node}, default_wait());
  BOOST_TEST(!result.ec, result.ec.message() << ": " << result.diagnostics);
  BOOST_TEST(result.granted == 1u);

  // A certificate file that cannot be read is named.
  node.tls.cert_file = (pki().dir() / "missing.pem").string();
  result = acquire_once({node}, default_wait());
  check_fails_at_once(result, error::tls_handshake_failed, node.address(),
                      "cannot load the client certificate");
  BOOST_TEST(contains(result.diagnostics, "missing.pem"), result.diagnostics);
}

// SNI carries the host name, or the server_name given instead; never an IP address (RFC 6066).
BOOST_AUTO_TEST_CASE(server_name_indication) {
  tls_probe_server probe(tls_probe_server::mode::record_server_name, pki().server().cert.string(),
                         pki().server().key.string());
  const auto connect_once = [&](redlock::node_config node) {
    node.port = probe.port();
    node.tls.enabled = true;
    node.tls.ca_file = ca();
    const auto before = probe.server_names().size();
    // The probe closes after the handshake, so the acquire itself fails; only the name counts.
    (void)acquire_once({node}, default_wait(), true);
    BOOST_TEST(redlock::test::eventually_blocking(
        [&] { return probe.server_names().size() > before; }, 3000ms));
    return probe.server_names().back();
  };
  redlock::node_config node;
  node.host = "localhost";
  BOOST_TEST((connect_once(node) == std::optional<std::string>("localhost")));
  node.host = "127.0.0.1";
  BOOST_TEST((connect_once(node) == std::nullopt));
  node.tls.server_name = "localhost";
  BOOST_TEST((connect_once(node) == std::optional<std::string>("localhost")));
}

// Every reconnect makes a new TLS session and verifies again: after CLIENT KILL the lock goes on;
// after the servers restart with a certificate for another name, they are refused.
BOOST_FIXTURE_TEST_CASE(verification_applies_after_every_reconnect, five_tls_nodes) {
  const auto configs = fleet.tls_configs(ca());
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), configs, fast_client_options());
    auto [ec, lease] = co_await locks.async_acquire("tls:again", default_wait(), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    co_await lease.async_release(tuple_awaitable);

    for (std::size_t i = 0; i < fleet.size(); ++i) {
      sync_client(fleet[i].port()).command({"CLIENT", "KILL", "TYPE", "normal"});
    }
    auto options = default_wait();
    options.wait = 5s;
    std::tie(ec, lease) = co_await locks.async_acquire("tls:again", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    co_await lease.async_release(tuple_awaitable);

    for (std::size_t i = 0; i < 3; ++i) {
      fleet[i].set_tls_certificate(pki().server_wrong_name().cert.string(),
                                   pki().server_wrong_name().key.string());
      fleet[i].restart();
    }
    std::tie(ec, lease) = co_await locks.async_acquire("tls:again", options, tuple_awaitable);
    BOOST_TEST(ec == error::certificate_rejected, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(contains(lease.diagnostics(), "IP address mismatch"), lease.diagnostics());
    BOOST_TEST(nodes.present("tls:again") == 0u);
  });
}

// A server that accepts TCP and never answers the ClientHello: the connect fails after
// connect_timeout, saying that it was in the TLS handshake.
BOOST_AUTO_TEST_CASE(a_handshake_that_never_completes_times_out) {
  tls_probe_server silent(tls_probe_server::mode::never_handshake);
  redlock::node_config node;
  node.port = silent.port();
  node.tls.enabled = true;
  node.tls.ca_file = ca();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    rd::connection_options options;
    options.connect_timeout = 300ms;
    auto conn = rd::connection::create(io.get_executor(), node, options);
    std::string ping;
    redlock::resp::encode_command(ping, {"PING"});
    const auto start = steady_clock::now();
    auto [ec, reply] =
        co_await conn->async_exec_encoded(ping, rd::request_options{0ms}, tuple_awaitable);
    BOOST_TEST(ec == error::connect_timeout, ec.message());
    BOOST_TEST(contains(reply.text, "while performing the TLS handshake"), reply.text);
    BOOST_TEST(ms_since(start) >= 290);
    BOOST_TEST(ms_since(start) < 3000);
    conn->close();
  });
  BOOST_TEST(silent.accepted() >= 1u);
}

// A client that speaks TLS to a plain port, and one that speaks plain RESP to a TLS port: each is
// told what is likely wrong. A plain Redis reads a ClientHello as the start of an inline command
// and answers only if its random bytes happen to hold a newline: then the client sees that the
// server does not speak TLS; otherwise the handshake times out, and the message asks the same
// question.
BOOST_AUTO_TEST_CASE(tls_and_plain_mixed_up) {
  redis_server server(tls_server(pki().server()));
  auto tls_to_plain = server.config();
  tls_to_plain.tls.enabled = true;
  tls_to_plain.tls.ca_file = ca();
  for (int attempt = 0; attempt < 3; ++attempt) {
    run_async([&](asio::io_context& io) -> asio::awaitable<void> {
      rd::connection_options options;
      options.connect_timeout = 300ms;
      auto conn = rd::connection::create(io.get_executor(), tls_to_plain, options);
      std::string ping;
      redlock::resp::encode_command(ping, {"PING"});
      auto [ec, reply] =
          co_await conn->async_exec_encoded(ping, rd::request_options{0ms}, tuple_awaitable);
      BOOST_TEST((ec == error::connect_timeout || ec == error::tls_handshake_failed), ec.message());
      BOOST_TEST(contains(reply.text, "is it a plain redis:// port?"), reply.text);
      conn->close();
    });
  }

  auto plain_to_tls = server.tls_config(ca());
  plain_to_tls.tls = {};
  // A Redis TLS port resets the connection without a byte: a passing failure as far as the client
  // can tell (a proxy without a backend does the same), named with the likely cause.
  const auto result = acquire_once({plain_to_tls}, default_wait(), true);
  BOOST_TEST(result.ec == error::no_quorum, result.ec.message());
  BOOST_TEST(contains(result.diagnostics, plain_to_tls.address()), result.diagnostics);
  BOOST_TEST(contains(result.diagnostics, "use rediss://"), result.diagnostics);
}

// A plain Redis port given as rediss://, for an acquire that waits through many rounds: what its
// last round met may be the connect timeout, a SET that timed out behind the unanswered TLS
// handshake or one skipped behind such a SET, or the node down between attempts. Each of those
// asks whether the port is a plain one, so the final error (the exception's what(), the lease's
// diagnostics) does too.
BOOST_AUTO_TEST_CASE(an_acquire_that_gives_up_on_a_plain_port_asks_about_it) {
  redis_server server;
  auto node = server.config();
  node.tls.enabled = true;
  node.tls.ca_file = ca();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto options = fast_client_options(100ms);
    options.connect_timeout = 300ms;
    redlock::client locks(io.get_executor(), {node}, options);
    auto lock = lock_for(5s, renewal::off);
    lock.wait = 1500ms;
    std::string what;
    try {
      redlock::lease held = co_await locks.async_acquire("orders:8", lock, asio::use_awaitable);
      BOOST_TEST(!held.held(), "acquired through a plain port");
    } catch (const boost::system::system_error& e) {
      what = e.what();
    }
    BOOST_TEST_MESSAGE(what);
    BOOST_TEST(contains(what, node.address()), what);
    BOOST_TEST(contains(what, "is it a plain redis:// port?"), what);
  });
}

// One client, three kinds of link: two TLS nodes, two plain ones and a Unix socket.
BOOST_AUTO_TEST_CASE(a_fleet_of_tls_plain_and_unix_socket_nodes) {
  redis_fleet tls_nodes(2, tls_server(pki().server()));
  redis_fleet plain_nodes(2);
  redis_server_options local;
  local.unix_socket = true;
  redis_server socket_node(local);
  auto nodes = tls_nodes.tls_configs(ca());
  for (const auto& node : plain_nodes.configs())
    nodes.push_back(node);
  nodes.push_back(socket_node.unix_config());
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), nodes, fast_client_options());
    auto [ec, lease] = co_await locks.async_acquire("mixed", default_wait(), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(co_await redlock::test::eventually(
        [&] {
          const auto held = [&](std::uint16_t port) {
            return sync_client(port).command({"GET", "mixed"}).text == lease.token();
          };
          return held(tls_nodes[0].port()) && held(tls_nodes[1].port()) &&
                 held(plain_nodes[0].port()) && held(plain_nodes[1].port()) &&
                 held(socket_node.port());
        },
        3000ms));
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
  });
}

BOOST_AUTO_TEST_SUITE_END()
