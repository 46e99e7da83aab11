// The setup of a link without a socket: which commands each configuration sends, and the verdict
// on every reply the server may give them, on a refused peer and on a link that fails before the
// server answers. The texts are the ones users read in last_error(), so they are checked whole.

#include "net/handshake.hpp"
#include "redlock/error.hpp"
#include "resp/encoder.hpp"
#include "resp/script.hpp"
#include "support/written_commands.hpp"
#include "unit/resp_values.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace rd = redlock::detail;
namespace resp = redlock::resp;
using boost::system::error_code;
using redlock::error;
using redlock::test::commands;
using redlock::test::decode_commands;

// Known to Redis by these names: `SCRIPT LOAD "return 1"` answers the first.
const rd::script return_1("return 1");
const rd::script return_2("return 2");
constexpr std::string_view return_1_sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";

rd::handshake_probe probe(std::string command, std::initializer_list<std::string_view> words) {
  rd::handshake_probe made{std::move(command), {}};
  resp::encode_command(made.encoded, words);
  return made;
}

// One configuration of a node and its connection, as the handshake is given it.
struct setup {
  redlock::node_config node;
  std::string client_name = "redlock-asio";
  std::string channel;
  bool resp3 = false;
  bool require_master = false;
  rd::server_kind expect = rd::server_kind::any;
  std::vector<const rd::script*> preload;
  std::vector<rd::handshake_probe> probes;
  std::function<std::string(const std::string&)> admit_peer;

  rd::handshake build() const {
    return rd::handshake(node, {.client_name = client_name,
                                .subscribe_channel = channel,
                                .resp3 = resp3,
                                .require_master = require_master,
                                .expect = expect,
                                .preload = preload,
                                .probes = probes,
                                .admit_peer = admit_peer});
  }
};

setup with_password(std::string username, std::string password, int database = 0) {
  setup s;
  s.node.username = std::move(username);
  s.node.password = std::move(password);
  s.node.database = database;
  return s;
}

// What a lock's connection sends: AUTH locker, SELECT 2, CLIENT SETNAME, SCRIPT LOAD, two probes.
setup lock_node() {
  auto s = with_password("locker", "s3cret", 2);
  s.preload = {&return_1};
  s.probes = {probe("SET", {"SET", "probe", "t", "XX", "PX", "1"}),
              probe("EVALSHA", {"EVALSHA", return_1_sha, "1", "probe", "t"})};
  return s;
}

// What a release listener's connection sends: AUTH, CLIENT SETNAME, HELLO 3, SUBSCRIBE.
setup subscriber() {
  auto s = with_password("", "s3cret");
  s.channel = "redlock:released";
  return s;
}

// What a cluster node's release subscriber sends: its subscriptions come later, one per slot.
setup shard_subscriber() {
  auto s = with_password("", "s3cret");
  s.resp3 = true;
  return s;
}

// A node without a password whose connection has no name: its one command is PING.
setup open_node() {
  setup s;
  s.client_name.clear();
  return s;
}

resp::value reply_of(resp::type kind, std::string text = {}) {
  resp::value v;
  v.kind = kind;
  v.text = std::move(text);
  return v;
}

using redlock::test::reply::ok;

resp::value bulk_text(std::string_view text) {
  return reply_of(resp::type::bulk_string, std::string(text));
}

resp::value refusal(std::string text) {
  return reply_of(resp::type::simple_error, std::move(text));
}

using redlock::test::reply::integer;

resp::value aggregate(resp::type kind, std::initializer_list<std::string_view> words) {
  auto v = reply_of(kind);
  for (auto word : words)
    v.elements.push_back(bulk_text(word));
  return v;
}

// What a server that lets everything through answers each configuration's commands.
std::vector<resp::value> lock_node_accepted() {
  return {ok(), ok(), ok(), bulk_text(return_1_sha), reply_of(resp::type::null), integer(0)};
}

std::vector<resp::value> subscriber_accepted() {
  return {ok(), ok(), aggregate(resp::type::map, {"server", "redis", "proto", "3"}),
          aggregate(resp::type::push, {"subscribe", "redlock:released", "1"})};
}

