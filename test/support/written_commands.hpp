#ifndef REDLOCK_TEST_SUPPORT_WRITTEN_COMMANDS_HPP
#define REDLOCK_TEST_SUPPORT_WRITTEN_COMMANDS_HPP

// Reads back what the library would write to a node, for tests that compare it with what they
// expect: RESP-encoded commands as one "WORD arg ..." line each.

#include "resp/parser.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <utility>
#include <vector>

namespace redlock::test {

using commands = std::vector<std::string>;

// The commands in `bytes`, which must hold whole commands and nothing else.
inline commands decode_commands(const std::string& bytes) {
  commands out;
  resp::parser parser;
  BOOST_REQUIRE(parser.feed(bytes));
  boost::system::error_code ec;
  while (auto command = parser.next(ec)) {
    std::string line;
    for (const auto& word : command->elements) {
      if (!line.empty()) line += ' ';
      line += word.text;
    }
    out.push_back(std::move(line));
  }
  BOOST_REQUIRE(!ec);
  BOOST_REQUIRE(parser.buffered() == 0u);
  return out;
}

}  // namespace redlock::test

#endif
