#ifndef REDLOCK_TEST_SUPPORT_EVAL_SCRIPT_HPP
#define REDLOCK_TEST_SUPPORT_EVAL_SCRIPT_HPP

// One of the library's Lua scripts run on a server by EVAL, as the scripts' own tests call them.

#include "resp/script.hpp"
#include "resp/value.hpp"
#include "support/sync_client.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace redlock::test {

inline resp::value eval_script(sync_client& c, const detail::script& lua,
                               const std::vector<std::string>& keys,
                               const std::vector<std::string>& args) {
  std::vector<std::string> command = {"EVAL", lua.source(), std::to_string(keys.size())};
  command.insert(command.end(), keys.begin(), keys.end());
  command.insert(command.end(), args.begin(), args.end());
  const std::vector<std::string_view> words(command.begin(), command.end());
  return c.command(words);
}

}  // namespace redlock::test

#endif
