// The counting replacement of the global allocation functions (see heap_count.hpp). The array,
// nothrow and sized forms are left to the standard library, whose versions call these.

#include "heap_count.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

// Relaxed: the workloads read it on the thread that allocated, after the work they measure.
std::atomic<std::uint64_t> allocations{0};

void* counted_allocation(std::size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}

void* counted_aligned_allocation(std::size_t size, std::align_val_t alignment) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  const auto align = static_cast<std::size_t>(alignment);
  // aligned_alloc wants a size that is a multiple of the alignment.
  const std::size_t rounded = (size + align - 1) / align * align;
  return std::aligned_alloc(align, rounded == 0 ? align : rounded);
}

}  // namespace

namespace redlock::bench {

std::uint64_t heap_allocations() noexcept {
  return allocations.load(std::memory_order_relaxed);
}

}  // namespace redlock::bench

void* operator new(std::size_t size) {
  if (void* p = counted_allocation(size)) return p;
  throw std::bad_alloc();
}

void* operator new(std::size_t size, std::align_val_t alignment) {
  if (void* p = counted_aligned_allocation(size, alignment)) return p;
  throw std::bad_alloc();
}

void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
