// The counting heap of redlock_bench (see heap_count.hpp): this program defines the C allocation
// functions itself, so that every allocation of the process (the library's operator new, Asio's
// aligned recycling allocator, OpenSSL's and the C library's own) is counted before glibc's
// allocator (its __libc_* entry points) serves it. free and the other releases are not replaced:
// glibc's free releases what the __libc_* functions allocated.

#include "heap_count.hpp"

#include <atomic>
#include <cerrno>
#include <cstddef>

extern "C" {
void* __libc_malloc(std::size_t size);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* p, std::size_t size);
void* __libc_memalign(std::size_t alignment, std::size_t size);
}

namespace {

// Relaxed: the workloads read it on the thread that allocated, after the work they measure.
std::atomic<std::uint64_t> allocations{0};

void count() noexcept {
  allocations.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

namespace redlock::bench {

std::uint64_t heap_allocations() noexcept {
  return allocations.load(std::memory_order_relaxed);
}

}  // namespace redlock::bench

extern "C" {

void* malloc(std::size_t size) noexcept {
  count();
  return __libc_malloc(size);
}

void* calloc(std::size_t count_of, std::size_t size) noexcept {
  count();
  return __libc_calloc(count_of, size);
}

// A resize counts as an allocation; a realloc(p, 0) that frees does too (rare, and never in the
// measured loops).
void* realloc(void* p, std::size_t size) noexcept {
  count();
  return __libc_realloc(p, size);
}

void* memalign(std::size_t alignment, std::size_t size) noexcept {
  count();
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
  count();
  return __libc_memalign(alignment, size);
}

int posix_memalign(void** out, std::size_t alignment, std::size_t size) noexcept {
  // What glibc requires of the alignment: a power of two and a multiple of sizeof(void*).
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  count();
  void* p = __libc_memalign(alignment, size);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

}  // extern "C"
