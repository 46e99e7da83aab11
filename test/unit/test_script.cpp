// EVALSHA payloads and their EVAL fallback, byte for byte.

#include "net/script.hpp"
#include "net/sha1.hpp"
#include "resp/encoder.hpp"
#include "scripts.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>

namespace {

namespace rd = redlock::detail;

std::string encoded(std::initializer_list<std::string_view> args) {
  std::string out;
  redlock::resp::encode_command(out, args);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(script)

BOOST_AUTO_TEST_CASE(evalsha_and_eval_payloads) {
  const rd::script lua("return redis.call('GET', KEYS[1])");
  BOOST_TEST(lua.sha1() == rd::sha1_hex(lua.source()));

  const std::string_view keys[] = {"lock:a"};
  const std::string_view args[] = {"token\r\nwith CRLF", "10000"};
  const std::string evalsha = rd::encode_evalsha(lua, keys, args);
  BOOST_TEST(evalsha ==
             encoded({"EVALSHA", lua.sha1(), "1", "lock:a", "token\r\nwith CRLF", "10000"}));
  BOOST_TEST(rd::evalsha_to_eval(lua, evalsha) ==
             encoded({"EVAL", lua.source(), "1", "lock:a", "token\r\nwith CRLF", "10000"}));
}

BOOST_AUTO_TEST_CASE(no_keys_no_args) {
  const rd::script lua("return 1");
  const std::string evalsha = rd::encode_evalsha(lua, {}, {});
  BOOST_TEST(evalsha == encoded({"EVALSHA", lua.sha1(), "0"}));
  BOOST_TEST(rd::evalsha_to_eval(lua, evalsha) == encoded({"EVAL", "return 1", "0"}));
}

// The fencing counter lives in the lock key's hash slot: the slot is hashed from the hash tag (the
// text between the first '{' and the next '}', if not empty), else from the whole key.
BOOST_AUTO_TEST_CASE(the_fencing_counter_shares_the_lock_keys_hash_slot) {
  BOOST_TEST(rd::fencing_counter_key("orders") == "{orders}:fence");
  BOOST_TEST(rd::fencing_counter_key("{tenant-7}:orders") == "{tenant-7}:orders:fence");
  BOOST_TEST(rd::fencing_counter_key("a{b") == "{a{b}:fence");  // no tag: the whole name is one
  // A '}' outside a tag cannot be kept out of a new tag: the counter gets a key of its own.
  BOOST_TEST(rd::fencing_counter_key("a}b") == "a}b:fence");
  BOOST_TEST(rd::fencing_counter_key("{}x") == "{}x:fence");
}

// Every slot of a semaphore is in one hash slot, and a slot's fencing counter is in it too.
BOOST_AUTO_TEST_CASE(a_semaphores_slots_share_one_hash_slot) {
  BOOST_TEST(rd::semaphore_slot_key("jobs", 0) == "{jobs}:slot:0");
  BOOST_TEST(rd::semaphore_slot_key("jobs", 17) == "{jobs}:slot:17");
  BOOST_TEST(rd::semaphore_slot_key("{t}:jobs", 2) == "{t}:jobs:slot:2");
  BOOST_TEST(rd::fencing_counter_key(rd::semaphore_slot_key("jobs", 3)) == "{jobs}:slot:3:fence");
}

BOOST_AUTO_TEST_SUITE_END()
