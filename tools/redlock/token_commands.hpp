#ifndef REDLOCK_TOOLS_REDLOCK_TOKEN_COMMANDS_HPP
#define REDLOCK_TOOLS_REDLOCK_TOKEN_COMMANDS_HPP

#include "arguments.hpp"

namespace redlock::cli {

// `redlock extend`: sets the TTL of the lock held by --token (client::async_extend). Returns 0,
// exit_code::not_held when a quorum says the key is gone or someone else's (and says which, from a
// look at the nodes), exit_code::not_acquired (75) when too few nodes answered, usage or failure.
// One line on stderr; with --json one object on stdout instead.
int extend_command(const extend_options& options);

// `redlock release`: deletes the lock held by --token (client::async_release), with the exit
// codes of extend_command. With --force, every holder found on the nodes (client::async_inspect)
// is released by its token, after a question on a terminal unless --yes (without a terminal,
// --yes is required: exit_code::usage), and one line naming the user, the host, the resource, the
// tokens and their nodes goes to stderr and to syslog (LOG_AUTH, LOG_NOTICE).
int release_command(const release_options& options);

}  // namespace redlock::cli

#endif