// Feeds `replies` in order and stops at the first failed verdict, which it returns (else the
// last verdict); `judged` counts the replies fed.
struct run_result {
  rd::handshake_verdict verdict;
  std::size_t judged = 0;
};

run_result run(rd::handshake& hs, const std::vector<resp::value>& replies) {
  run_result result;
  for (const auto& reply : replies) {
    BOOST_REQUIRE(!hs.done());
    result.verdict = hs.on_reply(reply);
    ++result.judged;
    if (result.verdict.failed()) break;
  }
  return result;
}

// A configuration and the commands its handshake sends, in order, in one request.
struct command_case {
  const char* configuration;
  setup given;
  commands expected;
};

void check_commands(std::span<const command_case> cases) {
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.configuration) {
      auto hs = c.given.build();
      BOOST_TEST(decode_commands(hs.request()) == c.expected, boost::test_tools::per_element());
      BOOST_TEST(!hs.done());
    }
  }
}

// A configuration, the replies from its first command on, and the verdict on the last one: a
// failure with `code` and `message`, or (no code) the reply let through.
struct verdict_case {
  const char* rule;
  setup given;
  std::vector<resp::value> replies;
  std::optional<error> code;
  std::string message;
};

void check_verdicts(std::span<const verdict_case> cases) {
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.rule) {
      auto hs = c.given.build();
      const auto result = run(hs, c.replies);
      BOOST_TEST(result.judged == c.replies.size());
      if (c.code) {
        BOOST_TEST(result.verdict.code == make_error_code(*c.code));
      } else {
        BOOST_TEST(!result.verdict.failed());
      }
      BOOST_TEST(result.verdict.message == c.message);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(handshake)

BOOST_AUTO_TEST_CASE(each_configuration_sends_its_commands_in_order_in_one_request) {
  auto with_tls_unverified = [] {
    setup s;
    s.node.tls.enabled = true;
    s.node.tls.verify_peer = false;
    return s;
  };
  auto with_user_only = [] {
    setup s;
    s.node.username = "locker";
    return s;
  };
  auto everything = [] {
    auto s = lock_node();
    s.client_name = "billing";
    s.channel = "redlock:released";
    s.preload = {&return_1, &return_2};
    return s;
  };
  const std::string sha_1(return_1_sha);
  const command_case cases[] = {
      {"defaults: only the client's name", setup{}, {"CLIENT SETNAME redlock-asio"}},
      {"no client name: a PING, which still needs authentication", open_node(), {"PING"}},
      {"password without a user: AUTH password",
       with_password("", "s3cret"),
       {"AUTH s3cret", "CLIENT SETNAME redlock-asio"}},
      {"password and user: AUTH user password",
       with_password("locker", "s3cret"),
       {"AUTH locker s3cret", "CLIENT SETNAME redlock-asio"}},
      {"a user without a password sends no AUTH",
       with_user_only(),
       {"CLIENT SETNAME redlock-asio"}},
      {"a database other than 0 is selected after AUTH",
       with_password("", "s3cret", 7),
       {"AUTH s3cret", "SELECT 7", "CLIENT SETNAME redlock-asio"}},
      {"a subscriber switches to RESP3 and subscribes after the name",
       subscriber(),
       {"AUTH s3cret", "CLIENT SETNAME redlock-asio", "HELLO 3", "SUBSCRIBE redlock:released"}},
      {"a shard subscriber switches to RESP3 and subscribes to nothing yet",
       shard_subscriber(),
       {"AUTH s3cret", "CLIENT SETNAME redlock-asio", "HELLO 3"}},
      {"a lock's node loads its scripts, then runs the probes",
       lock_node(),
       {"AUTH locker s3cret", "SELECT 2", "CLIENT SETNAME redlock-asio", "SCRIPT LOAD return 1",
        "SET probe t XX PX 1", "EVALSHA " + sha_1 + " 1 probe t"}},
      {"everything at once, scripts in the order given",
       everything(),
       {"AUTH locker s3cret", "SELECT 2", "CLIENT SETNAME billing", "HELLO 3",
        "SUBSCRIBE redlock:released", "SCRIPT LOAD return 1", "SCRIPT LOAD return 2",
        "SET probe t XX PX 1", "EVALSHA " + sha_1 + " 1 probe t"}},
      {"TLS without verification sends the same commands",
       with_tls_unverified(),
       {"CLIENT SETNAME redlock-asio"}},
  };
  check_commands(cases);
}

BOOST_AUTO_TEST_CASE(probes_go_out_byte_for_byte_as_encoded) {
  const auto s = lock_node();
  const auto hs = s.build();
  const std::string& request = hs.request();
  const std::string tail = s.probes[0].encoded + s.probes[1].encoded;
  BOOST_TEST(request.size() > tail.size());
  BOOST_TEST(request.substr(request.size() - tail.size()) == tail);
}

BOOST_AUTO_TEST_CASE(only_tls_without_peer_verification_is_cautioned) {
  setup plain;
  setup verified;
  verified.node.tls.enabled = true;
  setup unverified = verified;
  unverified.node.tls.verify_peer = false;
  BOOST_TEST(plain.build().caution().empty());
  BOOST_TEST(verified.build().caution().empty());
  BOOST_TEST(unverified.build().caution() ==
             "127.0.0.1:6379: TLS peer verification is off (verify=no): the server is not "
             "authenticated, and anyone in the path can read and change the traffic");
}

BOOST_AUTO_TEST_CASE(every_reply_accepted_completes_the_handshake) {
  const struct {
    const char* configuration;
    setup given;
    std::vector<resp::value> replies;
  } cases[] = {
      {"a lock's node", lock_node(), lock_node_accepted()},
      {"a subscriber", subscriber(), subscriber_accepted()},
      {"an open node", open_node(), {reply_of(resp::type::simple_string, "PONG")}},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.configuration) {
      auto hs = c.given.build();
      for (const auto& reply : c.replies) {
        BOOST_TEST(!hs.done());
        const auto verdict = hs.on_reply(reply);
        BOOST_TEST(!verdict.failed());
        BOOST_TEST(verdict.message.empty());
      }
      BOOST_TEST(hs.done());
    }
  }
}

