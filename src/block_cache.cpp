#include "block_cache.hpp"

#include "per_thread.hpp"

#include <array>
#include <cstdint>

namespace redlock::detail {

namespace {

// Steps of 8 bytes: a block is as large as malloc's own chunk for the object would be, so that a
// lease held for long costs no more memory than it did through malloc.
constexpr std::size_t step = 8;
constexpr std::size_t sizes = block_cache_largest / step;

// A cached block holds the next one of its size: the lists cost no memory of their own.
struct free_block {
  free_block* next;
};

// A thread's cache (per_thread: made on its first cached allocation, freed when the thread ends,
// after which a block given back goes straight to operator delete).
struct thread_cache {
  std::array<free_block*, sizes> heads{};
  std::array<std::uint16_t, sizes> counts{};
  std::size_t bytes = 0;

  thread_cache() = default;
  thread_cache(const thread_cache&) = delete;
  thread_cache& operator=(const thread_cache&) = delete;
  ~thread_cache() {
    for (free_block* head : heads) {
      while (free_block* block = head) {
        head = block->next;
        ::operator delete(block);
      }
    }
  }
};

// The size class of `bytes`, or `sizes` when it is too large to be kept.
std::size_t size_class(std::size_t bytes) noexcept {
  return bytes == 0 || bytes > block_cache_largest ? sizes : (bytes - 1) / step;
}

}  // namespace

void* cached_allocate(std::size_t bytes) {
  const std::size_t index = size_class(bytes);
  if (!block_cache_recycles || index == sizes) return ::operator new(bytes);
  if (thread_cache* cache = per_thread<thread_cache>::make_or_get()) {
    if (free_block* block = cache->heads[index]) {
      cache->heads[index] = block->next;
      --cache->counts[index];
      cache->bytes -= (index + 1) * step;
      return block;
    }
  }
  // The whole size class, so that the block may serve any request of that class later.
  return ::operator new((index + 1) * step);
}

void cached_deallocate(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  const std::size_t index = size_class(bytes);
  const std::size_t block_bytes = (index + 1) * step;
  thread_cache* const cache = per_thread<thread_cache>::get();
  if (!block_cache_recycles || index == sizes || cache == nullptr ||
      cache->counts[index] == block_cache_depth ||
      cache->bytes + block_bytes > block_cache_capacity) {
    ::operator delete(block);
    return;
  }
  cache->heads[index] = new (block) free_block{cache->heads[index]};
  ++cache->counts[index];
  cache->bytes += block_bytes;
}

}  // namespace redlock::detail
