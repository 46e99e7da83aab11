// The simulation's model server against a real redis-server: random sequences of the commands the
// library and its scripts send, and of every library script with random keys and arguments, run
// on both; every reply must match. Times are the only thing allowed to differ (each server reads
// its own clock): integers of 1000 and more, and numbers of 1000 and more in strings (a sorted
// set's deadline scores, a semaphore's list of PTTLs), match within a tolerance, and TIME's
// contents are not compared. Key expiry is kept out of the tolerance: a key's TTL is either long (2
// s or more: alive in both) or a few milliseconds followed by a pause (gone in both). The first
// divergence fails the case with the whole sequence up to it.

#include "integration/prelude.hpp"
#include "lock/scripts.hpp"
#include "resp/value.hpp"
#include "sim/model/server.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_fixture_helpers.hpp"
#include "support/redis_fleet.hpp"
#include "support/redis_sentinel.hpp"
#include "support/sync_client.hpp"

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using redlock::test::redis_server;
namespace resp = redlock::resp;
namespace sim = redlock::sim;

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The tolerance rules of the file's comment.
bool same_reply(const resp::value& real, const resp::value& model, bool is_time) {
  if (real.kind != model.kind) return false;
  if (real.is_error()) {
    if (real.error_code_word() != model.error_code_word()) return false;
    // A script's error carries the script's name and line, whose wording differs: the code word
    // decides. Other errors are compared whole.
    const bool from_script = real.text.find("script:") != std::string::npos;
    return from_script || real.text == model.text;
  }
  if (real.kind == resp::type::integer) {
    if (real.integer == model.integer) return true;
    return std::llabs(real.integer) >= 1000 && (real.integer > 0) == (model.integer > 0) &&
           std::llabs(real.integer - model.integer) <= 250;
  }
  if (real.is_string()) {
    if (real.text == model.text) return true;
    // Numbers in text (a deadline score, a semaphore's list of PTTLs "99998,-2"), item by item.
    const auto real_items = redlock::test::split(real.text, ',');
    const auto model_items = redlock::test::split(model.text, ',');
    if (real_items.size() != model_items.size()) return false;
    for (std::size_t i = 0; i < real_items.size(); ++i) {
      const std::string a_text(real_items[i]);
      const std::string b_text(model_items[i]);
      if (a_text == b_text) continue;
      char* end_a = nullptr;
      char* end_b = nullptr;
      const double a = std::strtod(a_text.c_str(), &end_a);
      const double b = std::strtod(b_text.c_str(), &end_b);
      if (*end_a != '\0' || *end_b != '\0' || std::abs(a) < 1000 || std::abs(a - b) > 250) {
        return false;
      }
    }
    return true;
  }
  if (real.is_aggregate()) {
    if (real.elements.size() != model.elements.size()) return false;
    if (is_time) return true;
    for (std::size_t i = 0; i < real.elements.size(); ++i) {
      if (!same_reply(real.elements[i], model.elements[i], false)) return false;
    }
    return true;
  }
  return true;
}

// Random commands over a few keys of each shape the scripts use.
class sequence_maker {
 public:
  explicit sequence_maker(std::uint64_t seed) : random_(seed) {}

  std::vector<std::string> next() {
    switch (pick(14)) {
      case 0:
        return set_command();
      case 1:
        return {"GET", key()};
      case 2:
        return {"DEL", key(), key()};
      case 3:
        return {"EXISTS", key(), key()};
      case 4:
        return {"INCR", key()};
      case 5:
        return {pick(2) ? "PEXPIRE" : "PEXPIREAT", key(), ttl()};
      case 6:
        return {"PTTL", key()};
      case 7:
        return zadd_command();
      case 8:
        return {"ZREM", key(), member(), member()};
      case 9:
        return {"ZSCORE", key(), member()};
      case 10:
        return {"ZRANGE", key(), index(), index(), "WITHSCORES"};
      case 11:
        return {pick(2) ? "ZCOUNT" : "ZREMRANGEBYSCORE", key(), bound(), bound()};
      case 12:
        return {"TIME"};
      default:
        return script_call();
    }
  }

