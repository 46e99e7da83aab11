#ifndef REDLOCK_TOOLS_REDLOCK_HELP_HPP
#define REDLOCK_TOOLS_REDLOCK_HELP_HPP

#include <span>
#include <string>
#include <string_view>

namespace redlock::cli {

// One command's help as `redlock help NAME` prints it, before the parts every command shares:
// its usage lines at column 0, then paragraphs indented by 2 with examples indented deeper after
// a paragraph that ends with ':' (a deeper line after any other paragraph line continues it). An
// "Options:" line starts a table at indent 4: each entry is the option's names and value
// placeholder ("-q, --quiet", "--ttl DURATION"), then two or more spaces and its description,
// which deeper lines continue; "TLS options" stands for those of help_parts::tls_options. A blank
// line ends the table.
//
// The manual page and the bash completion are rendered from these texts by the build
// (redlock_help_render), so they follow the layout above; a line that breaks it fails the build.
struct command_help {
  std::string_view name;
  std::string_view text;
};

// Everything `redlock --help` prints, in parts.
struct help_parts {
  std::string_view summary;      // what the tool is, one line without the final full stop
  std::string_view synopsis;     // the usage lines, indented by 2
  std::string_view description;  // paragraphs at column 0
  std::string_view examples;     // command lines, indented by 2
  std::span<const command_help> commands;
  // What every help text ends with, each starting with its heading line at column 0 (a table at
  // indent 2 follows a heading that ends with ':', laid out as a command's "Options:").
  std::string_view node_urls;
  std::string_view tls_options;
  std::string_view durations;
  std::string_view environment;
  std::string_view exit_codes;
};

const help_parts& help_contents() noexcept;

// The help text for `topic`: "" for the whole tool, or a command's name ("run", "status",
// "acquire", "extend", "release"). Every text ends with the
// exit codes, which are the part scripts depend on.
std::string help_text(std::string_view topic);

// `redlock --version`: the tool's version, then the library's, Boost's and OpenSSL's it was built
// with, OpenSSL's being what the process runs (`openssl_version`, as OpenSSL_version() says it).
std::string version_text(std::string_view openssl_version);

}  // namespace redlock::cli

#endif
