#ifndef REDLOCK_TOOLS_REDLOCK_MANUAL_PAGE_HPP
#define REDLOCK_TOOLS_REDLOCK_MANUAL_PAGE_HPP

#include "help.hpp"

#include <string>

namespace redlock::cli {

// redlock(1) in roff (man macros), rendered from the help: NAME from its summary, SYNOPSIS from
// its usage lines, DESCRIPTION, COMMANDS (each command's help), OPTIONS (node URLs, the TLS
// options, durations), ENVIRONMENT, EXIT STATUS, EXAMPLES, SEE ALSO. Throws std::runtime_error
// when the help breaks its layout (help.hpp).
std::string manual_page(const help_parts& help);

}  // namespace redlock::cli

#endif
