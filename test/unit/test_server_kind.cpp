// Whether a server is of the kind its URL names, without a socket: what HELLO's mode says, the
// refusal of each wrong kind with the URL to use, and the MOVED or ASK of a cluster node given as
// redis://. The texts are the ones users read, so they are checked whole.

#include "net/server_kind.hpp"
#include "redlock/node_config.hpp"
#include "resp/value.hpp"

#include <boost/test/unit_test.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace {

namespace rd = redlock::detail;
namespace resp = redlock::resp;
using rd::server_kind;

resp::value of_kind(resp::type kind, std::string text = {}) {
  resp::value v;
  v.kind = kind;
  v.text = std::move(text);
  return v;
}

resp::value fields(resp::type kind, std::initializer_list<std::string_view> words) {
  auto v = of_kind(kind);
  for (auto word : words)
    v.elements.push_back(of_kind(resp::type::bulk_string, std::string(word)));
  return v;
}

redlock::node_config at(std::string host, std::uint16_t port, bool tls = false) {
  redlock::node_config node;
  node.host = std::move(host);
  node.port = port;
  node.tls.enabled = tls;
  node.password = "s3cret";  // never shown in a URL
  return node;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(server_kind_verdicts)

BOOST_AUTO_TEST_CASE(hello_says_the_mode_in_resp2_and_resp3) {
  for (const auto kind : {resp::type::array, resp::type::map}) {
    BOOST_TEST_CONTEXT(resp::to_string(kind)) {
      BOOST_TEST((rd::server_mode_of(fields(kind, {"proto", "2", "mode", "sentinel"})) ==
                  server_kind::sentinel));
      BOOST_TEST((rd::server_mode_of(fields(kind, {"mode", "cluster"})) == server_kind::cluster));
      BOOST_TEST(
          (rd::server_mode_of(fields(kind, {"mode", "standalone"})) == server_kind::standalone));
      BOOST_TEST(!rd::server_mode_of(fields(kind, {"mode", "quantum"})).has_value());
      BOOST_TEST(!rd::server_mode_of(fields(kind, {"proto", "2"})).has_value());
    }
  }
  BOOST_TEST(!rd::server_mode_of(of_kind(resp::type::simple_error, "ERR unknown command")));
  BOOST_TEST(!rd::server_mode_of(of_kind(resp::type::simple_string, "OK")));
}

BOOST_AUTO_TEST_CASE(only_a_server_of_another_kind_is_refused) {
  const auto node = at("10.0.0.5", 26379);
  const server_kind kinds[] = {server_kind::standalone, server_kind::cluster,
                               server_kind::sentinel};
  for (const auto found : kinds) {
    BOOST_TEST(!rd::wrong_kind_refusal(server_kind::any, found, node).has_value());
    BOOST_TEST(!rd::wrong_kind_refusal(found, found, node).has_value());
  }
  // A cluster node serving every slot works as redis://: its redirections alone are refused.
  BOOST_TEST(!rd::wrong_kind_refusal(server_kind::standalone, server_kind::cluster, node));
  BOOST_TEST(rd::wrong_kind_refusal(server_kind::standalone, server_kind::sentinel, node).value() ==
             "the server is a Redis Sentinel, which holds no keys: use "
             "redis+sentinel://10.0.0.5:26379?master=NAME (NAME: the master it monitors) to lock "
             "on the master it names");
  BOOST_TEST(rd::wrong_kind_refusal(server_kind::sentinel, server_kind::cluster, node).value() ==
             "the server is a Redis Cluster node, not a sentinel: use "
             "redis+cluster://10.0.0.5:26379");
}

BOOST_AUTO_TEST_CASE(urls_keep_the_address_and_tls_and_leave_out_the_credentials) {
  BOOST_TEST(rd::url_as(at("10.0.0.5", 7000), redlock::node_kind::cluster) ==
             "redis+cluster://10.0.0.5:7000");
  BOOST_TEST(rd::url_as(at("10.0.0.5", 7000, true), redlock::node_kind::standalone) ==
             "rediss://10.0.0.5:7000");
  BOOST_TEST(rd::url_as(at("::1", 26379, true), redlock::node_kind::sentinel) ==
             "rediss+sentinel://[::1]:26379?master=NAME");
  redlock::node_config local;
  local.unix_path = "/run/redis.sock";
  BOOST_TEST(rd::url_as(local, redlock::node_kind::standalone) == "unix:///run/redis.sock");
  BOOST_TEST(rd::url_as(local, redlock::node_kind::cluster) == "redis+cluster://HOST:PORT");
}

// A cluster node given as redis:// answers MOVED or ASK for a key of a slot it does not serve:
// the command did not run, and no retry will make it run there.
BOOST_AUTO_TEST_CASE(a_redirection_from_a_redis_url_node_is_refused_naming_redis_cluster) {
  const auto node = at("127.0.0.1", 7000);
  auto moved = of_kind(resp::type::simple_error, "MOVED 866 127.0.0.1:7001");
  BOOST_TEST(rd::cluster_redirect_refusal(moved, node).value() ==
             "the server is a Redis Cluster node: it answered MOVED 866 127.0.0.1:7001 (the "
             "key's hash slot is served by another node): use redis+cluster://127.0.0.1:7000");
  BOOST_TEST(rd::replace_cluster_redirect(moved, "127.0.0.1:7000", node));
  BOOST_TEST((moved.kind == resp::type::simple_error));
  BOOST_TEST(moved.text.starts_with("127.0.0.1:7000: the server is a Redis Cluster node"));

  auto ask = of_kind(resp::type::simple_error, "ASK 866 127.0.0.1:7001");
  BOOST_TEST(rd::replace_cluster_redirect(ask, "127.0.0.1:7000", node));
  BOOST_TEST(ask.text.find("answered ASK 866") != std::string::npos);

  for (auto other : {of_kind(resp::type::simple_error, "ERR unknown command"),
                     of_kind(resp::type::simple_error, "MOVEDX 1 h:1"),
                     of_kind(resp::type::bulk_string, "MOVED 866 127.0.0.1:7001"),
                     of_kind(resp::type::simple_string, "OK")}) {
    const auto kept = other;
    BOOST_TEST(!rd::replace_cluster_redirect(other, "127.0.0.1:7000", node));
    BOOST_TEST((other == kept));
  }
}

BOOST_AUTO_TEST_SUITE_END()
