#include "resp/encoder.hpp"

#include <cassert>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace redlock::resp {

// The words' sizes and bytes as encode_words writes them (encoder.hpp).
using encoding::decimal_digits;
using encoding::put_header;
using span_word = encoding::word<std::string_view>;

std::size_t encoded_size(std::span<const std::string_view> args) noexcept {
  std::size_t size = 1 + decimal_digits(args.size()) + 2;
  for (const std::string_view arg : args)
    size += span_word::size(arg);
  return size;
}

char* write_command(char* out, std::span<const std::string_view> args) noexcept {
  char* p = put_header(out, '*', args.size());
  for (const std::string_view arg : args)
    p = span_word::put(p, arg);
  return p;
}

void encode_command(std::string& out, std::span<const std::string_view> args) {
  const std::size_t old_size = out.size();
  const std::size_t add = encoded_size(args);
  const std::size_t needed = old_size + add;
  // Callers append many commands to one pipeline buffer: grow geometrically, whatever the
  // standard library's reserve() policy, so appending stays amortized O(1) per byte.
  if (out.capacity() < needed)
    out.reserve(needed > 2 * out.capacity() ? needed : 2 * out.capacity());
  out.resize(needed);
  [[maybe_unused]] const char* end = write_command(out.data() + old_size, args);
  assert(end == out.data() + out.size());
}

}  // namespace redlock::resp
