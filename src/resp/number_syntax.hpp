#ifndef REDLOCK_RESP_NUMBER_SYNTAX_HPP
#define REDLOCK_RESP_NUMBER_SYNTAX_HPP

// The strict number syntax of RESP lines, for the parser alone: inline, so that the compiler
// weighs them against the parser's hot path.

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string_view>
#include <system_error>

namespace redlock::resp::number_syntax {

enum class int_status { ok, empty, bad, overflow };

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

}  // namespace redlock::resp::number_syntax

#endif
