// EVALSHA payloads and their EVAL fallback, byte for byte.

#include "net/script.hpp"
#include "net/sha1.hpp"
#include "resp/encoder.hpp"

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

BOOST_AUTO_TEST_SUITE_END()