  // Whether the last command set a TTL of a few milliseconds, after which both wait.
  bool wants_pause() const noexcept { return short_ttl_; }

 private:
  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(random_);
  }

  std::string key() {
    static const char* keys[] = {"k0",       "k1",        "k2",       "{w}:write", "{w}:readers",
                                 "{w}:mark", "{w}:fence", "s:slot:0", "s:slot:1",  "s:permits"};
    return keys[pick(std::size(keys))];
  }
  std::string value() {
    static const char* values[] = {"tokA", "tokB", "1", "0", "41", "-3", "x y", "007"};
    return values[pick(std::size(values))];
  }
  std::string member() { return value(); }
  std::string index() {
    static const char* indexes[] = {"0", "1", "-1", "-2", "5", "x"};
    return indexes[pick(std::size(indexes))];
  }
  std::string bound() {
    static const char* bounds[] = {"-inf", "+inf", "0", "(0", "1.5", "(3", "10", "nope"};
    return bounds[pick(std::size(bounds))];
  }
  // A TTL that is either long or a few milliseconds (see the file's comment), or not a number.
  std::string ttl() {
    switch (pick(6)) {
      case 0:
        short_ttl_ = true;
        return std::to_string(1 + pick(3));
      case 1:
        return "0";
      case 2:
        return "abc";
      default:
        return std::to_string(2000 + pick(100000));
    }
  }

  std::vector<std::string> set_command() {
    std::vector<std::string> c{"SET", key(), value()};
    if (pick(2)) c.push_back(pick(2) ? "NX" : "XX");
    if (pick(3)) {
      c.push_back("PX");
      c.push_back(ttl());
    }
    if (pick(6) == 0) c.push_back("GET");
    return c;
  }

  std::vector<std::string> zadd_command() {
    std::vector<std::string> c{"ZADD", key()};
    static const char* flags[] = {"NX", "XX", "GT", "LT", "CH", "INCR"};
    for (std::size_t n = pick(3); n > 0; --n)
      c.push_back(flags[pick(std::size(flags))]);
    for (std::size_t n = 1 + pick(2); n > 0; --n) {
      static const char* scores[] = {"1", "2.5", "-1", "1e3", "inf", "x"};
      c.push_back(scores[pick(std::size(scores))]);
      c.push_back(member());
    }
    return c;
  }

  // One of the library's scripts, by EVALSHA (or EVAL) with random keys and arguments: mostly the
  // shapes the library sends, sometimes too few or odd ones.
  std::vector<std::string> script_call() {
    using namespace redlock::detail;
    const script* scripts[] = {
        &release_script(),         &extend_script(),           &acquire_script(),
        &fenced_acquire_script(),  &fence_write_back_script(), &semaphore_acquire_script(),
        &rw_read_acquire_script(), &rw_write_acquire_script(), &rw_read_extend_script(),
        &rw_read_release_script(), &rw_write_release_script(), &multi_acquire_script(),
        &multi_extend_script(),    &multi_release_script(),    &batch_extend_script()};
    const script& s = *scripts[pick(std::size(scripts))];
    std::vector<std::string> keys;
    std::vector<std::string> args;
    if (&s == &semaphore_acquire_script()) {
      keys = {"s:slot:0", "s:slot:1", "s:permits", "s:fence"};
      args = {std::to_string(1 + pick(2)), value(), ttl(), pick(4) ? "2" : "3",
              pick(2) ? "1" : "0"};
    } else if (&s == &rw_read_acquire_script() || &s == &rw_write_acquire_script()) {
      keys = {"{w}:write", "{w}:readers", "{w}:mark", "{w}:fence"};
      args = {value(), ttl(), pick(2) ? "1" : "0", pick(2) ? "markA" : "markB"};
    } else if (&s == &rw_read_extend_script() || &s == &rw_read_release_script()) {
      keys = {"{w}:readers"};
      args = {value(), ttl(), pick(2) ? "chan" : "", "", "msg"};
    } else if (&s == &fence_write_back_script()) {
      keys = {pick(2) ? "{w}:readers" : key(), "{w}:fence"};
      args = {value(), std::to_string(pick(5)), pick(2) ? "member" : ""};
    } else if (&s == &rw_write_release_script()) {
      keys = {"{w}:write", "{w}:mark"};
      args = {value(), "chan", "", "msg", pick(2) ? "markA" : ""};
    } else if (&s == &batch_extend_script()) {
      for (std::size_t n = 1 + pick(3); n > 0; --n) {
        keys.push_back(key());
        args.push_back(value());
        args.push_back(ttl());
      }
    } else {
      for (std::size_t n = 1 + pick(3); n > 0; --n)
        keys.push_back(key());
      args = {value(), ttl(), pick(2) ? "1" : "0"};
    }
    if (pick(8) == 0 && !args.empty()) args.pop_back();
    std::vector<std::string> c;
    if (pick(5) == 0) {
      c = {"EVAL", s.source()};
    } else {
      c = {"EVALSHA", s.sha1()};
    }
    c.push_back(std::to_string(keys.size()));
    c.insert(c.end(), keys.begin(), keys.end());
    c.insert(c.end(), args.begin(), args.end());
    return c;
  }

 public:
  void clear_pause() noexcept { short_ttl_ = false; }

 private:
  std::mt19937_64 random_;
  bool short_ttl_ = false;
};

