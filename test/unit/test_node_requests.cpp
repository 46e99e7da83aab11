// What a node does around a request, without a server: wait_replicas pairs a write with WAIT and
// counts the node's vote only when enough replicas acknowledged it; two nodes that reach one
// server are refused, whichever of their connections met it.

#include "algo/hash_slot.hpp"
#include "lock/scripts.hpp"
#include "nodes/node_set.hpp"
#include "nodes/peer_registry.hpp"
#include "nodes/replica_wait.hpp"
#include "nodes/standalone_node.hpp"
#include "ops/lock_requests.hpp"
#include "redlock/error.hpp"
#include "resp/encoder.hpp"
#include "support/printing.hpp"
#include "unit/resp_values.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>

using redlock::detail::after_replica_wait;
using redlock::detail::peer_registry;
using redlock::detail::wait_command;
namespace resp = redlock::resp;

namespace {

using redlock::test::reply::error_reply;
using redlock::test::reply::integer;

using redlock::test::reply::ok;

}  // namespace

BOOST_AUTO_TEST_SUITE(replica_wait)

BOOST_AUTO_TEST_CASE(wait_leaves_the_request_time_to_answer) {
  BOOST_TEST(*wait_command(2, std::chrono::milliseconds(200)) ==
             "*3\r\n$4\r\nWAIT\r\n$1\r\n2\r\n$3\r\n150\r\n");
  BOOST_TEST(*wait_command(1, std::chrono::milliseconds(1)) ==
             "*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$1\r\n1\r\n");
}

BOOST_AUTO_TEST_CASE(a_write_counts_once_enough_replicas_have_it) {
  const auto answer = after_replica_wait({}, ok(), {}, integer(2), 2, "127.0.0.1:7000");
  BOOST_TEST(!answer.ec);
  BOOST_TEST(answer.reply.text == "OK");
  // More replicas than asked for is as good.
  BOOST_TEST(after_replica_wait({}, integer(7), {}, integer(3), 1, "n").reply.integer == 7);
}

BOOST_AUTO_TEST_CASE(too_few_replicas_fail_the_vote_naming_the_counts) {
  const auto answer = after_replica_wait({}, ok(), {}, integer(0), 1, "127.0.0.1:7000");
  BOOST_TEST(!answer.ec);  // the write may have run: not "unsent", so it is cleaned up
  BOOST_TEST(answer.reply.is_error());
  BOOST_TEST(answer.reply.error_code_word() == "NOREPLICAS");
  BOOST_TEST(answer.reply.text.find("127.0.0.1:7000") != std::string::npos, answer.reply.text);
  BOOST_TEST(answer.reply.text.find("0 of the 1 replicas") != std::string::npos, answer.reply.text);
}

BOOST_AUTO_TEST_CASE(a_failed_wait_fails_the_vote) {
  const auto answer =
      after_replica_wait({}, ok(), make_error_code(redlock::error::connection_lost),
                         error_reply("127.0.0.1:7000: connection lost"), 1, "127.0.0.1:7000");
  BOOST_TEST(answer.reply.error_code_word() == "NOREPLICAS");
  BOOST_TEST(answer.reply.text.find("connection lost") != std::string::npos, answer.reply.text);
  // WAIT refused (a replica cannot WAIT): its reply is named.
  const auto refused =
      after_replica_wait({}, ok(), {}, error_reply("ERR WAIT cannot be used"), 1, "127.0.0.1:7000");
  BOOST_TEST(refused.reply.error_code_word() == "NOREPLICAS");
}

BOOST_AUTO_TEST_CASE(a_failed_write_stays_as_it_was) {
  const auto timed_out = after_replica_wait(make_error_code(redlock::error::request_timeout),
                                            error_reply("127.0.0.1:7000: timed out"),
                                            make_error_code(redlock::error::request_timeout),
                                            error_reply("timed out"), 1, "127.0.0.1:7000");
  BOOST_TEST(timed_out.ec == redlock::error::request_timeout);
  BOOST_TEST(timed_out.reply.text == "127.0.0.1:7000: timed out");
  const auto refused =
      after_replica_wait({}, error_reply("NOSCRIPT no script"), {}, integer(1), 1, "n");
  BOOST_TEST(refused.reply.text == "NOSCRIPT no script");
}

// WAIT follows only the writes that grant or extend: a refusal is the node's answer as it came
// (its holder's PTTL, or a writer's mark set beside it), whatever WAIT says, so that a contended
// round is reported as contended and a mark it set is known and deleted.
BOOST_AUTO_TEST_CASE(a_refusal_is_the_answer_whatever_wait_says) {
  using redlock::detail::acquire_granted;
  using redlock::detail::script_acted;
  using redlock::test::reply::array;
  using redlock::test::reply::bulk;
  using redlock::test::reply::nil;
  struct row {
    const char* what;
    resp::value reply;
    bool (*counts)(const resp::value&);
    bool replicated;  // counts only once WAIT confirms it
  };
  const row rows[] = {
      {"a SET's grant", ok(), &acquire_granted, true},
      {"a SET's refusal", nil(), &acquire_granted, false},
      {"a refusal with the holder's PTTL", integer(1), &acquire_granted, false},
      {"a fenced grant", array({bulk("7")}), &acquire_granted, true},
      {"a set's fenced grant", array({bulk("7"), bulk("3")}), &acquire_granted, true},
      {"a writer refused by readers, its mark set", array({bulk("readers"), integer(900)}),
       &acquire_granted, false},
      {"a semaphore's fenced grant", array({bulk("4")}), &acquire_granted, true},
      {"a semaphore's grant", ok(), &acquire_granted, true},
      {"a semaphore's refusal", bulk("-2,900"), &acquire_granted, false},
      {"a semaphore of another size", array({bulk("permits"), bulk("3")}), &acquire_granted, false},
      {"an extension", integer(1), &script_acted, true},
      {"an extension of a key no longer ours", integer(0), &script_acted, false},
  };
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT(r.what) {
      const auto answer = after_replica_wait({}, r.reply, {}, integer(0), 1, "n", r.counts);
      if (r.replicated) {
        BOOST_TEST(answer.reply.error_code_word() == "NOREPLICAS");
      } else {
        BOOST_TEST((answer.reply == r.reply));
      }
    }
  }
}

