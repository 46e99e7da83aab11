#include "completion_script.hpp"

#include "help_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace redlock::cli {
namespace {

// The script writes names into shell words and case patterns unquoted: only these characters.
void check_word(std::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
  if (!plain) throw std::runtime_error(fmt::format("help: \"{}\" cannot be completed", word));
}

std::string joined(const std::vector<std::string>& words, std::string_view separator) {
  std::string text;
  for (const auto& word : words) {
    if (!text.empty()) text += separator;
    text += word;
  }
  return text;
}

struct command_options {
  std::string name;
  std::vector<std::string> options;
};

class option_kinds {
 public:
  // FILE names a file; any other placeholder a word of the user's that nothing can guess.
  void add(const layout::option_term& term) {
    const std::string kind = term.value.empty() ? "" : term.value == "FILE" ? "file" : "word";
    for (const auto& name : term.names) {
      const auto [at, added] = kinds_.emplace(name, kind);
      if (!added && at->second != kind) {
        throw std::runtime_error(
            fmt::format("help: {} takes a value in one command and another in the next", name));
      }
    }
  }

  std::vector<std::string> taking(std::string_view kind) const {
    std::vector<std::string> names;
    for (const auto& [name, of] : kinds_) {
      if (of == kind) names.push_back(name);
    }
    return names;
  }

 private:
  std::map<std::string, std::string> kinds_;
};

// The tool's own options before any command, as the usage lines name them: "redlock --version".
std::vector<std::string> top_level_options(std::string_view synopsis) {
  std::vector<std::string> options;
  constexpr std::string_view prefix = "redlock -";
  for (auto at = synopsis.find(prefix); at != std::string_view::npos;
       at = synopsis.find(prefix, at + 1)) {
    const auto start = at + prefix.size() - 1;
    const auto end = synopsis.find_first_of(" ,)\n", start);
    std::string option(synopsis.substr(start, end - start));
    check_word(option);
    if (std::find(options.begin(), options.end(), option) == options.end())
      options.push_back(std::move(option));
  }
  return options;
}

constexpr std::string_view completion_function = R"sh(
_redlock() {
  local cur=${COMP_WORDS[COMP_CWORD]} option after_equals=0 i
  COMPREPLY=()
  if ((COMP_CWORD <= 1)); then
    mapfile -t COMPREPLY < <(compgen -W "$_redlock_commands $_redlock_top_options" -- "$cur")
    return 0
  fi
  local command=${COMP_WORDS[1]}
  # After "--" come COMMAND and its arguments: they get COMMAND's own completion where
  # bash-completion offers it, else command names and then file names.
  for ((i = 2; i < COMP_CWORD; i++)); do
    if [[ ${COMP_WORDS[i]} == -- ]]; then
      if declare -F _command_offset >/dev/null; then
        _command_offset $((i + 1))
      elif ((COMP_CWORD == i + 1)); then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
      else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      fi
      return 0
    fi
  done
  if [[ $command == help ]]; then
    if ((COMP_CWORD == 2)); then
      mapfile -t COMPREPLY < <(compgen -W "${_redlock_commands% help}" -- "$cur")
    fi
    return 0
  fi
  # bash splits --option=value at "=" (COMP_WORDBREAKS): "--option" "=" "value".
  option=${COMP_WORDS[COMP_CWORD - 1]}
  if [[ $cur == = ]]; then
    cur=""
    after_equals=1
  elif [[ $option == = ]]; then
    option=${COMP_WORDS[COMP_CWORD - 2]}
    after_equals=1
  fi
  case $(_redlock_option_value "$option") in
    file)
      compopt -o filenames 2>/dev/null || true
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return 0
      ;;
    word) return 0 ;;
  esac
  if ((!after_equals)) && [[ -z $cur || $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_redlock_options "$command")" -- "$cur")
  fi
  return 0
}

complete -F _redlock redlock
)sh";

}  // namespace

std::string bash_completion(const help_parts& help) {
  std::vector<layout::row> tls_rows;
  for (auto& block : layout::read_blocks(help.tls_options, 0)) {
    if (block.kind == layout::block_kind::table) tls_rows = std::move(block.rows);
  }
  if (tls_rows.empty()) throw std::runtime_error("help: the TLS options have no table");

  option_kinds kinds;
  std::vector<command_options> commands;
  std::vector<std::string> command_names;
  for (const auto& command : help.commands) {
    check_word(command.name);
    command_names.emplace_back(command.name);
    command_options entry{std::string(command.name), {}};
    for (const auto& row : layout::options_table(command.text)) {
      for (const auto& option : row.term == "TLS options" ? tls_rows : std::vector{row}) {
        const auto term = layout::read_option_term(option.term);
        kinds.add(term);
        for (const auto& name : term.names) {
          check_word(name);
          entry.options.push_back(name);
        }
      }
    }
    // "--" ends the options where a COMMAND to run follows them.
    std::string_view usage_lines;
    const auto usages = layout::leading_lines(command.text, usage_lines);
    if (std::any_of(usages.begin(), usages.end(),
                    [](const std::string& usage) { return usage.find(" -- ") != usage.npos; }))
      entry.options.emplace_back("--");
    commands.push_back(std::move(entry));
  }
  command_names.emplace_back("help");

  std::string script;
  script += "# shellcheck shell=bash\n";
  script += "# bash completion for redlock(1), rendered from `redlock --help` by the build\n";
  script += "# (tools/redlock/help.cpp, completion_script.cpp): change those, not this file.\n\n";
  script += fmt::format("_redlock_commands='{}'\n", joined(command_names, " "));
  script +=
      fmt::format("_redlock_top_options='{}'\n\n", joined(top_level_options(help.synopsis), " "));

  script += "# The options of the command $1, for compgen -W.\n";
  script += "_redlock_options() {\n  case $1 in\n";
  for (const auto& command : commands)
    script += fmt::format("    {}) echo '{}' ;;\n", command.name, joined(command.options, " "));
  script += "  esac\n}\n\n";

  script += "# What the option $1 takes: a file name (file), a word of the user's (word), or\n";
  script += "# nothing.\n";
  script += "_redlock_option_value() {\n  case $1 in\n";
  for (const std::string_view kind : {"file", "word"}) {
    const auto names = kinds.taking(kind);
    if (!names.empty()) script += fmt::format("    {}) echo {} ;;\n", joined(names, " | "), kind);
  }
  script += "  esac\n}\n";
  script += completion_function;
  return script;
}

}  // namespace redlock::cli