BOOST_AUTO_TEST_CASE(error_replies_fail_the_connect_or_are_let_through) {
  const std::string wrong_sha(40, '0');
  const std::string sha_1(return_1_sha);
  // `replies` start at the first command; the last one is the reply judged.
  const verdict_case cases[] = {
      // Logging in.
      {"NOAUTH without a password: one is required",
       open_node(),
       {refusal("NOAUTH Authentication required.")},
       error::auth_failed,
       "cannot log in: the server requires a password and none is configured (NOAUTH "
       "Authentication required.)"},
      {"NOAUTH with a password: the one configured was refused",
       lock_node(),
       {ok(), ok(), refusal("NOAUTH Authentication required.")},
       error::auth_failed,
       "cannot log in: the server requires a password and refused the one configured (NOAUTH "
       "Authentication required.)"},
      {"WRONGPASS on AUTH",
       lock_node(),
       {refusal("WRONGPASS invalid username-password pair or user is disabled.")},
       error::auth_failed,
       "cannot log in: AUTH refused (WRONGPASS invalid username-password pair or user is "
       "disabled.)"},
      {"WRONGPASS as a RESP3 blob error",
       lock_node(),
       {reply_of(resp::type::blob_error, "WRONGPASS invalid username-password pair")},
       error::auth_failed,
       "cannot log in: AUTH refused (WRONGPASS invalid username-password pair)"},
      {"another refusal of AUTH",
       subscriber(),
       {refusal("ERR AUTH <password> called without any password configured for the default "
                "user. Are you sure your configuration is correct?")},
       error::auth_failed,
       "cannot log in: AUTH refused (ERR AUTH <password> called without any password configured "
       "for the default user. Are you sure your configuration is correct?)"},
      {"NOAUTH on a probe is still a login failure",
       lock_node(),
       {ok(), ok(), ok(), bulk_text(return_1_sha), refusal("NOAUTH Authentication required.")},
       error::auth_failed,
       "cannot log in: the server requires a password and refused the one configured (NOAUTH "
       "Authentication required.)"},

      // The database.
      {"SELECT of a database the server does not have",
       lock_node(),
       {ok(), refusal("ERR DB index is out of range")},
       error::select_failed,
       "cannot select database 2: SELECT refused (ERR DB index is out of range)"},
      {"NOPERM on SELECT names the user and the command",
       lock_node(),
       {ok(), refusal("NOPERM User locker has no permissions to run the 'select' command")},
       error::permission_denied,
       "ACL user \"locker\" may not run SELECT, which the lock needs (NOPERM User locker has no "
       "permissions to run the 'select' command)"},

      // The name, and the PING in its place.
      {"NOPERM on CLIENT SETNAME is let through: naming the connection is a courtesy",
       lock_node(),
       {ok(), ok(),
        refusal("NOPERM User locker has no permissions to run the 'client|setname' command")},
       std::nullopt,
       ""},
      {"another refusal of CLIENT SETNAME",
       lock_node(),
       {ok(), ok(),
        refusal("ERR Client names cannot contain spaces, newlines or special characters.")},
       error::server_error,
       "CLIENT SETNAME failed: ERR Client names cannot contain spaces, newlines or special "
       "characters."},
      {"an error reply without a code word",
       lock_node(),
       {ok(), ok(), refusal("Error: something odd")},
       error::server_error,
       "CLIENT SETNAME failed: Error: something odd"},
      {"a refused PING",
       open_node(),
       {refusal("LOADING Redis is loading the dataset in memory")},
       error::server_error,
       "PING failed: LOADING Redis is loading the dataset in memory"},

      // A subscriber's RESP3 switch and subscription.
      {"a server without HELLO (Redis 5)",
       subscriber(),
       {ok(), ok(), refusal("ERR unknown command 'HELLO', with args beginning with: '3' ")},
       error::server_error,
       "HELLO 3 failed: ERR unknown command 'HELLO', with args beginning with: '3' "},
      {"NOPERM for the channel, as default user",
       subscriber(),
       {ok(), ok(), aggregate(resp::type::map, {"proto", "3"}),
        refusal("NOPERM User default has no permissions to access the 'redlock:released' "
                "channel")},
       error::permission_denied,
       "ACL user \"default\" may not run SUBSCRIBE, which the lock needs (NOPERM User default "
       "has no permissions to access the 'redlock:released' channel)"},

      // Script loads.
      {"SCRIPT LOAD refused",
       lock_node(),
       {ok(), ok(), ok(), refusal("ERR Error compiling script (new function): user_script:1")},
       error::server_error,
       "SCRIPT LOAD failed: ERR Error compiling script (new function): user_script:1"},
      {"NOPERM on SCRIPT LOAD",
       lock_node(),
       {ok(), ok(), ok(),
        refusal("NOPERM User locker has no permissions to run the 'script|load' command")},
       error::permission_denied,
       "ACL user \"locker\" may not run SCRIPT LOAD, which the lock needs (NOPERM User locker "
       "has no permissions to run the 'script|load' command)"},
      {"SCRIPT LOAD answering another SHA-1",
       lock_node(),
       {ok(), ok(), ok(), bulk_text(wrong_sha)},
       error::server_error,
       "SCRIPT LOAD answered $\"" + wrong_sha + "\", not the script's SHA-1 " + sha_1},
      {"SCRIPT LOAD answering an integer",
       lock_node(),
       {ok(), ok(), ok(), integer(1)},
       error::server_error,
       "SCRIPT LOAD answered (integer) 1, not the script's SHA-1 " + sha_1},
      {"SCRIPT LOAD answering nil",
       lock_node(),
       {ok(), ok(), ok(), reply_of(resp::type::null)},
       error::server_error,
       "SCRIPT LOAD answered (nil), not the script's SHA-1 " + sha_1},
      {"SCRIPT LOAD answering the SHA-1 inside an array",
       lock_node(),
       {ok(), ok(), ok(), aggregate(resp::type::array, {return_1_sha})},
       error::server_error,
       "SCRIPT LOAD answered [$\"" + sha_1 + "\"], not the script's SHA-1 " + sha_1},
      {"SCRIPT LOAD answering the SHA-1 as a simple string",
       lock_node(),
       {ok(), ok(), ok(), reply_of(resp::type::simple_string, sha_1)},
       std::nullopt,
       ""},

      // Permission probes.
      {"NOPERM for a probe's command names the command",
       lock_node(),
       {ok(), ok(), ok(), bulk_text(return_1_sha), reply_of(resp::type::null),
        refusal("NOPERM User locker has no permissions to run the 'evalsha' command")},
       error::permission_denied,
       "ACL user \"locker\" may not run EVALSHA, which the lock needs (NOPERM User locker has no "
       "permissions to run the 'evalsha' command)"},
      {"NOPERM for a probe's key is the resource's business",
       lock_node(),
       {ok(), ok(), ok(), bulk_text(return_1_sha),
        refusal("NOPERM No permissions to access a key")},
       std::nullopt,
       ""},
      {"NOPERM for a probe's key, in Redis 7's other words",
       lock_node(),
       {ok(), ok(), ok(), bulk_text(return_1_sha),
        refusal("NOPERM this user has no permissions to access one of the keys used as "
                "arguments")},
       std::nullopt,
       ""},
      {"NOPERM for something else a probe touches is a command's",
       lock_node(),
       {ok(), ok(), ok(), bulk_text(return_1_sha),
        refusal("NOPERM User locker has no permissions to access the 'x' channel")},
       error::permission_denied,
       "ACL user \"locker\" may not run SET, which the lock needs (NOPERM User locker has no "
       "permissions to access the 'x' channel)"},
      {"a probe meeting maxmemory is the node's state now, not a permission",
       lock_node(),
       {ok(), ok(), ok(), bulk_text(return_1_sha),
        refusal("OOM command not allowed when used memory > 'maxmemory'.")},
       std::nullopt,
       ""},
      {"a probe on a replica",
       lock_node(),
       {ok(), ok(), ok(), bulk_text(return_1_sha), reply_of(resp::type::null),
        refusal("READONLY You can't write against a read only replica.")},
       std::nullopt,
       ""},
  };
  check_verdicts(cases);
}