std::string show(const std::vector<std::string>& command) {
  std::string out;
  for (const auto& word : command) {
    out += ' ';
    if (word.size() <= 40) {
      out += word;
    } else {
      out.append(word, 0, 37);
      out += "...";
    }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(model_conformance)

BOOST_AUTO_TEST_CASE(the_model_answers_every_command_and_script_as_redis_does) {
  redis_server server;
  sync_client real(server.port());
  constexpr std::uint64_t sequences = 40;
  constexpr std::size_t commands_each = 150;
  std::size_t compared = 0;
  for (std::uint64_t seed = 1; seed <= sequences; ++seed) {
    BOOST_TEST_REQUIRE(real.command({"FLUSHALL"}).text == "OK");
    BOOST_TEST_REQUIRE(real.command({"SCRIPT", "FLUSH"}).text == "OK");
    sim::model_server model("model");
    sequence_maker maker(seed);
    std::vector<std::string> transcript;
    // Both caches start with two of the library's scripts, as if a handshake had loaded them; an
    // EVALSHA of any other is NOSCRIPT until an EVAL of it.
    for (const auto* s : {&redlock::detail::release_script(), &redlock::detail::extend_script()}) {
      real.command({"SCRIPT", "LOAD", s->source()});
      model.execute(nullptr, std::vector<std::string>{"SCRIPT", "LOAD", s->source()}, wall_us());
    }
    for (std::size_t i = 0; i < commands_each; ++i) {
      auto command = maker.next();
      std::vector<std::string_view> words(command.begin(), command.end());
      const resp::value from_redis = real.command(words);
      const resp::value from_model = model.execute(nullptr, command, wall_us());
      transcript.push_back(fmt::format("{}\n      redis: {}\n      model: {}", show(command),
                                       resp::to_debug_string(from_redis),
                                       resp::to_debug_string(from_model)));
      if (!same_reply(from_redis, from_model, command[0] == "TIME")) {
        std::string all;
        for (const auto& line : transcript)
          all += "\n  " + line;
        BOOST_FAIL(fmt::format("sequence {} diverged at command {}:{}", seed, i + 1, all));
      }
      ++compared;
      if (maker.wants_pause()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        maker.clear_pause();
      }
    }
  }
  BOOST_TEST_MESSAGE(fmt::format("{} replies compared", compared));
}

// The sentinel-shaped nodes of the simulation: a replica refuses every write, directly or from a
// script, as a real one does; ROLE and HELLO say what the server is; a sentinel names its master
// and describes it as a real sentinel does (the fields the library reads).
BOOST_AUTO_TEST_CASE(a_replica_and_a_sentinel_answer_as_the_model_says) {
  redlock::test::redis_sentinel_options options;
  options.sentinels = 1;
  options.quorum = 1;
  redlock::test::redis_sentinel group(options);
  const std::uint16_t master_port = group.master_port();
  sync_client replica(group.port(group.replicas().at(0)));
  sim::model_server model("replica");
  model.become_replica_of("127.0.0.1", master_port);
  const auto compare = [&](const std::vector<std::string>& command, const resp::value& real,
                           const resp::value& modelled, bool is_time = false) {
    BOOST_TEST_INFO(fmt::format("command{}\n  redis: {}\n  model: {}", show(command),
                                resp::to_debug_string(real), resp::to_debug_string(modelled)));
    BOOST_TEST(same_reply(real, modelled, is_time));
  };
  for (const auto* s : {&redlock::detail::release_script(), &redlock::detail::extend_script()}) {
    replica.command({"SCRIPT", "LOAD", s->source()});
    model.execute(nullptr, std::vector<std::string>{"SCRIPT", "LOAD", s->source()}, wall_us());
  }
  sequence_maker maker(7);
  std::size_t refused = 0;
  for (int i = 0; i < 300; ++i) {
    auto command = maker.next();
    std::vector<std::string_view> words(command.begin(), command.end());
    const resp::value real = replica.command(words);
    refused += real.is_error() && real.error_code_word() == "READONLY";
    compare(command, real, model.execute(nullptr, command, wall_us()), command[0] == "TIME");
    maker.clear_pause();
  }
  BOOST_TEST(refused > 50);  // writes, and scripts that write, were among them
  // ROLE: "slave", the master's address, the link's state (the offset is the replica's own).
  const std::vector<std::string> role{"ROLE"};
  const resp::value real_role = replica.command({"ROLE"});
  const resp::value model_role = model.execute(nullptr, role, wall_us());
  BOOST_TEST_REQUIRE(real_role.elements.size() == model_role.elements.size());
  for (std::size_t i = 0; i < 4; ++i)
    compare(role, real_role.elements[i], model_role.elements[i]);

  sync_client sentinel(group.sentinel_port(0));
  sim::model_server model_sentinel("sentinel", sim::server_role::sentinel);
  model_sentinel.monitor(options.master_name, "127.0.0.1", master_port, wall_us());
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options.master_name},
        std::vector<std::string>{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "nobody"},
        std::vector<std::string>{"SENTINEL", "MASTER", "nobody"}}) {
    std::vector<std::string_view> words(command.begin(), command.end());
    compare(command, sentinel.command(words), model_sentinel.execute(nullptr, command, wall_us()));
  }
  // SENTINEL MASTER: the fields the library reads, among the many a real sentinel gives.
  const std::vector<std::string> describe{"SENTINEL", "MASTER", options.master_name};
  std::vector<std::string_view> words(describe.begin(), describe.end());
  const resp::value real_record = sentinel.command(words);
  const resp::value model_record = model_sentinel.execute(nullptr, describe, wall_us());
  const auto field = [](const resp::value& record, std::string_view name) -> std::string {
    for (std::size_t i = 0; i + 1 < record.elements.size(); i += 2) {
      if (record.elements[i].text == name) return record.elements[i + 1].text;
    }
    return "(none)";
  };
  for (const std::string_view name : {"name", "ip", "port", "config-epoch"})
    BOOST_TEST(field(real_record, name) == field(model_record, name), name);
  BOOST_TEST(field(model_record, "role-reported-time") != "(none)");
  BOOST_TEST(field(real_record, "role-reported-time") != "(none)");
  // HELLO's mode tells a sentinel from a data node.
  const std::vector<std::string> hello{"HELLO", "3"};
  const auto mode = [&](const resp::value& reply) { return field(reply, "mode"); };
  BOOST_TEST(mode(sentinel.command({"HELLO", "3"})) ==
             mode(model_sentinel.execute(nullptr, hello, wall_us())));
  BOOST_TEST(mode(replica.command({"HELLO", "3"})) ==
             mode(model.execute(nullptr, hello, wall_us())));
}

