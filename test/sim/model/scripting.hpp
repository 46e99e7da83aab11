#ifndef REDLOCK_TEST_SIM_MODEL_SCRIPTING_HPP
#define REDLOCK_TEST_SIM_MODEL_SCRIPTING_HPP

// Lua scripting of a model Redis node: EVAL, EVALSHA and SCRIPT in an embedded Lua 5.1 (the
// version Redis 7 embeds), with redis.call / redis.pcall running the model's data commands. The
// conversions between Lua values and replies, the script cache, NOSCRIPT, the frozen time of a
// script and the protected globals are Redis 7.0's, so that the library's scripts (the very
// sources it sends) behave here as on a server.

#include "resp/value.hpp"
#include "sim/model/commands.hpp"
#include "sim/model/keyspace.hpp"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

struct lua_State;

namespace redlock::sim {

class script_engine {
 public:
  script_engine();
  ~script_engine();
  script_engine(const script_engine&) = delete;
  script_engine& operator=(const script_engine&) = delete;

  // Whether `name` (any case) is EVAL, EVALSHA or SCRIPT.
  static bool is_script_command(std::string_view name);

  // Runs EVAL, EVALSHA or SCRIPT LOAD | EXISTS | FLUSH. A script's calls run on `keys` with the
  // time of `at` (frozen for the script) and publish through it.
  resp::value run(std::span<const std::string> args, keyspace& keys, const command_context& at);

  // SCRIPT FLUSH: every cached script forgotten (an EVALSHA is then answered NOSCRIPT).
  void flush();

  // The most Lua instructions one script may run before it is stopped with an error (a changed
  // script that loops forever must not hang a simulation).
  static constexpr std::uint64_t instruction_budget = 50'000'000;

 private:
  resp::value eval(const std::string& sha, std::span<const std::string> args, keyspace& keys,
                   const command_context& at);
  // Compiles `source` into the cache under `sha`; an error reply when it does not compile.
  std::optional<resp::value> compile(const std::string& sha, std::string_view source);

  lua_State* lua_ = nullptr;
  // SHA-1 → the registry reference of the compiled chunk.
  std::map<std::string, int, std::less<>> cache_;
};

}  // namespace redlock::sim

#endif
