#include "resp/value.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace redlock::resp {
namespace {

// Debug renderings stay one line and of bounded size even for a 64 MiB bulk or a 1M-element
// array: the point is a readable log line, not a lossless dump.
constexpr std::size_t k_max_debug_string = 256;
constexpr std::size_t k_max_debug_elements = 64;

void append_quoted(std::string& out, std::string_view s) {
  static constexpr char k_hex[] = "0123456789abcdef";
  out += '"';
  const std::size_t shown = s.size() < k_max_debug_string ? s.size() : k_max_debug_string;
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += "\\x";
          out += k_hex[c >> 4];
          out += k_hex[c & 0x0f];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  if (shown < s.size()) {
    out += "...(";
    out += std::to_string(s.size());
    out += " bytes)";
  }
}

void append_elements(std::string& out, const value& v, char open, char close, bool pairs) {
  out += open;
  const std::size_t n = v.elements.size();
  const std::size_t shown = n < k_max_debug_elements ? n : k_max_debug_elements;
  for (std::size_t i = 0; i < shown; ++i) {
    if (i != 0) out += (pairs && i % 2 == 1) ? ": " : ", ";
    // Recursion depth is that of the value, which the parser bounds by parser_limits::max_depth.
    out += to_debug_string(v.elements[i]);
  }
  if (shown < n) {
    out += ", ...(";
    out += std::to_string(n - shown);
    out += " more)";
  }
  out += close;
}

}  // namespace

std::string_view to_string(type t) noexcept {
  switch (t) {
    case type::simple_string:
      return "simple_string";
    case type::simple_error:
      return "simple_error";
    case type::integer:
      return "integer";
    case type::bulk_string:
      return "bulk_string";
    case type::null:
      return "null";
    case type::array:
      return "array";
    case type::map:
      return "map";
    case type::set:
      return "set";
    case type::push:
      return "push";
    case type::double_number:
      return "double_number";
    case type::boolean:
      return "boolean";
    case type::big_number:
      return "big_number";
    case type::verbatim_string:
      return "verbatim_string";
    case type::blob_error:
      return "blob_error";
  }
  return "unknown";
}

std::string_view value::error_code_word() const noexcept {
  if (!is_error()) return {};
  const std::string_view s = text;
  std::size_t n = 0;
  while (n < s.size() && s[n] != ' ')
    ++n;
  if (n == 0 || s[0] < 'A' || s[0] > 'Z') return {};
  // Only an all-caps word is a code: "-Error: something" carries no code word.
  for (std::size_t i = 1; i < n; ++i) {
    const char c = s[i];
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return {};
  }
  return s.substr(0, n);
}

std::string to_debug_string(const value& v) {
  std::string out;
  switch (v.kind) {
    case type::simple_string:
      append_quoted(out, v.text);
      break;
    case type::bulk_string:
      out += '$';
      append_quoted(out, v.text);
      break;
    case type::verbatim_string:
      out += "(verbatim ";
      out += v.format;
      out += ") ";
      append_quoted(out, v.text);
      break;
    case type::simple_error:
      out += "(error) ";
      append_quoted(out, v.text);
      break;
    case type::blob_error:
      out += "(blob error) ";
      append_quoted(out, v.text);
      break;
    case type::integer:
      out += "(integer) ";
      out += std::to_string(v.integer);
      break;
    case type::null:
      out += "(nil)";
      break;
    case type::double_number:
      out += "(double) ";
      out += v.text;
      break;
    case type::boolean:
      out += v.integer != 0 ? "(true)" : "(false)";
      break;
    case type::big_number:
      out += "(big number) ";
      out += v.text;
      break;
    case type::array:
      append_elements(out, v, '[', ']', false);
      break;
    case type::map:
      append_elements(out, v, '{', '}', true);
      break;
    case type::set:
      out += '~';
      append_elements(out, v, '{', '}', false);
      break;
    case type::push:
      out += '>';
      append_elements(out, v, '[', ']', false);
      break;
  }
  return out;
}

}  // namespace redlock::resp
