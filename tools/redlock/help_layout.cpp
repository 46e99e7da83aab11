#include "help_layout.hpp"

#include <fmt/format.h>

#include <optional>
#include <stdexcept>

namespace redlock::cli::layout {
namespace {

struct line {
  std::size_t indent = 0;
  std::string_view text;  // without the indent; empty for a blank line
};

std::vector<line> split_lines(std::string_view text) {
  std::vector<line> lines;
  while (!text.empty()) {
    const auto end = text.find('\n');
    std::string_view raw = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    const auto first = raw.find_first_not_of(' ');
    if (first == std::string_view::npos) {
      lines.push_back({});
    } else {
      lines.push_back({first, raw.substr(first)});
    }
  }
  return lines;
}

bool blank(const line& l) noexcept {
  return l.text.empty();
}

// Where a table row's description starts: after the first run of two or more spaces.
std::optional<std::size_t> gap_in(std::string_view text) noexcept {
  const auto gap = text.find("  ");
  if (gap == std::string_view::npos) return std::nullopt;
  return gap;
}

[[noreturn]] void broken(const line& l, std::string_view why) {
  throw std::runtime_error(
      fmt::format("help layout: {}: \"{}{}\"", why, std::string(l.indent, ' '), l.text));
}

void append_words(std::string& to, std::string_view words) {
  if (!to.empty()) to += ' ';
  to.append(words);
}

class reader {
 public:
  reader(std::string_view text, std::size_t indent) : lines_(split_lines(text)), indent_(indent) {}

  std::vector<block> read() {
    bool after_blank = true;
    while (next_ < lines_.size()) {
      const line& l = lines_[next_];
      if (blank(l)) {
        after_blank = true;
        ++next_;
        continue;
      }
      if (l.indent != indent_) broken(l, fmt::format("expected a paragraph at column {}", indent_));
      read_paragraph(after_blank);
      after_blank = false;
    }
    return std::move(blocks_);
  }

 private:
  bool deeper_next(std::size_t than) const noexcept {
    return next_ < lines_.size() && !blank(lines_[next_]) && lines_[next_].indent > than;
  }

  // A paragraph at indent_, and what its last line introduces: a table after "Options:" or a
  // heading at column 0, examples after any other line that ends with ':'.
  void read_paragraph(bool after_blank) {
    block paragraph;
    paragraph.after_blank = after_blank;
    std::string text;
    while (next_ < lines_.size() && !blank(lines_[next_]) && lines_[next_].indent == indent_) {
      const line& l = lines_[next_++];
      append_words(text, l.text);
      if (!deeper_next(indent_)) continue;
      if (l.text.ends_with(':')) {
        paragraph.lines.push_back(std::move(text));
        blocks_.push_back(std::move(paragraph));
        if (l.text == "Options:" || indent_ == 0) {
          read_table();
        } else {
          read_verbatim();
        }
        return;
      }
      // A hanging indent: the deeper lines continue this paragraph.
      while (deeper_next(indent_))
        append_words(text, lines_[next_++].text);
    }
    paragraph.lines.push_back(std::move(text));
    blocks_.push_back(std::move(paragraph));
  }

  void read_verbatim() {
    block examples;
    examples.kind = block_kind::verbatim;
    const std::size_t base = indent_ + 2;
    while (deeper_next(indent_)) {
      const line& l = lines_[next_++];
      examples.lines.push_back(std::string(l.indent > base ? l.indent - base : 0, ' ') +
                               std::string(l.text));
    }
    blocks_.push_back(std::move(examples));
  }

  void read_table() {
    block table;
    table.kind = block_kind::table;
    const std::size_t at = lines_[next_].indent;
    if (at != indent_ + 2) broken(lines_[next_], "a table's rows are indented by 2 more");
    while (deeper_next(indent_)) {
      const line& l = lines_[next_++];
      if (l.indent > at) {
        if (table.rows.empty() || table.rows.back().term.empty()) {
          broken(l, "a deeper line in a table continues a row with a term");
        }
        append_words(table.rows.back().description, l.text);
      } else if (const auto gap = gap_in(l.text)) {
        const auto description = l.text.substr(l.text.find_first_not_of(' ', *gap));
        table.rows.push_back({std::string(l.text.substr(0, *gap)), std::string(description)});
      } else if (deeper_next(at)) {
        table.rows.push_back({std::string(l.text), {}});
      } else if (!table.rows.empty() && table.rows.back().term.empty()) {
        append_words(table.rows.back().description, l.text);
      } else {
        table.rows.push_back({{}, std::string(l.text)});
      }
    }
    blocks_.push_back(std::move(table));
  }

  std::vector<line> lines_;
  std::size_t indent_;
  std::size_t next_ = 0;
  std::vector<block> blocks_;
};

}  // namespace

std::vector<block> read_blocks(std::string_view text, std::size_t indent) {
  return reader(text, indent).read();
}

std::vector<std::string> leading_lines(std::string_view text, std::string_view& rest) {
  std::vector<std::string> lines;
  while (!text.empty() && text.front() != ' ' && text.front() != '\n') {
    const auto end = text.find('\n');
    lines.emplace_back(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
  }
  rest = text;
  return lines;
}

option_term read_option_term(std::string_view term) {
  option_term result;
  // "-q, --quiet", "--read, --write": names apart by ", "; a placeholder after the last name.
  while (!term.empty()) {
    const auto comma = term.find(", ");
    std::string_view name = term.substr(0, comma);
    term = comma == std::string_view::npos ? std::string_view{} : term.substr(comma + 2);
    if (const auto space = name.find(' '); space != std::string_view::npos) {
      result.value = std::string(name.substr(space + 1));
      name = name.substr(0, space);
    }
    if (!name.starts_with('-')) {
      throw std::runtime_error(fmt::format("help layout: \"{}\" is not an option name", name));
    }
    result.names.emplace_back(name);
  }
  return result;
}

std::vector<row> options_table(std::string_view text) {
  std::string_view body;
  leading_lines(text, body);
  for (auto& b : read_blocks(body, 2)) {
    if (b.kind == block_kind::table) return std::move(b.rows);
  }
  throw std::runtime_error("help layout: no \"Options:\" table");
}

}  // namespace redlock::cli::layout
