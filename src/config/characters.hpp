#ifndef REDLOCK_CONFIG_CHARACTERS_HPP
#define REDLOCK_CONFIG_CHARACTERS_HPP

#include <string_view>

namespace redlock::detail {

// The character classes the configuration checks share (node URLs, their query parameters, and
// the options check), ASCII only and independent of the locale.

inline constexpr std::string_view whitespace = " \t\r\n\v\f";

inline bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

inline bool all_digits(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_digit(c)) return false;
  }
  return true;
}

// RFC 3986 reg-name characters that make sense in a host name; anything else (spaces, '%', ',',
// a stray ']') is almost certainly a typo and would only fail later in the resolver.
inline bool is_host_char(char c) noexcept {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '.' ||
         c == '_';
}

}  // namespace redlock::detail

#endif
