#ifndef REDLOCK_TOOLS_REDLOCK_JSON_LINE_HPP
#define REDLOCK_TOOLS_REDLOCK_JSON_LINE_HPP

// What --json prints: one flat JSON object per line (JSON Lines). Just enough JSON for that, so
// the tool needs no JSON library.

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace redlock::cli {

// Not a bool, which would print as 0 or 1: json_line::boolean says true or false.
template <class T>
concept json_integer = std::integral<T> && !std::same_as<T, bool>;

// `text` as a JSON string literal, quotes included. Resource names, tokens and node error texts
// come from outside, so any bytes may arrive: quotes, backslashes and control characters are
// escaped, and each ill-formed UTF-8 sequence (a maximal subpart, as Unicode recommends) becomes
// U+FFFD, so that the line is always valid JSON in valid UTF-8.
std::string json_string(std::string_view text);

// One object, its fields in the order they are added: `json_line().string("type", "node")
// .integer("index", 0).str()` gives {"type":"node","index":0}. Names are not checked for
// duplicates; the callers' names are fixed words.
class json_line {
 public:
  json_line& string(std::string_view name, std::string_view value);
  template <json_integer Integer>
  json_line& integer(std::string_view name, Integer value) {
    return field(name, std::to_string(value));
  }
  json_line& boolean(std::string_view name, bool value);
  json_line& null(std::string_view name);
  json_line& strings(std::string_view name, std::span<const std::string> values);
  json_line& integers(std::string_view name, std::span<const std::uint64_t> values);

  // The value, or null when there is none: the field is there either way, so that every object
  // of one kind has the same fields.
  json_line& optional_string(std::string_view name, const std::optional<std::string>& value);
  template <json_integer Integer>
  json_line& optional_integer(std::string_view name, const std::optional<Integer>& value) {
    return value ? integer(name, *value) : null(name);
  }

  // The object, without a line break.
  std::string str() const;

 private:
  json_line& field(std::string_view name, std::string_view json_value);

  std::string fields_;
};

}  // namespace redlock::cli

#endif
