#include "sim/model/scripting.hpp"

#include "resp/script.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
}

// Lua reports errors with longjmp: no C++ object with a destructor may be alive in a frame that
// lua_error (or luaL_error) leaves. Every C function below does its C++ work in an inner scope and
// raises only after that scope has ended.

namespace redlock::sim {

namespace {

// What the running script's redis.call reaches: set for the duration of one script.
struct call_scope {
  keyspace* keys = nullptr;
  const command_context* at = nullptr;
  std::uint64_t instructions_left = 0;
};

call_scope& scope_of(lua_State* lua) {
  return *static_cast<call_scope*>(lua_touserdata(lua, lua_upvalueindex(1)));
}

void push_error_table(lua_State* lua, std::string_view text) {
  lua_newtable(lua);
  lua_pushlstring(lua, text.data(), text.size());
  lua_setfield(lua, -2, "err");
}

// A reply as Redis 7.0 gives it to a script (the RESP2 conversion).
void push_reply(lua_State* lua, const resp::value& reply) {
  switch (reply.kind) {
    case resp::type::integer:
    case resp::type::boolean:
      lua_pushnumber(lua, static_cast<lua_Number>(reply.integer));
      return;
    case resp::type::simple_string:
      lua_newtable(lua);
      lua_pushlstring(lua, reply.text.data(), reply.text.size());
      lua_setfield(lua, -2, "ok");
      return;
    case resp::type::simple_error:
    case resp::type::blob_error:
      push_error_table(lua, reply.text);
      return;
    case resp::type::null:
      lua_pushboolean(lua, 0);
      return;
    case resp::type::array:
    case resp::type::set:
    case resp::type::map:
    case resp::type::push:
      lua_createtable(lua, static_cast<int>(reply.elements.size()), 0);
      for (std::size_t i = 0; i < reply.elements.size(); ++i) {
        push_reply(lua, reply.elements[i]);
        lua_rawseti(lua, -2, static_cast<int>(i + 1));
      }
      return;
    default:
      lua_pushlstring(lua, reply.text.data(), reply.text.size());
      return;
  }
}

// The script's result as Redis 7.0 sends it (luaReplyToRedisReply, RESP2 rules).
resp::value reply_of(lua_State* lua, int index, int depth) {
  switch (lua_type(lua, index)) {
    case LUA_TSTRING: {
      std::size_t n = 0;
      const char* text = lua_tolstring(lua, index, &n);
      return bulk_reply(std::string(text, n));
    }
    case LUA_TBOOLEAN:
      return lua_toboolean(lua, index) ? integer_reply(1) : null_reply();
    case LUA_TNUMBER:
      return integer_reply(static_cast<std::int64_t>(lua_tonumber(lua, index)));
    case LUA_TTABLE: {
      if (depth > 64) return error_reply("ERR reached lua stack limit");
      lua_getfield(lua, index, "err");
      if (lua_type(lua, -1) == LUA_TSTRING) {
        std::string text = lua_tostring(lua, -1);
        lua_pop(lua, 1);
        if (!text.empty() && text.front() == '-') text.erase(0, 1);
        return error_reply(std::move(text));
      }
      lua_pop(lua, 1);
      lua_getfield(lua, index, "ok");
      if (lua_type(lua, -1) == LUA_TSTRING) {
        std::string text = lua_tostring(lua, -1);
        lua_pop(lua, 1);
        return status_reply(std::move(text));
      }
      lua_pop(lua, 1);
      resp::value array;
      array.kind = resp::type::array;
      for (int i = 1;; ++i) {
        lua_rawgeti(lua, index, i);
        if (lua_isnil(lua, -1)) {
          lua_pop(lua, 1);
          break;
        }
        array.elements.push_back(reply_of(lua, lua_gettop(lua), depth + 1));
        lua_pop(lua, 1);
      }
      return array;
    }
    default:
      return null_reply();
  }
}

// A Lua number as redis.call passes it: Redis formats it with "%.17g", which writes a whole number
// below 10^17 as its digits (-0 as "-0"); those, the common case, skip the formatting.
std::string number_argument(lua_Number number) {
  constexpr lua_Number plain_below = 1e15;
  if (number == std::trunc(number) && std::fabs(number) < plain_below &&
      !(number == 0 && std::signbit(number))) {
    return std::to_string(static_cast<long long>(number));
  }
  char text[64];
  const int n = std::snprintf(text, sizeof text, "%.17g", number);
  return std::string(text, static_cast<std::size_t>(n));
}

// redis.call (raise = true) and redis.pcall.
int redis_command(lua_State* lua, bool raise) {
  bool failed = false;
  {
    call_scope& scope = scope_of(lua);
    const int argc = lua_gettop(lua);
    std::vector<std::string> args;
    std::string refusal;
    if (argc == 0) refusal = "Please specify at least one argument for this redis lib call";
    for (int i = 1; i <= argc && refusal.empty(); ++i) {
      if (lua_type(lua, i) == LUA_TNUMBER) {
        args.push_back(number_argument(lua_tonumber(lua, i)));
      } else if (lua_type(lua, i) == LUA_TSTRING) {
        std::size_t n = 0;
        const char* text = lua_tolstring(lua, i, &n);
        args.emplace_back(text, n);
      } else {
        refusal = "Lua redis lib command arguments must be strings or integers";
      }
    }
    if (refusal.empty() && script_engine::is_script_command(args[0])) {
      refusal = "This Redis command is not allowed from script";
    } else if (refusal.empty() && !is_data_command(args[0])) {
      refusal = "Unknown Redis command called from script";
    }
    lua_settop(lua, 0);
    if (!refusal.empty()) {
      push_error_table(lua, fmt::format("ERR {}", refusal));
      failed = true;
    } else {
      command_context at = *scope.at;
      at.resp3 = false;
      const resp::value reply = run_data_command(*scope.keys, args, at);
      push_reply(lua, reply);
      failed = reply.is_error();
    }
  }
  if (failed && raise) return lua_error(lua);
  return 1;
}

int redis_call(lua_State* lua) {
  return redis_command(lua, true);
}
int redis_pcall(lua_State* lua) {
  return redis_command(lua, false);
}

// redis.status_reply / redis.error_reply: {ok = text} / {err = text}.
int reply_table(lua_State* lua, const char* field) {
  if (lua_gettop(lua) != 1 || lua_type(lua, 1) != LUA_TSTRING) {
    return luaL_error(lua, "wrong number or type of arguments");
  }
  lua_newtable(lua);
  lua_pushvalue(lua, 1);
  lua_setfield(lua, -2, field);
  return 1;
}
int redis_status_reply(lua_State* lua) {
  return reply_table(lua, "ok");
}
int redis_error_reply(lua_State* lua) {
  return reply_table(lua, "err");
}

int redis_sha1hex(lua_State* lua) {
  if (lua_gettop(lua) != 1) return luaL_error(lua, "wrong number of arguments");
  std::size_t n = 0;
  const char* text = lua_tolstring(lua, 1, &n);
  if (!text) return luaL_error(lua, "wrong number of arguments");
  char hex[41];
  {
    const std::string sha = detail::sha1_hex(std::string_view(text, n));
    std::copy_n(sha.data(), 40, hex);
  }
  lua_pushlstring(lua, hex, 40);
  return 1;
}

int redis_log(lua_State*) {
  return 0;
}

int redis_setresp(lua_State* lua) {
  if (lua_gettop(lua) != 1 || lua_tonumber(lua, 1) != 2) {
    return luaL_error(lua, "the model node does not support redis.setresp(3)");
  }
  return 0;
}

int redis_replicate_commands(lua_State* lua) {
  lua_pushboolean(lua, 1);
  return 1;
}

// Redis 7 forbids a script to create globals or read ones that do not exist.
int global_write(lua_State* lua) {
  return luaL_error(lua, "Script attempted to create global variable '%s'",
                    lua_tostring(lua, 2) ? lua_tostring(lua, 2) : "?");
}
int global_read(lua_State* lua) {
  return luaL_error(lua, "Script attempted to access nonexistent global variable '%s'",
                    lua_tostring(lua, 2) ? lua_tostring(lua, 2) : "?");
}

void count_instructions(lua_State* lua, lua_Debug*) {
  lua_getfield(lua, LUA_REGISTRYINDEX, "redlock_sim_scope");
  auto* scope = static_cast<call_scope*>(lua_touserdata(lua, -1));
  lua_pop(lua, 1);
  constexpr std::uint64_t step = 10'000;
  if (scope->instructions_left < step) {
    luaL_error(lua, "the script ran more than %d Lua instructions",
               static_cast<int>(script_engine::instruction_budget));
  }
  scope->instructions_left -= step;
}

void open_library(lua_State* lua, lua_CFunction open, const char* name) {
  lua_pushcfunction(lua, open);
  lua_pushstring(lua, name);
  lua_call(lua, 1, 0);
}

// A raw set: the globals' metatable refuses new globals to scripts, not to the engine.
void set_string_table(lua_State* lua, const char* name, std::span<const std::string> values) {
  lua_pushstring(lua, name);
  lua_createtable(lua, static_cast<int>(values.size()), 0);
  for (std::size_t i = 0; i < values.size(); ++i) {
    lua_pushlstring(lua, values[i].data(), values[i].size());
    lua_rawseti(lua, -2, static_cast<int>(i + 1));
  }
  lua_rawset(lua, LUA_GLOBALSINDEX);
}

constexpr std::string_view noscript = "NOSCRIPT No matching script. Please use EVAL.";

// Every run starts new model servers, and every connection's handshake loads the library's scripts
// again: the same few sources are hashed and compiled millions of times in a long simulation. The
// digests and the compiled chunks (lua_dump's bytecode, which keeps the chunk's name and lines for
// error messages) are kept per thread; what a script does is unchanged.
const std::string& digest_of(std::string_view source) {
  thread_local std::unordered_map<std::string, std::string> digests;
  auto found = digests.find(std::string(source));
  if (found == digests.end()) {
    found = digests.emplace(std::string(source), detail::sha1_hex(source)).first;
  }
  return found->second;
}

int append_chunk(lua_State*, const void* bytes, std::size_t size, void* out) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(bytes), size);
  return 0;
}

