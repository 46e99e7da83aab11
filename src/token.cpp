#include "token.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <system_error>

namespace redlock::detail {
namespace {

constexpr std::size_t token_bytes = 20;

// A thread's buffer of kernel randomness, consumed front to back and refilled when spent: one
// getrandom call per ~200 tokens instead of one per token. Bytes are never reused, also not by a
// forked child, which inherits the buffer: a new process id discards it.
struct random_pool {
  std::array<unsigned char, 4096> bytes{};
  std::size_t used = bytes.size();
  pid_t owner = 0;

  const unsigned char* take(std::size_t n) {
    if (used + n > bytes.size() || owner != ::getpid()) {
      owner = ::getpid();
      std::size_t filled = 0;
      while (filled < bytes.size()) {
        const auto got = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
        if (got < 0) {
          if (errno == EINTR) continue;
          throw std::system_error(errno, std::generic_category(), "redlock: getrandom");
        }
        filled += static_cast<std::size_t>(got);
      }
      used = 0;
    }
    const unsigned char* out = bytes.data() + used;
    used += n;
    return out;
  }
};

}  // namespace

std::string make_lock_token() {
  thread_local random_pool pool;
  static constexpr char hex[] = "0123456789abcdef";
  const unsigned char* raw = pool.take(token_bytes);
  std::string token(2 * token_bytes, '\0');
  for (std::size_t i = 0; i < token_bytes; ++i) {
    token[2 * i] = hex[raw[i] >> 4];
    token[2 * i + 1] = hex[raw[i] & 0x0f];
  }
  return token;
}

}  // namespace redlock::detail