// A sentinel node's master (connection_options::require_master): ROLE after the name, and only
// a master passes. A replica's answer names whom it follows, so the message says where the
// master went; a sentinel answering ROLE is no master either.
BOOST_AUTO_TEST_CASE(a_server_that_must_be_a_master_is_asked_its_role) {
  setup master_only = with_password("", "s3cret");
  master_only.require_master = true;
  auto hs = master_only.build();
  BOOST_TEST(decode_commands(hs.request()) ==
                 (commands{"AUTH s3cret", "CLIENT SETNAME redlock-asio", "ROLE"}),
             boost::test_tools::per_element());

  const auto role_reply = [](std::vector<resp::value> items) {
    resp::value v;
    v.kind = resp::type::array;
    v.elements = std::move(items);
    return v;
  };
  const auto judged = [&](const resp::value& role) {
    auto attempt = master_only.build();
    BOOST_TEST(!attempt.on_reply(ok()).failed());
    BOOST_TEST(!attempt.on_reply(ok()).failed());
    return attempt.on_reply(role);
  };
  const auto master =
      judged(role_reply({bulk_text("master"), integer(3129), reply_of(resp::type::array)}));
  BOOST_TEST(!master.failed());

  const auto replica = judged(role_reply({bulk_text("slave"), bulk_text("127.0.0.1"), integer(6380),
                                          bulk_text("connected"), integer(3129)}));
  BOOST_TEST((replica.code == error::server_error));
  BOOST_TEST(replica.message.find("ROLE says this server is a replica of 127.0.0.1:6380") == 0u,
             replica.message);

  const auto sentinel = judged(role_reply({bulk_text("sentinel"), reply_of(resp::type::array)}));
  BOOST_TEST((sentinel.code == error::server_error));
  BOOST_TEST(sentinel.message.find("not master") != std::string::npos, sentinel.message);
}

