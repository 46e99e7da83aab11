#ifndef REDLOCK_RESP_PEER_TEXT_HPP
#define REDLOCK_RESP_PEER_TEXT_HPP

// What the RESP parser reads and quotes of a peer's bytes: the strict number syntax of RESP
// lines, and bounded, printable excerpts for its error messages. Inline: the parser's hot path
// reads numbers through them.

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace redlock::resp::peer_text {

enum class int_status { ok, empty, bad, overflow };

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

inline bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

// Strict decimal int64: an optional sign ('+' only when allowed) followed by at least one digit
// and nothing else. std::from_chars alone would accept a leading '-' before nothing and stop
// quietly at junk, so both are checked here.
inline int_status parse_int64(std::string_view s, bool allow_plus, std::int64_t& out) noexcept {
  if (s.empty()) return int_status::empty;
  const char* first = s.data();
  const char* const last = first + s.size();
  const char* digits = first;
  if (*first == '-') {
    ++digits;
  } else if (allow_plus && *first == '+') {
    first = ++digits;  // std::from_chars takes no '+'
  }
  if (digits == last || !is_digit(*digits)) return int_status::bad;
  const auto [ptr, ec] = std::from_chars(first, last, out);
  if (ec == std::errc::result_out_of_range) return int_status::overflow;
  if (ec != std::errc{} || ptr != last) return int_status::bad;
  return int_status::ok;
}

inline bool parse_double(std::string_view s, double& out) noexcept {
  // RESP3 allows an explicit '+', which std::from_chars does not.
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && ptr == s.data() + s.size();
}

inline bool valid_big_number(std::string_view s) noexcept {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), is_digit);
}

}  // namespace redlock::resp::peer_text

#endif
