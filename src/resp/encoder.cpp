#include "resp/encoder.hpp"

#include <cassert>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace redlock::resp {
namespace {

constexpr std::size_t decimal_digits(std::size_t n) noexcept {
  std::size_t digits = 1;
  while (n >= 10) {
    n /= 10;
    ++digits;
  }
  return digits;
}

// Writes "<prefix><n>\r\n" at p; the caller has sized the buffer with encoded_size().
[[gnu::always_inline]] inline char* put_header(char* p, char prefix, std::size_t n) noexcept {
  *p++ = prefix;
  // A command's lengths are nearly all below 100 (its name, a key, a token, a SHA-1, a TTL): one
  // or two digits are written directly, saving to_chars' setup on every argument.
  if (n < 10) {
    *p++ = static_cast<char>('0' + n);
  } else if (n < 100) {
    *p++ = static_cast<char>('0' + n / 10);
    *p++ = static_cast<char>('0' + n % 10);
  } else {
    // 20 digits hold any 64-bit size; the buffer was sized for exactly decimal_digits(n).
    p = std::to_chars(p, p + 20, n).ptr;
  }
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

}  // namespace

std::size_t encoded_size(std::span<const std::string_view> args) noexcept {
  std::size_t size = 1 + decimal_digits(args.size()) + 2;
  for (const std::string_view arg : args)
    size += 1 + decimal_digits(arg.size()) + 2 + arg.size() + 2;
  return size;
}

char* write_command(char* out, std::span<const std::string_view> args) noexcept {
  char* p = put_header(out, '*', args.size());
  for (const std::string_view arg : args) {
    p = put_header(p, '$', arg.size());
    if (!arg.empty()) std::memcpy(p, arg.data(), arg.size());
    p += arg.size();
    *p++ = '\r';
    *p++ = '\n';
  }
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