// What a server says it is, in HELLO's reply: a flat array in RESP2, a map in RESP3.
resp::value hello(resp::type kind, std::string_view mode) {
  return aggregate(kind, {"server", "redis", "version", "7.0.15", "proto",
                          kind == resp::type::map ? "3" : "2", "mode", mode, "role", "master"});
}

// A link that must reach a server of some kind asks with HELLO right after the login (HELLO 2 on
// a RESP2 link; a RESP3 link's HELLO 3 serves), before ROLE and any script, so that a server of
// the wrong kind is named as such rather than by the first command it does not know.
BOOST_AUTO_TEST_CASE(a_link_that_must_reach_a_kind_of_server_asks_hello_before_anything_else) {
  auto lock = lock_node();
  lock.expect = rd::server_kind::standalone;
  auto sentinels_master = with_password("", "s3cret");
  sentinels_master.expect = rd::server_kind::standalone;
  sentinels_master.require_master = true;
  auto sentinel = subscriber();
  sentinel.expect = rd::server_kind::sentinel;
  const std::string sha_1(return_1_sha);
  const command_case cases[] = {
      {"a lock's node: HELLO 2 before the scripts",
       lock,
       {"AUTH locker s3cret", "SELECT 2", "CLIENT SETNAME redlock-asio", "HELLO 2",
        "SCRIPT LOAD return 1", "SET probe t XX PX 1", "EVALSHA " + sha_1 + " 1 probe t"}},
      {"a sentinel's master: HELLO 2 before ROLE",
       sentinels_master,
       {"AUTH s3cret", "CLIENT SETNAME redlock-asio", "HELLO 2", "ROLE"}},
      {"a subscriber's HELLO 3 serves, and nothing is added",
       sentinel,
       {"AUTH s3cret", "CLIENT SETNAME redlock-asio", "HELLO 3", "SUBSCRIBE redlock:released"}},
  };
  check_commands(cases);
}

