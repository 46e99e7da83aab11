#include "entropy.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <pthread.h>
#include <random>
#include <sys/random.h>
#include <system_error>
#include <unistd.h>

namespace redlock::detail {
namespace {

// Counts fork()s in this process's ancestry line, so that a child discards the random bytes it
// inherited. Asking getpid() for every token instead cost a system call per lock operation.
std::atomic<unsigned> forks_seen{0};

void on_fork_in_child() noexcept {
  forks_seen.fetch_add(1, std::memory_order_relaxed);
}

// The current fork generation; falls back to the process id if the fork handler could not be
// registered. (A child made by a raw clone() without glibc runs no fork handlers; posix_spawn's
// child execs before it could take a token.)
unsigned long fork_generation() {
  static const bool registered = ::pthread_atfork(nullptr, nullptr, on_fork_in_child) == 0;
  if (!registered) return static_cast<unsigned long>(::getpid());
  return forks_seen.load(std::memory_order_relaxed);
}

// A thread's buffer of kernel randomness, consumed front to back and refilled when spent: one
// getrandom call per ~200 tokens instead of one per token. Bytes are never reused, also not by a
// forked child, which inherits the buffer: a new fork generation discards it.
struct random_pool {
  std::array<unsigned char, 4096> bytes{};
  std::size_t used = bytes.size();
  unsigned long generation = ~0UL;

  const unsigned char* take(std::size_t n) {
    const unsigned long now = fork_generation();
    if (used + n > bytes.size() || generation != now) {
      generation = now;
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

void lock_random_bytes(unsigned char* out, std::size_t n) {
  thread_local random_pool pool;
  while (n > 0) {
    const std::size_t step = std::min(n, pool.bytes.size());
    std::memcpy(out, pool.take(step), step);
    out += step;
    n -= step;
  }
}

std::uint32_t lock_random_seed() {
  return std::random_device{}();
}

}  // namespace redlock::detail