std::unordered_map<std::string, std::string>& compiled_chunks() {
  thread_local std::unordered_map<std::string, std::string> chunks;  // digest → bytecode
  return chunks;
}

}  // namespace

script_engine::script_engine() : lua_(luaL_newstate()) {
  open_library(lua_, luaopen_base, "");
  open_library(lua_, luaopen_table, LUA_TABLIBNAME);
  open_library(lua_, luaopen_string, LUA_STRLIBNAME);
  open_library(lua_, luaopen_math, LUA_MATHLIBNAME);

  auto* scope = static_cast<call_scope*>(lua_newuserdata(lua_, sizeof(call_scope)));
  *scope = call_scope{};
  lua_setfield(lua_, LUA_REGISTRYINDEX, "redlock_sim_scope");

  lua_newtable(lua_);
  const auto with_scope = [&](lua_CFunction f, const char* name) {
    lua_pushlightuserdata(lua_, scope);
    lua_pushcclosure(lua_, f, 1);
    lua_setfield(lua_, -2, name);
  };
  with_scope(redis_call, "call");
  with_scope(redis_pcall, "pcall");
  with_scope(redis_status_reply, "status_reply");
  with_scope(redis_error_reply, "error_reply");
  with_scope(redis_sha1hex, "sha1hex");
  with_scope(redis_log, "log");
  with_scope(redis_setresp, "setresp");
  with_scope(redis_replicate_commands, "replicate_commands");
  int level = 0;
  for (const char* name : {"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"}) {
    lua_pushnumber(lua_, level++);
    lua_setfield(lua_, -2, name);
  }
  lua_setfield(lua_, LUA_GLOBALSINDEX, "redis");

  lua_newtable(lua_);
  lua_pushcfunction(lua_, global_write);
  lua_setfield(lua_, -2, "__newindex");
  lua_pushcfunction(lua_, global_read);
  lua_setfield(lua_, -2, "__index");
  lua_setmetatable(lua_, LUA_GLOBALSINDEX);
}