BOOST_AUTO_TEST_CASE(a_server_of_another_kind_fails_the_connect_at_hello_naming_the_url_to_use) {
  auto lock = lock_node();
  lock.expect = rd::server_kind::standalone;
  auto cluster_link = with_password("", "s3cret");
  cluster_link.expect = rd::server_kind::cluster;
  auto sentinel_link = subscriber();
  sentinel_link.expect = rd::server_kind::sentinel;
  auto tls_cluster_link = cluster_link;
  tls_cluster_link.node.tls.enabled = true;
  const auto resp2 = resp::type::array;
  const auto resp3 = resp::type::map;
  // `replies` start at the first command; the last one is HELLO's, the one judged.
  const verdict_case cases[] = {
      {"a sentinel given as redis://",
       lock,
       {ok(), ok(), ok(), hello(resp2, "sentinel")},
       error::wrong_node_kind,
       "the server is a Redis Sentinel, which holds no keys: use "
       "redis+sentinel://127.0.0.1:6379?master=NAME (NAME: the master it monitors) to lock on the "
       "master it names"},
      {"a plain server given as redis://",
       lock,
       {ok(), ok(), ok(), hello(resp2, "standalone")},
       std::nullopt,
       ""},
      {"a cluster node given as redis:// passes: only its redirections are refused",
       lock,
       {ok(), ok(), ok(), hello(resp2, "cluster")},
       std::nullopt,
       ""},
      {"no HELLO (Redis 5): nothing is known, and the requests will tell",
       lock,
       {ok(), ok(), ok(), refusal("ERR unknown command 'HELLO', with args beginning with: '2' ")},
       std::nullopt,
       ""},
      {"an ACL user without HELLO: the same",
       lock,
       {ok(), ok(), ok(),
        refusal("NOPERM this user has no permissions to run the 'hello' command")},
       std::nullopt,
       ""},
      {"a reply without a mode passes",
       lock,
       {ok(), ok(), ok(), aggregate(resp2, {"proto", "2"})},
       std::nullopt,
       ""},
      {"a plain server given as redis+cluster://",
       cluster_link,
       {ok(), ok(), hello(resp2, "standalone")},
       error::wrong_node_kind,
       "the server is not a Redis Cluster node (its cluster mode is off): use "
       "redis://127.0.0.1:6379"},
      {"a sentinel given as redis+cluster://",
       cluster_link,
       {ok(), ok(), hello(resp2, "sentinel")},
       error::wrong_node_kind,
       "the server is a Redis Sentinel, which holds no keys: use "
       "redis+sentinel://127.0.0.1:6379?master=NAME (NAME: the master it monitors) to lock on the "
       "master it names"},
      {"over TLS the URL is a rediss one",
       tls_cluster_link,
       {ok(), ok(), hello(resp2, "standalone")},
       error::wrong_node_kind,
       "the server is not a Redis Cluster node (its cluster mode is off): use "
       "rediss://127.0.0.1:6379"},
      {"a cluster node is one",
       cluster_link,
       {ok(), ok(), hello(resp2, "cluster")},
       std::nullopt,
       ""},
      {"a plain server given as redis+sentinel://",
       sentinel_link,
       {ok(), ok(), hello(resp3, "standalone")},
       error::wrong_node_kind,
       "the server is a Redis server, not a sentinel: use redis://127.0.0.1:6379"},
      {"a cluster node given as redis+sentinel://",
       sentinel_link,
       {ok(), ok(), hello(resp3, "cluster")},
       error::wrong_node_kind,
       "the server is a Redis Cluster node, not a sentinel: use redis+cluster://127.0.0.1:6379"},
      {"a sentinel is one",
       sentinel_link,
       {ok(), ok(), hello(resp3, "sentinel")},
       std::nullopt,
       ""},
  };
  check_verdicts(cases);
  // No refusal quotes what the server would have refused next (a script).
  for (const auto& c : cases)
    BOOST_TEST(c.message.find("SCRIPT") == std::string::npos, c.message);
}

