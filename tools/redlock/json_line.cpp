#include "json_line.hpp"

#include <cstddef>
#include <cstdint>

namespace redlock::cli {
namespace {

constexpr std::string_view replacement_character = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// The bytes at the start of `text` that are taken as one: a well-formed UTF-8 sequence, or else
// its maximal subpart, which one U+FFFD replaces: the lead byte and the continuation bytes that
// could still have begun a well-formed sequence (Unicode 15, 3.9, table 3-7). So "\xE2\x82" (a
// cut-off euro sign) is one U+FFFD, and "\xC0\xAF" (an overlong '/') two.
struct utf8_sequence {
  std::size_t length = 1;
  bool well_formed = false;
};

// `text` starts with a byte of 0x80 or above.
utf8_sequence next_utf8_sequence(std::string_view text) {
  const auto byte = [text](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(0);
  std::size_t length = 0;
  // The second byte's range is narrower after some lead bytes: that is what rules out overlong
  // forms (E0, F0), surrogates (ED) and code points past U+10FFFF (F4).
  std::uint8_t low = 0x80;
  std::uint8_t high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    // A stray continuation byte, or one that never starts a sequence (C0, C1, F5..FF).
    return {};
  }
  for (std::size_t i = 1; i < length; ++i) {
    if (i >= text.size() || byte(i) < low || byte(i) > high)
      return {.length = i, .well_formed = false};
    low = 0x80;
    high = 0xBF;
  }
  return {.length = length, .well_formed = true};
}

}  // namespace

std::string json_string(std::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  std::size_t at = 0;
  while (at < text.size()) {
    const char c = text[at];
    const auto byte = static_cast<std::uint8_t>(c);
    if (byte >= 0x80) {
      const auto sequence = next_utf8_sequence(text.substr(at));
      out.append(sequence.well_formed ? text.substr(at, sequence.length) : replacement_character);
      at += sequence.length;
      continue;
    }
    ++at;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (byte < 0x20) {
          constexpr std::string_view hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[byte >> 4];
          out += hex[byte & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

json_line& json_line::string(std::string_view name, std::string_view value) {
  return field(name, json_string(value));
}

json_line& json_line::boolean(std::string_view name, bool value) {
  return field(name, value ? "true" : "false");
}

json_line& json_line::null(std::string_view name) {
  return field(name, "null");
}

json_line& json_line::strings(std::string_view name, std::span<const std::string> values) {
  std::string array = "[";
  for (const auto& value : values) {
    if (array.size() > 1) array += ',';
    array += json_string(value);
  }
  array += ']';
  return field(name, array);
}

json_line& json_line::integers(std::string_view name, std::span<const std::uint64_t> values) {
  std::string array = "[";
  for (const auto value : values) {
    if (array.size() > 1) array += ',';
    array += std::to_string(value);
  }
  array += ']';
  return field(name, array);
}

json_line& json_line::optional_string(std::string_view name,
                                      const std::optional<std::string>& value) {
  return value ? string(name, *value) : null(name);
}

std::string json_line::str() const {
  return "{" + fields_ + "}";
}

json_line& json_line::field(std::string_view name, std::string_view json_value) {
  if (!fields_.empty()) fields_ += ',';
  fields_ += json_string(name);
  fields_ += ':';
  fields_ += json_value;
  return *this;
}

}  // namespace redlock::cli
