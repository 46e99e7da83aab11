// Routing a key on a Redis Cluster without a server: its hash slot (CRC16, hash tags), the
// topology read from CLUSTER SHARDS / CLUSTER SLOTS as Redis 7 sends them (RESP2 and RESP3), the
// MOVED and ASK redirections, and the passing refusals that fail a vote.

#include "algo/hash_slot.hpp"
#include "lock/key_names.hpp"
#include "nodes/cluster/topology.hpp"
#include "resp/parser.hpp"
#include "unit/parse_reply.hpp"
#include "unit/resp_values.hpp"

#include <boost/crc.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

using redlock::detail::cluster_endpoint;
using redlock::detail::cluster_redirect;
using redlock::detail::cluster_refusal;
using redlock::detail::cluster_topology;
using redlock::detail::crc16_xmodem;
using redlock::detail::hash_slot;
using redlock::detail::hash_tag_part;
using redlock::detail::read_cluster_shards;
using redlock::detail::read_cluster_slots;
using redlock::detail::read_redirect;

namespace {

using redlock::test::reply::error_reply;

// One shard of CLUSTER SHARDS as a Redis 7.0 node of a local three-master cluster sent it, with
// `open` the aggregate header of a name/value list: "*14" in RESP2, "%7" in RESP3.
std::string shard(std::string_view open, std::string_view first, std::string_view last,
                  std::string_view port, std::string_view role = "master",
                  std::string_view endpoint = "127.0.0.1") {
  const std::string pair_open = open == "%7" ? "%2" : "*4";
  return pair_open + "\r\n$5\r\nslots\r\n*2\r\n:" + std::string(first) +
         "\r\n:" + std::string(last) + "\r\n$5\r\nnodes\r\n*1\r\n" + std::string(open) +
         "\r\n$2\r\nid\r\n$40\r\nd1a20685ecd0f9b8957da83fdb616a6a3174ea0e\r\n$4\r\nport\r\n:" +
         std::string(port) + "\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$" +
         std::to_string(endpoint.size()) + "\r\n" + std::string(endpoint) + "\r\n$4\r\nrole\r\n$" +
         std::to_string(role.size()) + "\r\n" + std::string(role) +
         "\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n";
}

std::string three_shards(std::string_view open) {
  return "*3\r\n" + shard(open, "5461", "10922", "17002") + shard(open, "10923", "16383", "17003") +
         shard(open, "0", "5460", "17001");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cluster_hash_slot)

BOOST_AUTO_TEST_CASE(crc16_is_the_xmodem_variant) {
  BOOST_TEST(crc16_xmodem("123456789") == 0x31C3);
  BOOST_TEST(crc16_xmodem("") == 0);
}

BOOST_AUTO_TEST_CASE(crc16_agrees_with_a_bytewise_crc_at_every_length_and_alignment) {
  // The library computes eight bytes at a time; Boost.CRC one at a time. Every length from 0 to
  // 80 covers blocks and tails of each size, and each offset into the buffer a misalignment.
  std::mt19937 random(20261202);
  std::string bytes(96, '\0');
  for (int round = 0; round < 20; ++round) {
    for (auto& c : bytes)
      c = static_cast<char>(random());
    for (std::size_t offset = 0; offset < 8; ++offset) {
      for (std::size_t length = 0; offset + length <= 88; ++length) {
        const std::string_view data(bytes.data() + offset, length);
        boost::crc_optimal<16, 0x1021, 0, 0, false, false> reference;
        reference.process_bytes(data.data(), data.size());
        BOOST_TEST_REQUIRE(crc16_xmodem(data) == reference.checksum(),
                           "length " << length << " at offset " << offset);
      }
    }
  }
  // Each byte value in each position of a block and of the tail.
  for (std::size_t at = 0; at < 12; ++at) {
    for (unsigned value = 0; value < 256; ++value) {
      std::string one(12, 'x');
      one[at] = static_cast<char>(value);
      boost::crc_optimal<16, 0x1021, 0, 0, false, false> reference;
      reference.process_bytes(one.data(), one.size());
      BOOST_TEST_REQUIRE(crc16_xmodem(one) == reference.checksum(),
                         "byte " << value << " at " << at);
    }
  }
}

BOOST_AUTO_TEST_CASE(slots_match_what_redis_computes) {
  // CLUSTER KEYSLOT on a Redis 7.0 server.
  BOOST_TEST(hash_slot("foo") == 12182);
  BOOST_TEST(hash_slot("{user1000}.following") == 3443);
  BOOST_TEST(hash_slot("{user1000}.following") == hash_slot("user1000"));
  BOOST_TEST(hash_slot("foo{}{bar}") == 8363);
  BOOST_TEST(hash_slot("foo{{bar}}zap") == 4015);
  BOOST_TEST(hash_slot("foo{bar}{zap}") == 5061);
}

BOOST_AUTO_TEST_CASE(the_first_non_empty_braces_are_the_hash_tag) {
  BOOST_TEST(hash_tag_part("{orders}:42") == "orders");
  BOOST_TEST(hash_tag_part("a{}b") == "a{}b");
  BOOST_TEST(hash_tag_part("a{{b}}c") == "{b");
  BOOST_TEST(hash_tag_part("no braces") == "no braces");
  BOOST_TEST(hash_tag_part("open{only") == "open{only");
  BOOST_TEST(hash_tag_part("close}first{x}") == "x");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cluster_topology_reading)

// The servers asked first, seeds or sentinels: the address, then each seed once, in order.
BOOST_AUTO_TEST_CASE(the_address_comes_first_and_each_seed_once) {
  redlock::node_config node;
  node.host = "10.0.0.1";
  node.port = 26379;
  node.seeds = {"10.0.0.2:26379", "10.0.0.1:26379", "[::1]:26380", "10.0.0.2:26379", "nonsense"};
  const auto servers = redlock::detail::address_and_seeds(node);
  BOOST_TEST_REQUIRE(servers.size() == 3u);
  BOOST_TEST((servers[0] == cluster_endpoint{"10.0.0.1", 26379}));
  BOOST_TEST((servers[1] == cluster_endpoint{"10.0.0.2", 26379}));
  BOOST_TEST((servers[2] == cluster_endpoint{"::1", 26380}));
}

BOOST_AUTO_TEST_CASE(cluster_shards_in_resp2_and_resp3_give_the_same_masters) {
  for (const std::string_view open : {"*14", "%7"}) {
    const auto read =
        read_cluster_shards(redlock::test::parse_reply(three_shards(open)), "10.0.0.1", false);
    BOOST_TEST_REQUIRE(std::holds_alternative<cluster_topology>(read));
    const auto& topology = std::get<cluster_topology>(read);
    BOOST_TEST(topology.uncovered_slots() == 0u);
    BOOST_TEST(topology.masters().size() == 3u);
    BOOST_TEST_REQUIRE(topology.master_of(0) != nullptr);
    BOOST_TEST(topology.master_of(0)->port == 17001);
    BOOST_TEST(topology.master_of(5460)->port == 17001);
    BOOST_TEST(topology.master_of(5461)->port == 17002);
    BOOST_TEST(topology.master_of(12182)->port == 17003);
    BOOST_TEST(topology.master_of(16383)->host == "127.0.0.1");
  }
}

BOOST_AUTO_TEST_CASE(a_shard_without_a_master_leaves_its_slots_uncovered) {
  const std::string reply = "*2\r\n" + shard("*14", "0", "8191", "17001", "replica") +
                            shard("*14", "8192", "16383", "17002");
  const auto read = read_cluster_shards(redlock::test::parse_reply(reply), "10.0.0.1", false);
  BOOST_TEST_REQUIRE(std::holds_alternative<cluster_topology>(read));
  const auto& topology = std::get<cluster_topology>(read);
  BOOST_TEST(topology.uncovered_slots() == 8192u);
  BOOST_TEST(topology.master_of(100) == nullptr);
  BOOST_TEST(topology.master_of(9000)->port == 17002);
}

BOOST_AUTO_TEST_CASE(an_unknown_endpoint_falls_back_to_the_ip) {
  const std::string reply = "*1\r\n" + shard("*14", "0", "16383", "17001", "master", "?");
  const auto read = read_cluster_shards(redlock::test::parse_reply(reply), "10.0.0.1", false);
  BOOST_TEST_REQUIRE(std::holds_alternative<cluster_topology>(read));
  // "?" falls back to the ip field, which the shard gives.
  BOOST_TEST(std::get<cluster_topology>(read).master_of(7)->host == "127.0.0.1");
}

BOOST_AUTO_TEST_CASE(tls_needs_the_tls_port) {
  const auto read =
      read_cluster_shards(redlock::test::parse_reply(three_shards("*14")), "10.0.0.1", true);
  BOOST_TEST_REQUIRE(std::holds_alternative<std::string>(read));
  BOOST_TEST(std::get<std::string>(read).find("tls-port") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(replies_that_are_no_topology_say_why) {
  const auto error = read_cluster_shards(error_reply("ERR unknown subcommand"), "h", false);
  BOOST_TEST_REQUIRE(std::holds_alternative<std::string>(error));
  BOOST_TEST(std::get<std::string>(error).find("unknown subcommand") != std::string::npos);
  const auto scalar = read_cluster_shards(redlock::test::parse_reply(":1\r\n"), "h", false);
  BOOST_TEST(std::holds_alternative<std::string>(scalar));
  const auto bad_range = read_cluster_shards(
      redlock::test::parse_reply("*1\r\n" + shard("*14", "10", "16384", "17001")), "h", false);
  BOOST_TEST(std::holds_alternative<std::string>(bad_range));
}

BOOST_AUTO_TEST_CASE(cluster_slots_is_read_as_well) {
  // CLUSTER SLOTS of the same cluster, first two ranges; the second master's host is empty.
  const std::string reply =
      "*2\r\n"
      "*3\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:17001\r\n$3\r\nabc\r\n*0\r\n"
      "*3\r\n:5461\r\n:10922\r\n*4\r\n$0\r\n\r\n:17002\r\n$3\r\ndef\r\n*0\r\n";
  const auto read = read_cluster_slots(redlock::test::parse_reply(reply), "10.0.0.1");
  BOOST_TEST_REQUIRE(std::holds_alternative<cluster_topology>(read));
  const auto& topology = std::get<cluster_topology>(read);
  BOOST_TEST(topology.uncovered_slots() == 16384u - 10923u);
  BOOST_TEST((*topology.master_of(3) == cluster_endpoint{"127.0.0.1", 17001}));
  BOOST_TEST((*topology.master_of(6000) == cluster_endpoint{"10.0.0.1", 17002}));
  BOOST_TEST(topology.master_of(12000) == nullptr);
}

BOOST_AUTO_TEST_CASE(a_master_serving_several_ranges_is_one_master) {
  cluster_topology topology;
  topology.add(100, 199, {"a", 1});
  topology.add(0, 99, {"b", 2});
  topology.add(200, 16383, {"a", 1});
  BOOST_TEST(topology.masters().size() == 2u);
  BOOST_TEST(topology.uncovered_slots() == 0u);
  BOOST_TEST(topology.master_of(99)->host == "b");
  BOOST_TEST(topology.master_of(100)->host == "a");
  BOOST_TEST(topology.master_of(16383)->host == "a");
}

// The router fills its slot table from masters_by_slot: it must say what master_of says for every
// slot, gaps, a range added twice and overlapping ranges (a broken server's reply) included.
BOOST_AUTO_TEST_CASE(the_table_of_every_slots_master_agrees_with_master_of) {
  const auto agrees = [](const cluster_topology& topology) {
    const auto owners = topology.masters_by_slot();
    BOOST_TEST_REQUIRE(owners.size() == redlock::detail::cluster_slot_count);
    std::size_t disagreements = 0;
    for (std::size_t slot = 0; slot < owners.size(); ++slot) {
      const auto* master = topology.master_of(static_cast<std::uint16_t>(slot));
      const bool same = master == nullptr ? owners[slot] == cluster_topology::unserved
                                          : owners[slot] != cluster_topology::unserved &&
                                                topology.masters()[owners[slot]] == *master;
      if (!same) ++disagreements;
    }
    return disagreements;
  };
  struct range {
    std::uint16_t first, last;
    const char* host;
  };
  const auto built = [](std::initializer_list<range> ranges) {
    cluster_topology topology;
    for (const auto& r : ranges)
      topology.add(r.first, r.last, {r.host, static_cast<std::uint16_t>(r.host[0])});
    return topology;
  };
  BOOST_TEST(agrees(cluster_topology{}) == 0u);
  const auto gaps = built({{5000, 5999, "a"}, {0, 0, "b"}, {16383, 16383, "c"}, {7000, 9000, "b"}});
  BOOST_TEST(agrees(gaps) == 0u);
  BOOST_TEST(gaps.masters_by_slot()[1] == cluster_topology::unserved);
  BOOST_TEST(gaps.masters()[gaps.masters_by_slot()[5500]].host == "a");
  const auto overlapping =
      built({{0, 8000, "a"}, {100, 200, "b"}, {100, 300, "c"}, {8000, 16383, "d"}});
  BOOST_TEST(agrees(overlapping) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cluster_redirections)

BOOST_AUTO_TEST_CASE(moved_and_ask_name_the_slot_and_its_node) {
  const auto moved = read_redirect(error_reply("MOVED 12182 127.0.0.1:17003"), "h");
  BOOST_TEST_REQUIRE(moved.has_value());
  BOOST_TEST((moved->what == cluster_redirect::kind::moved));
  BOOST_TEST(moved->slot == 12182);
  BOOST_TEST((moved->target == cluster_endpoint{"127.0.0.1", 17003}));

  const auto ask = read_redirect(error_reply("ASK 3999 ::1:6380"), "h");
  BOOST_TEST_REQUIRE(ask.has_value());
  BOOST_TEST((ask->what == cluster_redirect::kind::ask));
  BOOST_TEST((ask->target == cluster_endpoint{"::1", 6380}));

  const auto same_host = read_redirect(error_reply("MOVED 1 :7001"), "10.0.0.9");
  BOOST_TEST_REQUIRE(same_host.has_value());
  BOOST_TEST(same_host->target.host == "10.0.0.9");
}

BOOST_AUTO_TEST_CASE(anything_else_is_no_redirection) {
  for (const char* text :
       {"MOVED", "MOVED 12182", "MOVED x 127.0.0.1:1", "MOVED 16384 h:1", "MOVED 1 h:0",
        "MOVED 1 h:", "MOVED  h:1", "ASKING 1 h:1", "ERR wrong"}) {
    BOOST_TEST(!read_redirect(error_reply(text), "h").has_value(), text);
  }
  redlock::resp::value ok;
  ok.kind = redlock::resp::type::simple_string;
  ok.text = "MOVED 1 h:1";
  BOOST_TEST(!read_redirect(ok, "h").has_value());
}

BOOST_AUTO_TEST_CASE(passing_refusals_are_named) {
  BOOST_TEST(cluster_refusal(error_reply("TRYAGAIN Multiple keys request during rehashing of slot"))
                 .find("TRYAGAIN") != std::string_view::npos);
  BOOST_TEST(cluster_refusal(error_reply("CLUSTERDOWN The cluster is down")).find("CLUSTERDOWN") !=
             std::string_view::npos);
  BOOST_TEST(cluster_refusal(error_reply("LOADING Redis is loading")).find("LOADING") !=
             std::string_view::npos);
  BOOST_TEST(cluster_refusal(error_reply("READONLY You can't write against a read only replica."))
                 .find("replica") != std::string_view::npos);
  BOOST_TEST(cluster_refusal(error_reply("ERR other")).empty());
  BOOST_TEST(cluster_refusal(error_reply("MOVED 1 h:1")).empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(one_slot_per_resource)

// Every key the library makes from a name (fence counter, semaphore slots and record) is in the
// name's slot, except for a name that holds a '}' and no hash tag: such a name is refused on a
// cluster node when it needs more than one key.
BOOST_AUTO_TEST_CASE(derived_keys_share_the_slot_of_the_name) {
  using redlock::detail::fencing_counter_key;
  using redlock::detail::keys_share_hash_slot;
  using redlock::detail::semaphore_slot_key;
  for (const std::string_view name : {"orders:42", "{orders}:42", "a{b}c", "x{", "{", "{{x}}y"}) {
    BOOST_TEST(keys_share_hash_slot(name), name);
    BOOST_TEST(hash_slot(fencing_counter_key(name)) == hash_slot(name), name);
    BOOST_TEST(hash_slot(semaphore_slot_key(name, 7)) == hash_slot(name), name);
  }
  for (const std::string_view name : {"a}b", "}", "{}}", "x}{y", "{}x", "a{}{b}"}) {
    BOOST_TEST(!keys_share_hash_slot(name), name);
  }
  // Why they are refused: their counter lands elsewhere.
  BOOST_TEST(hash_slot(fencing_counter_key("a}b")) != hash_slot("a}b"));
}

// Shard channels of release announcements (in_slot): one short name per slot, the smallest
// integer that hashes there, whatever braces the channel itself holds.
BOOST_AUTO_TEST_CASE(every_slot_has_a_tag_and_in_slot_names_land_in_it) {
  using redlock::detail::cluster_slot_count;
  using redlock::detail::in_slot;
  using redlock::detail::slot_tag;
  for (std::size_t slot = 0; slot < cluster_slot_count; ++slot) {
    const auto s = static_cast<std::uint16_t>(slot);
    BOOST_TEST_REQUIRE(hash_slot(std::to_string(slot_tag(s))) == s, "slot " << slot);
    BOOST_TEST_REQUIRE(in_slot(s, "x") == "{" + std::to_string(slot_tag(s)) + "}x",
                       "slot " << slot);
  }
  // The smallest: no smaller integer hashes to the slot of 0, 1 or "123456789"'s tag.
  for (const std::uint16_t s : {hash_slot("0"), hash_slot("1"), hash_slot("foo")}) {
    for (std::uint32_t n = 0; n < slot_tag(s); ++n)
      BOOST_TEST_REQUIRE(hash_slot(std::to_string(n)) != s, "slot " << s << " n " << n);
  }
  BOOST_TEST(slot_tag(hash_slot("0")) == 0u);
  for (const std::string_view channel : {"redlock:released", "a{b}c", "}{", "{}"}) {
    BOOST_TEST(hash_slot(in_slot(hash_slot("orders:42"), channel)) == hash_slot("orders:42"));
    BOOST_TEST(in_slot(5, channel).ends_with(channel));
  }
}

BOOST_AUTO_TEST_SUITE_END()
