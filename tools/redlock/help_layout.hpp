#ifndef REDLOCK_TOOLS_REDLOCK_HELP_LAYOUT_HPP
#define REDLOCK_TOOLS_REDLOCK_HELP_LAYOUT_HPP

// The help's plain-text layout (help.hpp) read back as blocks, for the renderers of the manual
// page and the bash completion: both follow the help without a copy of its words.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::cli::layout {

// A row of a table: "--ttl DURATION" and what it does. A row without a term is a sentence that
// sits among the rows ("Set for COMMAND by run:").
struct row {
  std::string term;
  std::string description;  // its lines joined by single spaces
};

enum class block_kind {
  paragraph,  // text to fill: one entry in `lines`, its lines joined by single spaces
  verbatim,   // example lines, as written less the indent of their paragraph and 2
  table,      // rows
};

struct block {
  block_kind kind = block_kind::paragraph;
  std::vector<std::string> lines;
  std::vector<row> rows;
  // A blank line comes before it (or it comes first): the renderers leave space there.
  bool after_blank = false;
};

// Reads `text`, whose paragraphs are at column `indent`, as help.hpp lays it out. Throws
// std::runtime_error quoting the first line that breaks the layout.
std::vector<block> read_blocks(std::string_view text, std::size_t indent);

// The lines of `text` at column 0 that come before its first indented line: a command's usage
// lines. `rest` gets what follows them.
std::vector<std::string> leading_lines(std::string_view text, std::string_view& rest);

// An option table's term: "-q, --quiet" names -q and --quiet; "--ttl DURATION" names --ttl,
// which takes a DURATION.
struct option_term {
  std::vector<std::string> names;
  std::string value;  // the placeholder, empty for a flag
};
option_term read_option_term(std::string_view term);

// The rows of the first table of `text` that comes after a line "Options:".
std::vector<row> options_table(std::string_view text);

}  // namespace redlock::cli::layout

#endif
