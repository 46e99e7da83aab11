#ifndef REDLOCK_TEST_SUPPORT_ENCODED_COMMAND_HPP
#define REDLOCK_TEST_SUPPORT_ENCODED_COMMAND_HPP

#include "resp/encoder.hpp"

#include <string>
#include <string_view>

namespace redlock::test {

// A command as the connection sends it (RESP). Call sites build it in its own call rather than as
// a braced list inside a co_await expression: g++ 12 cannot keep an initializer_list's array
// across a suspension.
template <class... Args>
std::string command(const Args&... args) {
  const std::string_view parts[] = {std::string_view(args)...};
  std::string payload;
  resp::encode_command(payload, parts);
  return payload;
}

}  // namespace redlock::test

#endif
