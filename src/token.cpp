#include "token.hpp"

#include "entropy.hpp"

#include <array>
#include <cstddef>
#include <cstring>

namespace redlock::detail {

namespace {

// Each byte's two hexadecimal digits, written with one copy instead of two table lookups.
constexpr std::array<char, 512> hex_pairs = [] {
  constexpr char digits[] = "0123456789abcdef";
  std::array<char, 512> pairs{};
  for (std::size_t byte = 0; byte < 256; ++byte) {
    pairs[2 * byte] = digits[byte >> 4];
    pairs[2 * byte + 1] = digits[byte & 0x0f];
  }
  return pairs;
}();

}  // namespace

std::string make_lock_token() {
  constexpr std::size_t token_bytes = 20;
  unsigned char raw[token_bytes];
  lock_random_bytes(raw, token_bytes);
  std::string token(2 * token_bytes, '\0');
  for (std::size_t i = 0; i < token_bytes; ++i)
    std::memcpy(token.data() + 2 * i, hex_pairs.data() + 2 * raw[i], 2);
  return token;
}

}  // namespace redlock::detail
