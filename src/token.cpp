#include "token.hpp"

#include "entropy.hpp"

#include <cstddef>

namespace redlock::detail {

std::string make_lock_token() {
  constexpr std::size_t token_bytes = 20;
  static constexpr char hex[] = "0123456789abcdef";
  unsigned char raw[token_bytes];
  lock_random_bytes(raw, token_bytes);
  std::string token(2 * token_bytes, '\0');
  for (std::size_t i = 0; i < token_bytes; ++i) {
    token[2 * i] = hex[raw[i] >> 4];
    token[2 * i + 1] = hex[raw[i] & 0x0f];
  }
  return token;
}

}  // namespace redlock::detail
