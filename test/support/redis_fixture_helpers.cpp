#include "support/redis_fixture_helpers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace redlock::test {
namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

}  // namespace

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (!text.empty()) {
    const auto end = text.find(separator);
    const auto part = text.substr(0, end);
    if (!part.empty()) parts.push_back(part);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return parts;
}

std::size_t to_size(std::string_view text) {
  std::size_t value = 0;
  if (text.empty()) throw std::runtime_error("an empty number");
  for (const char c : text) {
    if (c < '0' || c > '9') throw std::runtime_error(fmt::format("\"{}\" is not a number", text));
    value = value * 10 + static_cast<std::size_t>(c - '0');
  }
  return value;
}

std::string field_of(std::string_view text, std::string_view name) {
  for (std::string_view row : split(text, '\n')) {
    if (row.ends_with('\r')) row.remove_suffix(1);
    if (row.size() > name.size() && row.starts_with(name) && row[name.size()] == ':') {
      return std::string(row.substr(name.size() + 1));
    }
  }
  return "<missing>";
}

std::string describe_command(std::span<const std::string_view> args) {
  std::string out;
  bool hide = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i == 12) {
      out += fmt::format(" ... ({} words)", args.size());
      break;
    }
    if (i > 0) out += ' ';
    const std::string_view arg = args[i];
    if (hide) {
      out += "<password>";
    } else if (arg.empty()) {
      out += "\"\"";
    } else if (arg.size() > 48) {
      out += arg.substr(0, 45);
      out += "...";
    } else {
      out += arg;
    }
    hide = equals_ignoring_case(arg, "AUTH");
  }
  return out;
}

}  // namespace redlock::test
