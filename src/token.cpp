#include "token.hpp"

#include "block_cache.hpp"
#include "entropy.hpp"
#include "per_thread.hpp"

#include <array>
#include <cstddef>
#include <cstring>
#include <utility>

namespace redlock::detail {

namespace {

constexpr std::size_t token_bytes = 20;
constexpr std::size_t token_chars = 2 * token_bytes;

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

// The storage of tokens that are gone, for the next ones made on this thread. A token is too long
// for std::string's inline buffer, so every acquire allocated one and every lease freed it again.
// Kept per thread (per_thread), as block_cache's blocks are, and likewise not under the
// sanitizers; once the thread ends, a token given back is freed as usual.
struct spare_tokens {
  static constexpr std::size_t most = 256;
  std::array<std::string, most> slots;  // [0, count) hold a token's storage, of token_chars
  std::size_t count = 0;
};

std::string spare_token_storage() {
  spare_tokens* const spares =
      block_cache_recycles ? per_thread<spare_tokens>::make_or_get() : nullptr;
  if (spares == nullptr || spares->count == 0) return std::string(token_chars, '\0');
  return std::move(spares->slots[--spares->count]);
}

}  // namespace

std::string make_lock_token() {
  unsigned char raw[token_bytes];
  lock_random_bytes(raw, token_bytes);
  std::string token = spare_token_storage();
  for (std::size_t i = 0; i < token_bytes; ++i)
    std::memcpy(token.data() + 2 * i, hex_pairs.data() + 2 * raw[i], 2);
  return token;
}

void recycle_lock_token(std::string&& token) noexcept {
  // Only a token's own storage: any other string would come back at its size.
  spare_tokens* const spares = per_thread<spare_tokens>::get();
  if (spares == nullptr || token.size() != token_chars || spares->count == spare_tokens::most)
    return;
  spares->slots[spares->count++] = std::move(token);
}

}  // namespace redlock::detail
