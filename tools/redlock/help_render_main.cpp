// redlock_help_render: writes the manual page or the bash completion of redlock, both rendered
// from its help (help.cpp), for the build to install beside the tool.
//
//   redlock_help_render man|bash-completion OUTPUT

#include "completion_script.hpp"
#include "help.hpp"
#include "manual_page.hpp"

#include <fmt/format.h>

#include <exception>
#include <fstream>
#include <string>
#include <string_view>

int main(int argc, char* argv[]) {
  namespace cli = redlock::cli;
  if (argc != 3) {
    fmt::print(stderr, "usage: redlock_help_render man|bash-completion OUTPUT\n");
    return 2;
  }
  const std::string_view what = argv[1];
  try {
    std::string text;
    if (what == "man") {
      text = cli::manual_page(cli::help_contents());
    } else if (what == "bash-completion") {
      text = cli::bash_completion(cli::help_contents());
    } else {
      fmt::print(stderr, "redlock_help_render: unknown output \"{}\"\n", what);
      return 2;
    }
    std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      fmt::print(stderr, "redlock_help_render: cannot write {}\n", argv[2]);
      return 1;
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "redlock_help_render: {}\n", e.what());
    return 1;
  }
  return 0;
}
