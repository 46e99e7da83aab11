#ifndef REDLOCK_TOOLS_REDLOCK_HELP_HPP
#define REDLOCK_TOOLS_REDLOCK_HELP_HPP

#include <string>
#include <string_view>

namespace redlock::cli {

// The help text for `topic`: "" for the whole tool, or a command's name ("run", "status",
// "acquire", "extend", "release"). Every text ends with the
// exit codes, which are the part scripts depend on.
std::string help_text(std::string_view topic);

}  // namespace redlock::cli

#endif