script_engine::~script_engine() {
  lua_close(lua_);
}

bool script_engine::is_script_command(std::string_view name) {
  const std::string word = lower_case(name);
  return word == "eval" || word == "evalsha" || word == "script" || word == "eval_ro" ||
         word == "evalsha_ro";
}

void script_engine::flush() {
  for (const auto& [sha, ref] : cache_)
    luaL_unref(lua_, LUA_REGISTRYINDEX, ref);
  cache_.clear();
  lua_gc(lua_, LUA_GCCOLLECT, 0);
}

std::optional<resp::value> script_engine::compile(const std::string& sha, std::string_view source) {
  if (cache_.contains(sha)) return std::nullopt;
  auto& chunks = compiled_chunks();
  if (const auto compiled = chunks.find(sha); compiled != chunks.end()) {
    if (luaL_loadbuffer(lua_, compiled->second.data(), compiled->second.size(), "@user_script") !=
        0) {
      throw std::logic_error("sim: a compiled script does not load again");
    }
  } else {
    if (luaL_loadbuffer(lua_, source.data(), source.size(), "@user_script") != 0) {
      std::string why = lua_tostring(lua_, -1) ? lua_tostring(lua_, -1) : "?";
      lua_settop(lua_, 0);
      return error_reply(fmt::format("ERR Error compiling script (new function): {}", why));
    }
    std::string bytecode;
    lua_dump(lua_, append_chunk, &bytecode);
    chunks.emplace(sha, std::move(bytecode));
  }
  cache_.emplace(sha, luaL_ref(lua_, LUA_REGISTRYINDEX));
  return std::nullopt;
}

