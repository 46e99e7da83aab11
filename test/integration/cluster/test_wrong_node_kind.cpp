// A server of another kind than its URL names, against real servers: a sentinel given as redis://
// or redis+cluster://, a plain server given as redis+sentinel:// or redis+cluster://, a cluster
// node given as redis+sentinel://, a cluster node given as redis:// asked for a key of another
// slot, and sentinels asked for a master name they do not monitor. Each ends the acquire at once,
// well before its wait, with error::wrong_node_kind (a node_failure), and says which URL to use;
// no message quotes a script.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/acquire_once.hpp"
#include "support/printing.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_sentinel.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

namespace {

using redlock::test::acquire_once;
using redlock::test::check_fails_at_once;
using redlock::test::contains;
using redlock::test::long_wait;
using redlock::test::redis_cluster;
using redlock::test::redis_sentinel;
using redlock::test::redis_sentinel_options;

redlock::node_config node(const std::string& url) {
  return redlock::node_config::from_url(url);
}

// Ended at once as misconfigured, naming the server and the URL to use, quoting no script.
void check_misconfigured(const redlock::test::acquire_outcome_summary& result,
                         const std::string& server, const std::string& use) {
  check_fails_at_once(result, error::wrong_node_kind, server, "use " + use);
  BOOST_TEST(!contains(result.diagnostics, "SCRIPT"), result.diagnostics);
  BOOST_TEST(!contains(result.diagnostics, "redis.call"), result.diagnostics);
}

redis_sentinel_options one_sentinel() {
  redis_sentinel_options options;
  options.sentinels = 1;
  options.quorum = 1;
  return options;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(wrong_node_kind)

BOOST_AUTO_TEST_CASE(a_sentinel_given_as_a_server_or_a_cluster_is_refused_naming_redis_sentinel) {
  redis_sentinel group(one_sentinel());
  const std::string sentinel = "127.0.0.1:" + std::to_string(group.sentinel_port(0));
  const std::string use = "redis+sentinel://" + sentinel + "?master=NAME";
  BOOST_TEST_CONTEXT("redis://") {
    check_misconfigured(acquire_once({node("redis://" + sentinel)}, long_wait()), sentinel, use);
  }
  BOOST_TEST_CONTEXT("redis+cluster://") {
    check_misconfigured(acquire_once({node("redis+cluster://" + sentinel)}, long_wait()), sentinel,
                        use);
  }
}

// The master name is what the URL says the sentinels monitor: one they do not know is as lasting
// as a wrong scheme, and the message says which name and which sentinels were asked.
BOOST_AUTO_TEST_CASE(a_master_name_the_sentinels_do_not_monitor_is_a_lasting_misconfiguration) {
  redis_sentinel group;
  auto config = node(group.sentinel_url());
  config.sentinel_master = "no-such-master";
  const auto result = acquire_once({config}, long_wait());
  BOOST_TEST(result.ec == error::wrong_node_kind, result.ec.message());
  BOOST_TEST((result.ec == redlock::condition::node_failure));
  BOOST_TEST(result.took_ms < 5000);
  BOOST_TEST(contains(result.diagnostics, "\"no-such-master\""), result.diagnostics);
  for (const auto port : group.sentinel_ports()) {
    BOOST_TEST(contains(result.diagnostics, "127.0.0.1:" + std::to_string(port) + " knows no "),
               result.diagnostics);
  }
}

BOOST_AUTO_TEST_CASE(a_plain_server_given_as_sentinels_or_a_cluster_is_refused_naming_redis) {
  redis_fleet fleet(1);
  const std::string server = fleet.configs().front().address();
  BOOST_TEST_CONTEXT("redis+sentinel://") {
    check_misconfigured(
        acquire_once({node("redis+sentinel://" + server + "?master=mymaster")}, long_wait()),
        server, "redis://" + server);
  }
  BOOST_TEST_CONTEXT("redis+cluster://") {
    check_misconfigured(acquire_once({node("redis+cluster://" + server)}, long_wait()), server,
                        "redis://" + server);
  }
}

// A cluster node given as redis:// serves the keys of its own slots; a key of another slot
// answers MOVED, which ends the acquire at once instead of failing every round until the wait.
// Given as redis+sentinel://, the node is named as the cluster node it is.
BOOST_AUTO_TEST_CASE(a_cluster_node_given_as_a_server_or_sentinels_is_refused_naming_the_cluster) {
  redis_cluster cluster(3, 0);
  const std::string first = cluster.address(0);
  const std::string use = "redis+cluster://" + first;
  const auto slot_of_shard = [&](std::size_t shard, const std::string& stem) {
    for (int i = 0;; ++i) {
      std::string name = stem + ":" + std::to_string(i);
      if (cluster.shard_of(cluster.master_of_slot(cluster.key_slot(name))) == shard) return name;
    }
  };
  BOOST_TEST_CONTEXT("redis://, a key of its own slot") {
    const auto result = acquire_once({node("redis://" + first)}, long_wait(), false,
                                     slot_of_shard(cluster.shard_of(0), "own"));
    BOOST_TEST(!result.ec, result.ec.message() << ": " << result.diagnostics);
  }
  BOOST_TEST_CONTEXT("redis://, a key of another slot") {
    const auto other = slot_of_shard((cluster.shard_of(0) + 1) % cluster.shards(), "elsewhere");
    const auto result = acquire_once({node("redis://" + first)}, long_wait(), false, other);
    check_misconfigured(result, first, use);
    BOOST_TEST(contains(result.diagnostics, "answered MOVED"), result.diagnostics);
  }
  BOOST_TEST_CONTEXT("redis+sentinel://") {
    check_misconfigured(
        acquire_once({node("redis+sentinel://" + first + "?master=mymaster")}, long_wait()), first,
        use);
  }
}

BOOST_AUTO_TEST_SUITE_END()