// The cluster-shaped nodes of the simulation: a master of a cluster redirects a key of another
// shard's slot (MOVED, with the slot and the owner's address) and refuses keys of several slots
// (CROSSSLOT) as a real one does, runs the rest as a standalone server, and describes the shards
// in CLUSTER SHARDS as the library reads them.
BOOST_AUTO_TEST_CASE(a_cluster_master_redirects_as_the_model_says) {
  redlock::test::redis_cluster cluster(2, 0);
  auto map = std::make_shared<sim::cluster_map>();
  for (std::size_t shard = 0; shard < 2; ++shard) {
    const auto first = static_cast<std::uint16_t>(shard * 8192);
    BOOST_TEST_REQUIRE(cluster.master_of_slot(first) == cluster.master(shard));
    BOOST_TEST_REQUIRE(cluster.master_of_slot(first + 8191u) == cluster.master(shard));
    map->shards.push_back({"127.0.0.1",
                           cluster.master_port(shard),
                           std::string(40, static_cast<char>('a' + shard)),
                           {{first, static_cast<std::uint16_t>(first + 8191)}}});
  }
  sync_client real(cluster.master_port(0));
  sim::model_server model("shard0");
  model.join_cluster(map, "127.0.0.1", cluster.master_port(0));
  for (const auto* s : {&redlock::detail::release_script(), &redlock::detail::extend_script()}) {
    real.command({"SCRIPT", "LOAD", s->source()});
    model.execute(nullptr, std::vector<std::string>{"SCRIPT", "LOAD", s->source()}, wall_us());
  }
  sequence_maker maker(11);
  std::size_t moved = 0;
  std::size_t cross_slot = 0;
  for (int i = 0; i < 300; ++i) {
    auto command = maker.next();
    std::vector<std::string_view> words(command.begin(), command.end());
    const resp::value from_redis = real.command(words);
    const resp::value from_model = model.execute(nullptr, command, wall_us());
    moved += from_redis.is_error() && from_redis.error_code_word() == "MOVED";
    cross_slot += from_redis.is_error() && from_redis.error_code_word() == "CROSSSLOT";
    BOOST_TEST_INFO(fmt::format("command{}\n  redis: {}\n  model: {}", show(command),
                                resp::to_debug_string(from_redis),
                                resp::to_debug_string(from_model)));
    BOOST_TEST(same_reply(from_redis, from_model, command[0] == "TIME"));
    if (maker.wants_pause()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      maker.clear_pause();
    }
  }
  BOOST_TEST(moved > 20);
  BOOST_TEST(cross_slot > 0);

  // CLUSTER SHARDS: each shard's slots and its master's port, whatever their order.
  const auto shards_of = [](const resp::value& reply) {
    std::set<std::pair<std::string, std::string>> out;
    for (const auto& shard : reply.elements) {
      std::string slots;
      std::string port;
      for (std::size_t i = 0; i + 1 < shard.elements.size(); i += 2) {
        const auto& value = shard.elements[i + 1];
        if (shard.elements[i].text == "slots") {
          for (const auto& bound : value.elements)
            slots += std::to_string(bound.integer) + " ";
        }
        if (shard.elements[i].text != "nodes") continue;
        for (const auto& node : value.elements) {
          for (std::size_t j = 0; j + 1 < node.elements.size(); j += 2) {
            if (node.elements[j].text == "port")
              port = std::to_string(node.elements[j + 1].integer);
          }
        }
      }
      out.emplace(slots, port);
    }
    return out;
  };
  const std::vector<std::string> shards_command{"CLUSTER", "SHARDS"};
  BOOST_TEST(shards_of(real.command({"CLUSTER", "SHARDS"})) ==
             shards_of(model.execute(nullptr, shards_command, wall_us())));
  const std::vector<std::string> hello{"HELLO", "3"};
  const auto mode = [](const resp::value& reply) {
    for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2) {
      if (reply.elements[i].text == "mode") return reply.elements[i + 1].text;
    }
    return std::string("(none)");
  };
  BOOST_TEST(mode(real.command({"HELLO", "3"})) == mode(model.execute(nullptr, hello, wall_us())));
}

BOOST_AUTO_TEST_SUITE_END()
