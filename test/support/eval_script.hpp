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

// The key's time left in milliseconds (-2: no key; -1: no expiry).
inline long long pttl(sync_client& c, const std::string& key) {
  return c.command({"PTTL", key}).integer;
}

// A script's grant: the +OK that SET ... NX gives, which the lock scripts return when they take.
inline bool granted(const resp::value& reply) {
  return reply.kind == resp::type::simple_string && reply.text == "OK";
}

}  // namespace redlock::test

#endif
