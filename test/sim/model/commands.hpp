#ifndef REDLOCK_TEST_SIM_MODEL_COMMANDS_HPP
#define REDLOCK_TEST_SIM_MODEL_COMMANDS_HPP

// The data commands of a model Redis node, as Redis 7.0 answers them: the replies and the errors
// (code word and text) a client or a script sees. Only the commands the library and its scripts
// send, with the options they use and a few near them that a changed script might reach; an option
// outside them is refused with an error that says the model lacks it, never answered wrongly.

#include "resp/value.hpp"
#include "sim/model/keyspace.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace redlock::sim {

struct command_context {
  // The node's clock, in microseconds (TIME) and milliseconds (expiries). A script's commands all
  // see the time it started at, as Redis 7 freezes it for a script.
  std::int64_t now_us = 0;
  std::int64_t now_ms() const noexcept { return now_us / 1000; }
  // The caller speaks RESP3 (HELLO 3): doubles are answered as doubles. Scripts' calls are RESP2.
  bool resp3 = false;
  // Delivers a PUBLISH (sharded: SPUBLISH) to the node's subscribers; how many received it.
  std::function<std::int64_t(std::string_view channel, std::string_view message, bool sharded)>
      publish;
  // The node is a replica: commands that write are refused with READONLY, in scripts too.
  bool read_only = false;
};

// An error reply, as Redis sends one: `text` starts with the code word ("ERR", "WRONGTYPE").
resp::value error_reply(std::string text);
resp::value status_reply(std::string text);
resp::value integer_reply(std::int64_t n);
resp::value bulk_reply(std::string text);
resp::value null_reply();

// Whether `name` (any case) is a data command of this file.
bool is_data_command(std::string_view name);
// Whether a data command (named in lower case) writes: a replica refuses it.
bool is_write_command(std::string_view lower_name);

// Runs one data command. `args[0]` is its name, in any case.
resp::value run_data_command(keyspace& keys, std::span<const std::string> args,
                             const command_context& at);

// `text` in lower case (command names are case-insensitive).
std::string lower_case(std::string_view text);

// Redis's text of a double (a sorted set's score): "%.17g", with "inf" and "-inf".
std::string score_text(double score);

// Redis's strict integer syntax (string2ll): an optional '-', no '+', no spaces, no leading zero.
bool parse_integer(std::string_view text, std::int64_t& out) noexcept;

}  // namespace redlock::sim

#endif
