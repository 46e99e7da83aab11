#include "manual_page.hpp"

#include "help_layout.hpp"
#include "redlock/version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::cli {
namespace {

// Words longer than this get break points after their punctuation: a node list or a JSON
// object in filled text is one word to troff, which cannot break it otherwise and warns when it
// does not fit the line.
constexpr std::size_t long_word = 24;

bool breaks_after(char c) noexcept {
  return c == ',' || c == '/' || c == '&' || c == '?' || c == ';' || c == '|' || c == ']';
}

// `text` as roff input text: backslashes, hyphens (an option's "-" must stay a minus for copy
// and paste) and quotes escaped, and a line that would start with a control character guarded.
std::string escape(std::string_view text, bool fill) {
  std::string out;
  std::size_t word_start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ') word_start = i + 1;
    switch (c) {
      case '\\':
        out += "\\e";
        break;
      case '-':
        out += "\\-";
        break;
      case '\'':
        out += "\\(aq";
        break;
      case '`':
        out += "\\(ga";
        break;
      default:
        out += c;
    }
    if (fill && breaks_after(c) && i + 1 < text.size() && text[i + 1] != ' ') {
      const auto word_end = text.find(' ', word_start);
      const auto length =
          (word_end == std::string_view::npos ? text.size() : word_end) - word_start;
      if (length > long_word) out += "\\:";
    }
  }
  if (out.starts_with('.')) out.insert(0, "\\&");
  return out;
}

// An option's names in bold and its placeholder in italics; any other term in bold.
std::string term_roff(std::string_view term) {
  if (!term.starts_with('-')) return fmt::format("\\fB{}\\fR", escape(term, true));
  std::string out;
  while (!term.empty()) {
    const auto space = term.find(' ');
    std::string_view word = term.substr(0, space);
    term = space == std::string_view::npos ? std::string_view{} : term.substr(space + 1);
    std::string_view comma;
    if (word.ends_with(',') && word.starts_with('-')) {
      word.remove_suffix(1);
      comma = ",";
    }
    if (!out.empty()) out += ' ';
    const std::string_view font = word.starts_with('-') ? "B" : "I";
    out += fmt::format("\\f{}{}\\fR{}", font, escape(word, true), comma);
  }
  return out;
}

void verbatim(std::string& page, const std::vector<std::string>& lines) {
  page += ".RS 4\n.nf\n";
  for (const auto& l : lines)
    page += escape(l, false) + "\n";
  page += ".fi\n.RE\n";
}

// A usage line with the command in bold: "redlock run [OPTIONS] ...".
std::string usage_roff(std::string_view usage) {
  std::size_t bold = usage.find(' ', usage.find_first_not_of(' '));
  bold = usage.find(' ', bold + 1);
  if (bold == std::string_view::npos) bold = usage.size();
  const auto indent = usage.find_first_not_of(' ');
  return fmt::format("\\fB{}\\fR{}", escape(usage.substr(indent, bold - indent), false),
                     escape(usage.substr(bold), false));
}

// `text`, its paragraphs at column `indent`. Without `heading`, the first paragraph is left out:
// the section's name says what the help's heading line ("Environment:") says.
void blocks(std::string& page, std::string_view text, std::size_t indent, bool heading = true) {
  bool after_table = false;
  auto read = layout::read_blocks(text, indent);
  if (!heading && !read.empty()) read.erase(read.begin());
  for (const auto& b : read) {
    switch (b.kind) {
      case layout::block_kind::paragraph:
        // Without a blank line before it, a paragraph goes on right below the examples it
        // follows, as in the help; after a table it must end the table's indent.
        if (b.after_blank || after_table) page += ".PP\n";
        page += escape(b.lines.front(), true) + "\n";
        break;
      case layout::block_kind::verbatim:
        if (b.after_blank) page += ".PP\n";
        verbatim(page, b.lines);
        break;
      case layout::block_kind::table:
        for (const auto& row : b.rows) {
          if (row.term.empty()) {
            page += ".PP\n" + escape(row.description, true) + "\n";
          } else {
            page += ".TP\n" + term_roff(row.term) + "\n" + escape(row.description, true) + "\n";
          }
        }
        break;
    }
    after_table = b.kind == layout::block_kind::table;
  }
}

// The lines of `text`, each less `indent` leading spaces.
std::vector<std::string> lines_of(std::string_view text, std::size_t indent) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto l = text.substr(0, end);
    lines.emplace_back(l.substr(std::min({indent, l.find_first_not_of(' '), l.size()})));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
  }
  while (!lines.empty() && lines.back().empty())
    lines.pop_back();
  return lines;
}

}  // namespace

std::string manual_page(const help_parts& help) {
  std::string page;
  page +=
      ".\\\" redlock(1), rendered from `redlock --help` (tools/redlock/help.cpp) by the build.\n";
  page += fmt::format(".TH REDLOCK 1 \"\" \"redlock-asio {}\" \"User Commands\"\n",
                      REDLOCK_VERSION_STRING);
  // Ragged right and no hyphenation: justified lines of long option names and URLs would gape,
  // and a word broken at a hyphen of its own would read as two.
  page += ".ad l\n.nh\n";
  page += ".SH NAME\n";
  page += "redlock \\- " + escape(help.summary, true) + "\n";

  page += ".SH SYNOPSIS\n.nf\n";
  for (const auto& usage : lines_of(help.synopsis, 0))
    page += usage_roff(usage) + "\n";
  page += ".fi\n";

  page += ".SH DESCRIPTION\n";
  blocks(page, help.description, 0);

  page += ".SH COMMANDS\n";
  for (const auto& command : help.commands) {
    std::string_view body;
    const auto usages = layout::leading_lines(command.text, body);
    page += fmt::format(".SS {}\n.nf\n", command.name);
    for (const auto& usage : usages)
      page += usage_roff(usage) + "\n";
    page += ".fi\n";
    blocks(page, body, 2);
  }

  page += ".SH OPTIONS\n";
  for (const auto part : {help.node_urls, help.tls_options, help.durations})
    blocks(page, part, 0);

  page += ".SH ENVIRONMENT\n";
  blocks(page, help.environment, 0, false);

  page += ".SH \"EXIT STATUS\"\n";
  blocks(page, help.exit_codes, 0, false);

  page += ".SH EXAMPLES\n";
  verbatim(page, lines_of(help.examples, 2));

  page += ".SH \"SEE ALSO\"\n.BR flock (1),\n.BR redis\\-cli (1)\n";
  return page;
}

}  // namespace redlock::cli
