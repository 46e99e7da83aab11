#ifndef REDLOCK_RESP_PEER_TEXT_HPP
#define REDLOCK_RESP_PEER_TEXT_HPP

// How the RESP parser quotes a peer's bytes in its error messages: bounded, printable excerpts,
// and the words for the types. Inline: g++ 12 reports a false -Warray-bounds in
// parser::parse_element when they are out of line.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace redlock::resp::peer_text {

namespace detail {

// Peer bytes quoted in an error message are cut to this many.
inline constexpr std::size_t k_max_excerpt = 32;

inline constexpr char k_hex[] = "0123456789abcdef";

}  // namespace detail

inline std::string hex_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  std::string s = "0x";
  s += detail::k_hex[u >> 4];
  s += detail::k_hex[u & 0x0f];
  return s;
}

// Peer bytes as a quoted, printable, bounded excerpt for an error message.
inline std::string excerpt(std::string_view s) {
  std::string out = "'";
  const std::size_t shown = std::min(s.size(), detail::k_max_excerpt);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\') {
      out += "\\x";
      out += detail::k_hex[c >> 4];
      out += detail::k_hex[c & 0x0f];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += shown < s.size() ? "'..." : "'";
  return out;
}

inline std::string num(std::uint64_t n) {
  return std::to_string(n);
}

// The word naming a sized type in error messages ("bulk length ... exceeds limit ...").
inline const char* size_word(char type_byte) noexcept {
  switch (type_byte) {
    case '$':
      return "bulk";
    case '=':
      return "verbatim";
    case '!':
      return "blob error";
    case '*':
      return "array";
    case '%':
      return "map";
    case '~':
      return "set";
    case '>':
      return "push";
    case '|':
      return "attribute";
    default:
      return "unknown";
  }
}

}  // namespace redlock::resp::peer_text

#endif