resp::value script_engine::run(std::span<const std::string> args, keyspace& keys,
                               const command_context& at) {
  const std::string name = lower_case(args[0]);
  if (name == "script") {
    if (args.size() < 2) return error_reply("ERR wrong number of arguments for 'script' command");
    const std::string sub = lower_case(args[1]);
    if (sub == "load" && args.size() == 3) {
      const std::string& sha = digest_of(args[2]);
      if (auto failed = compile(sha, args[2])) return *failed;
      return bulk_reply(sha);
    }
    if (sub == "flush" && args.size() <= 3) {
      flush();
      return status_reply("OK");
    }
    if (sub == "exists" && args.size() >= 3) {
      resp::value found;
      found.kind = resp::type::array;
      for (std::size_t i = 2; i < args.size(); ++i) {
        found.elements.push_back(integer_reply(cache_.contains(lower_case(args[i])) ? 1 : 0));
      }
      return found;
    }
    return error_reply(fmt::format(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try SCRIPT HELP.", args[1]));
  }
  if (name != "eval" && name != "evalsha") {
    return error_reply(fmt::format("ERR the model node does not support {}", args[0]));
  }
  if (args.size() < 3) {
    return error_reply(fmt::format("ERR wrong number of arguments for '{}' command", name));
  }
  std::int64_t numkeys = 0;
  if (!parse_integer(args[2], numkeys)) {
    return error_reply("ERR value is not an integer or out of range");
  }
  if (numkeys > static_cast<std::int64_t>(args.size()) - 3) {
    return error_reply("ERR Number of keys can't be greater than number of args");
  }
  if (numkeys < 0) return error_reply("ERR Number of keys can't be negative");
  std::string sha;
  if (name == "eval") {
    sha = digest_of(args[1]);
    if (auto failed = compile(sha, args[1])) return *failed;
  } else {
    if (args[1].size() != 40) return error_reply(std::string(noscript));
    sha = lower_case(args[1]);
    if (!cache_.contains(sha)) return error_reply(std::string(noscript));
  }
  return eval(sha, args.subspan(2), keys, at);
}

resp::value script_engine::eval(const std::string& sha, std::span<const std::string> args,
                                keyspace& keys, const command_context& at) {
  std::int64_t numkeys = 0;
  parse_integer(args[0], numkeys);
  const auto key_count = static_cast<std::size_t>(numkeys);

  lua_getfield(lua_, LUA_REGISTRYINDEX, "redlock_sim_scope");
  auto* scope = static_cast<call_scope*>(lua_touserdata(lua_, -1));
  lua_pop(lua_, 1);
  *scope = call_scope{&keys, &at, instruction_budget};

  set_string_table(lua_, "KEYS", args.subspan(1, key_count));
  set_string_table(lua_, "ARGV", args.subspan(1 + key_count));
  lua_rawgeti(lua_, LUA_REGISTRYINDEX, cache_.at(sha));
  lua_sethook(lua_, count_instructions, LUA_MASKCOUNT, 10'000);
  const int failed = lua_pcall(lua_, 0, 1, 0);
  lua_sethook(lua_, nullptr, 0, 0);
  *scope = call_scope{};

  resp::value reply;
  if (failed) {
    // A redis.call error keeps its own text (and code word); a Lua error is an ERR.
    std::string text;
    if (lua_istable(lua_, -1)) {
      lua_getfield(lua_, -1, "err");
      text = lua_tostring(lua_, -1) ? lua_tostring(lua_, -1) : "ERR unknown error";
      lua_pop(lua_, 1);
    } else {
      text = fmt::format("ERR {}", lua_tostring(lua_, -1) ? lua_tostring(lua_, -1) : "?");
    }
    reply = error_reply(fmt::format("{} script: {}, on @user_script:1.", text, sha));
  } else {
    reply = reply_of(lua_, lua_gettop(lua_), 0);
  }
  lua_settop(lua_, 0);
  return reply;
}

}  // namespace redlock::sim
