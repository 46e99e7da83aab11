#ifndef REDLOCK_TOOLS_REDLOCK_COMPLETION_SCRIPT_HPP
#define REDLOCK_TOOLS_REDLOCK_COMPLETION_SCRIPT_HPP

#include "help.hpp"

#include <string>

namespace redlock::cli {

// The bash completion of redlock, rendered from the help: the commands at the first word, each
// command's options (those of its "Options:" table, the TLS options included) after it, file
// names after an option whose placeholder is FILE, nothing after one that takes another value,
// and after "--" the completion of the COMMAND that follows. Throws std::runtime_error when the
// help breaks its layout (help.hpp) or names an option that a shell pattern could not hold.
std::string bash_completion(const help_parts& help);

}  // namespace redlock::cli

#endif