BOOST_AUTO_TEST_CASE(a_connect_after_a_failed_one_judges_from_the_first_reply_again) {
  auto hs = lock_node().build();
  const auto failed = run(hs, {ok(), refusal("ERR DB index is out of range")});
  BOOST_TEST(failed.verdict.code == make_error_code(error::select_failed));
  hs.heard("+OK\r\n-ERR DB index is out of range\r\n");

  hs.restart();
  BOOST_TEST(!hs.done());
  const auto accepted = run(hs, lock_node_accepted());
  BOOST_TEST(!accepted.verdict.failed());
  BOOST_TEST(accepted.judged == lock_node_accepted().size());
  BOOST_TEST(hs.done());
  // What the last link heard says nothing about this one.
  hs.restart();
  BOOST_TEST(!hs.on_link_error(asio::error::eof, "").message.empty());
}

BOOST_AUTO_TEST_CASE(a_refused_peer_fails_the_connect_with_the_refusal) {
  std::vector<std::string> asked;
  auto s = lock_node();
  s.admit_peer = [&asked](const std::string& peer) -> std::string {
    asked.push_back(peer);
    if (peer == "loopback:6379") return "";
    return "127.0.0.1:6380 and 127.0.0.1:6379 are one server (loopback:6379)";
  };
  const auto hs = s.build();

  const auto admitted = hs.admit("loopback:6379");
  BOOST_TEST(!admitted.failed());
  BOOST_TEST(admitted.message.empty());

  const auto refused = hs.admit("10.0.0.7:6379");
  BOOST_TEST(refused.code == make_error_code(error::invalid_argument));
  BOOST_TEST(refused.message == "127.0.0.1:6380 and 127.0.0.1:6379 are one server (loopback:6379)");
  BOOST_TEST(asked == (std::vector<std::string>{"loopback:6379", "10.0.0.7:6379"}),
             boost::test_tools::per_element());

  // Without an admit_peer every peer is this node.
  BOOST_TEST(!lock_node().build().admit("10.0.0.7:6379").failed());
}

