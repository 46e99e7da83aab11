#ifndef REDLOCK_TOOLS_REDLOCK_RUN_COMMAND_HPP
#define REDLOCK_TOOLS_REDLOCK_RUN_COMMAND_HPP

#include "arguments.hpp"
#include "child_process.hpp"

namespace redlock::cli {

// `redlock run`: acquires, runs COMMAND under the renewed lock, releases. Returns the exit code
// (see exit_codes.hpp); prints its status and error lines on stderr (with --json, as one JSON
// object per line).
int run_command(const run_options& options, const inheritance& inherited);

}  // namespace redlock::cli

#endif
