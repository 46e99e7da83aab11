#ifndef REDLOCK_SRC_BLOCK_CACHE_HPP
#define REDLOCK_SRC_BLOCK_CACHE_HPP

#include <cstddef>
#include <new>

namespace redlock::detail {

// The memory of the objects every lock operation makes and drops (an acquire's driver, a lease's
// state, a release, a posted completion), kept per thread for the next operation instead of going
// back to malloc. With hundreds of operations in flight glibc's own per-thread cache (seven blocks
// of each size up to 1 KB) runs dry, and an acquire's driver (2.4 KB) is beyond it anyway: each of
// these blocks then took a trip through malloc's bins, a tenth of the client's instructions per
// acquire + release.
//
// Blocks are sorted by size in steps of 8 bytes up to block_cache_largest; a thread keeps at most
// block_cache_depth blocks of each size and block_cache_capacity bytes in all, and frees what is
// beyond: enough for a few hundred operations in flight, which complete in bursts. A block may be
// freed on another thread than the one that took it: it then joins that thread's cache. A thread's
// cache is freed when the thread ends; after that, the thread allocates and frees as usual. Built
// with AddressSanitizer or ThreadSanitizer, every block goes to malloc, which they watch.
inline constexpr std::size_t block_cache_largest = 4096;
inline constexpr std::size_t block_cache_depth = 256;
inline constexpr std::size_t block_cache_capacity = 1024 * 1024;

// Whether blocks are recycled at all: not under the sanitizers, which watch malloc and free.
// AddressSanitizer catches a use after free, which a recycled block would hide; ThreadSanitizer
// orders a block's uses on two threads, which it cannot see through a block that another
// thread's cache hands out again.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool block_cache_recycles = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool block_cache_recycles = false;
#else
inline constexpr bool block_cache_recycles = true;
#endif
#else
inline constexpr bool block_cache_recycles = true;
#endif

// `bytes` of memory aligned for any scalar type; throws std::bad_alloc.
void* cached_allocate(std::size_t bytes);
// Gives back memory from cached_allocate(bytes).
void cached_deallocate(void* block, std::size_t bytes) noexcept;

// An allocator over the cache, for std::allocate_shared and for Asio's handler allocation
// (bind_allocator). Stateless: every instance is interchangeable.
template <class T>
struct cached_allocator {
  using value_type = T;

  cached_allocator() noexcept = default;
  template <class U>
  cached_allocator(const cached_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                  "the cache hands out blocks aligned as operator new's");
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(cached_allocate(n * sizeof(T)));
  }
  void deallocate(T* block, std::size_t n) noexcept { cached_deallocate(block, n * sizeof(T)); }

  template <class U>
  bool operator==(const cached_allocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace redlock::detail

#endif
