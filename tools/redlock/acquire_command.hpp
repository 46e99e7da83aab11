#ifndef REDLOCK_TOOLS_REDLOCK_ACQUIRE_COMMAND_HPP
#define REDLOCK_TOOLS_REDLOCK_ACQUIRE_COMMAND_HPP

#include "arguments.hpp"
#include "child_process.hpp"

namespace redlock::cli {

// `redlock acquire`: takes the lock as `run` does, but without renewal, prints its token on
// stdout (with --json, one JSON object) and exits, leaving the lock held until its TTL runs out
// or `extend` and `release` with that token change that. Returns the exit code (see
// exit_codes.hpp). `inherited` says which signals were ignored at start: those stay ignored.
int acquire_command(const acquire_options& options, const inheritance& inherited);

}  // namespace redlock::cli

#endif
