#ifndef REDLOCK_TEST_UNIT_PARSE_REPLY_HPP
#define REDLOCK_TEST_UNIT_PARSE_REPLY_HPP

// One reply read from its RESP bytes, as the node would receive it; the test stops if the bytes
// are not one whole, valid reply.

#include "resp/parser.hpp"
#include "resp/value.hpp"

#include <boost/system/error_code.hpp>
#include <boost/test/unit_test.hpp>

#include <string_view>

namespace redlock::test {

inline resp::value parse_reply(std::string_view bytes) {
  resp::parser parser;
  parser.feed(bytes);
  boost::system::error_code ec;
  auto value = parser.next(ec);
  BOOST_TEST_REQUIRE(!ec);
  BOOST_TEST_REQUIRE(value.has_value());
  return *value;
}

}  // namespace redlock::test

#endif