BOOST_AUTO_TEST_CASE(a_link_failing_before_the_answer_is_explained_by_what_it_sent) {
  const error_code eof = asio::error::eof;
  const error_code reset = asio::error::connection_reset;
  const error_code not_resp = make_error_code(error::protocol_error);
  const auto closed_unanswered = [](error_code ec) {
    return fmt::format(
        "the server closed the connection without answering the handshake ({}; a TLS port? use "
        "rediss://)",
        ec.message());
  };
  const struct {
    const char* rule;
    bool tls;
    std::vector<std::string_view> heard;  // as the reads brought it
    error_code ec;
    std::string message;  // empty: the transport's description stands
  } cases[] = {
      {"a plain link closed without a byte: a TLS port?", false, {}, eof, closed_unanswered(eof)},
      {"a plain link reset without a byte", false, {}, reset, closed_unanswered(reset)},
      {"a link closed after the server said something", false, {"+OK\r\n"}, eof, ""},
      {"a TLS link closed without a byte", true, {}, eof, ""},
      {"an HTTP server",
       false,
       {"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"},
       not_resp,
       "the server at 127.0.0.1:6379 does not speak RESP (an HTTP server?); it sent \"HTTP/1.1 "
       "400 Bad Request\" (parser refused it)"},
      {"a TLS alert on a plain port",
       false,
       {std::string_view("\x15\x03\x03\x00\x02\x02\x46", 7)},
       not_resp,
       "the server at 127.0.0.1:6379 does not speak RESP (a TLS port? use rediss://); it sent "
       "\"\\x15\\x03\\x03\\x00\\x02\\x02F\" (parser refused it)"},
      {"a TLS handshake record",
       false,
       {"\x16\x03\x01"},
       not_resp,
       "the server at 127.0.0.1:6379 does not speak RESP (a TLS port? use rediss://); it sent "
       "\"\\x16\\x03\\x01\" (parser refused it)"},
      {"an SSH server",
       false,
       {"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"},
       not_resp,
       "the server at 127.0.0.1:6379 does not speak RESP (an SSH server?); it sent "
       "\"SSH-2.0-OpenSSH_9.2p1 De\" (parser refused it)"},
      {"something else",
       false,
       {"hello\r\n"},
       not_resp,
       "the server at 127.0.0.1:6379 does not speak RESP; it sent \"hello\\x0d\\x0a\" (parser "
       "refused it)"},
      {"only the first bytes are quoted, however they arrived",
       false,
       {"HTTP/1.1 ", "400 Bad Request\r\n", "Server: nginx\r\n"},
       not_resp,
       "the server at 127.0.0.1:6379 does not speak RESP (an HTTP server?); it sent \"HTTP/1.1 "
       "400 Bad Request\" (parser refused it)"},
      {"a timeout or a cancellation", false, {}, asio::error::operation_aborted, ""},
      {"a refused connection", false, {"-ERR"}, asio::error::connection_refused, ""},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.rule) {
      setup s;
      s.node.tls.enabled = c.tls;
      auto hs = s.build();
      hs.restart();
      for (auto bytes : c.heard)
        hs.heard(bytes);
      const auto verdict = hs.on_link_error(c.ec, "parser refused it");
      BOOST_TEST(verdict.code == c.ec);
      BOOST_TEST(verdict.message == c.message);
    }
  }
}

BOOST_AUTO_TEST_CASE(failures_that_a_new_attempt_would_meet_again_are_permanent) {
  const struct {
    error_code ec;
    bool permanent;
  } cases[] = {
      {error::auth_failed, true},
      {error::select_failed, true},
      {error::permission_denied, true},
      {error::protocol_error, true},
      {error::invalid_argument, true},
      {error::tls_handshake_failed, true},
      {error::certificate_rejected, true},
      {error::wrong_node_kind, true},
      {error::server_error, false},
      {error::connect_timeout, false},
      {error::connection_lost, false},
      {error::not_connected, false},
      {asio::error::eof, false},
      {asio::error::connection_refused, false},
      {error_code{}, false},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.ec.message()) {
      BOOST_TEST(rd::is_permanent_connect_failure(c.ec) == c.permanent);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
