// EVALSHA payloads and their EVAL fallback, byte for byte.

#include "lock/key_names.hpp"
#include "lock/scripts.hpp"
#include "resp/encoder.hpp"
#include "resp/script.hpp"

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

// Release announcements carry a slot key; the client routes them to the semaphore's queue by the
// slots' common prefix, and nothing else is taken for a slot key.
BOOST_AUTO_TEST_CASE(a_slot_key_names_its_semaphores_queue_and_slot) {
  BOOST_TEST(rd::permit_queue_key("jobs") == "{jobs}:slot:");
  BOOST_TEST(rd::permit_queue_key("{t}:jobs") == "{t}:jobs:slot:");
  for (const std::string name : {"jobs", "{t}:jobs", "odd}name", "a:slot:"}) {
    for (const std::size_t slot : {0u, 7u, 1023u}) {
      const std::string key = rd::semaphore_slot_key(name, slot);
      const auto split = rd::split_slot_key(key);  // views into key
      BOOST_TEST_REQUIRE(split.has_value(), name << " " << slot);
      BOOST_TEST(split->first == rd::permit_queue_key(name));
      BOOST_TEST(split->second == slot);
      BOOST_TEST(rd::slot_of_key(key, rd::permit_queue_key(name)).value_or(9999) == slot);
    }
  }
  for (const std::string_view other : {"jobs", "{jobs}:slot:", "{jobs}:slot:x", "{jobs}:slotx:1",
                                       "{jobs}:slot:1:fence", "1", "", "{jobs}:slot:12345678901"}) {
    BOOST_TEST(!rd::split_slot_key(other).has_value(), other);
  }
}

BOOST_AUTO_TEST_SUITE_END()
