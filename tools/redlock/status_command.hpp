#ifndef REDLOCK_TOOLS_REDLOCK_STATUS_COMMAND_HPP
#define REDLOCK_TOOLS_REDLOCK_STATUS_COMMAND_HPP

#include "arguments.hpp"

namespace redlock::cli {

// `redlock status`: one line per node and a verdict on stdout (with --json, one JSON object for
// each). Returns 0 when a quorum of nodes answered, else 1. Reads only; never changes a key.
int status_command(const status_options& options);

}  // namespace redlock::cli

#endif