// The node set issues a request straight on a node's connection only where exec would add
// nothing: a standalone server whose writes wait for no replicas. With wait_replicas, every
// request goes through exec, which pairs writes with WAIT.
BOOST_AUTO_TEST_CASE(only_a_node_that_waits_for_no_replicas_is_reached_directly) {
  boost::asio::io_context io;
  redlock::detail::standalone_node plain(io.get_executor(),
                                         redlock::node_config::from_url("redis://127.0.0.1:1"), {});
  redlock::detail::standalone_node waiting(
      io.get_executor(), redlock::node_config::from_url("redis://127.0.0.1:2?wait_replicas=1"), {});
  BOOST_TEST(plain.direct_connection() == &plain.link());
  BOOST_TEST(waiting.direct_connection() == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(peer_registry_checks)

BOOST_AUTO_TEST_CASE(two_nodes_reaching_one_server_are_refused_by_name) {
  auto registry =
      std::make_shared<peer_registry>(std::vector<std::string>{"a:1", "cluster-seed:7000", "c:3"});
  BOOST_TEST(registry->admit(0, 0, "10.0.0.1:6379").empty());
  // A cluster node's shards each have a link of their own.
  BOOST_TEST(registry->admit(1, 0, "10.0.0.2:7000").empty());
  BOOST_TEST(registry->admit(1, 1, "10.0.0.3:7001").empty());
  // The same server again on a later link of the same node is fine (a reconnect).
  BOOST_TEST(registry->admit(1, 1, "10.0.0.3:7001").empty());
  // Node 2 reaches the server behind the cluster's second shard.
  const auto why = peer_registry::check_for(registry, 2, 0)("10.0.0.3:7001");
  BOOST_TEST(
      why.find("cluster-seed:7000 and c:3 reach one server (10.0.0.3:7001)") != std::string::npos,
      why);
  BOOST_TEST(registry->refusal() == why);
  BOOST_TEST(registry->admit(2, 0, "").empty());  // unknown peers are admitted
}

BOOST_AUTO_TEST_SUITE_END()

// A lock's release, as encode_release writes it for each kind of node: the release script's
// EVALSHA with its key, token and announcement channel; a cluster node's on its shard's channel,
// with the scope that makes the script announce with SPUBLISH.
BOOST_AUTO_TEST_SUITE(release_bytes)

BOOST_AUTO_TEST_CASE(a_lock_release_is_the_release_script_with_its_channel) {
  boost::asio::io_context io;
  const std::string_view token = "0123456789abcdef0123456789abcdef01234567";
  const auto held = redlock::detail::hold_keys::lock_key("orders:42");
  const auto& sha = redlock::detail::release_script().sha1();
  std::string plain;
  resp::encode_command(plain, {"EVALSHA", sha, "1", "orders:42", token, "released"});
  const auto slot = redlock::detail::hash_slot("orders:42");
  std::string sharded;
  resp::encode_command(sharded, {"EVALSHA", sha, "1", "orders:42", token,
                                 redlock::detail::in_slot(slot, "released"), "shard"});

  const auto standalone = redlock::node_config::from_url("redis://127.0.0.1:1");
  const auto cluster = redlock::node_config::from_url("redis+cluster://127.0.0.1:2");
  const auto other = redlock::node_config::from_url("redis://127.0.0.1:3");
  redlock::detail::node_set mixed(io.get_executor(), {standalone, cluster, other}, {}, {});
  const auto bytes = redlock::detail::encode_release(mixed, held, token, "released");
  BOOST_TEST(std::string_view(bytes.plain) == plain);
  BOOST_TEST(std::string_view(bytes.for_cluster) == sharded);
  BOOST_REQUIRE(bytes.slot.has_value());
  BOOST_TEST(*bytes.slot == slot);

  // A channel longer than the room the shard channel is built in: the same bytes.
  const std::string long_channel(300, 'c');
  std::string long_sharded;
  resp::encode_command(long_sharded, {"EVALSHA", sha, "1", "orders:42", token,
                                      redlock::detail::in_slot(slot, long_channel), "shard"});
  const auto long_bytes = redlock::detail::encode_release(mixed, held, token, long_channel);
  BOOST_TEST(std::string_view(long_bytes.for_cluster) == long_sharded);

  // A lease that hashed its key already hands its slot over: the same bytes, routed by it.
  auto known = held;
  known.slot = slot;
  const auto known_bytes = redlock::detail::encode_release(mixed, known, token, "released");
  BOOST_TEST(std::string_view(known_bytes.for_cluster) == sharded);
  BOOST_REQUIRE(known_bytes.slot.has_value());
  BOOST_TEST(*known_bytes.slot == slot);
}

BOOST_AUTO_TEST_SUITE_END()
