#ifndef REDLOCK_RESP_VALUE_HPP
#define REDLOCK_RESP_VALUE_HPP

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::resp {

// The RESP2/RESP3 reply kinds. Attributes (`|`) are consumed by the parser and never surface.
enum class type : std::uint8_t {
  simple_string,    // +
  simple_error,     // -
  integer,          // :
  bulk_string,      // $
  null,             // _  and the RESP2 nulls $-1 / *-1
  array,            // *
  map,              // %  (elements hold key, value, key, value, ...)
  set,              // ~
  push,             // >  (out-of-band; never paired with a request)
  double_number,    // ,  (text kept in `text`, parsed value in `number`)
  boolean,          // #
  big_number,       // (  (digits kept in `text`)
  verbatim_string,  // =  (`text` holds the payload without the "txt:" prefix, `format` the prefix)
  blob_error,       // !
};

std::string_view to_string(type t) noexcept;

// One complete reply. A plain tree: aggregates own their elements.
struct value {
  type kind = type::null;
  std::string text;             // strings, errors, big numbers, doubles (as sent)
  std::string format;           // verbatim strings only: the three-letter format ("txt", "mkd")
  std::int64_t integer = 0;     // integers; booleans as 0/1
  double number = 0.0;          // doubles
  std::vector<value> elements;  // array, map (flattened pairs), set, push

  bool is_error() const noexcept { return kind == type::simple_error || kind == type::blob_error; }
  bool is_null() const noexcept { return kind == type::null; }
  bool is_string() const noexcept {
    return kind == type::simple_string || kind == type::bulk_string ||
           kind == type::verbatim_string;
  }
  bool is_aggregate() const noexcept {
    return kind == type::array || kind == type::map || kind == type::set || kind == type::push;
  }

  // Redis error replies start with an upper-case code word ("NOSCRIPT", "WRONGPASS", "ERR").
  // Returns it, or an empty view when this is not an error reply.
  std::string_view error_code_word() const noexcept;

  friend bool operator==(const value&, const value&) = default;
};

// A human-readable one-line rendering, for logs and test diagnostics.
std::string to_debug_string(const value& v);

}  // namespace redlock::resp

#endif
