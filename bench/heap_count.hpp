// How many times redlock_bench has allocated from the heap: heap_count.cpp defines malloc and its
// kin in this program (and only this program: the library is not built with it), each counting
// the call before glibc's allocator serves it. Every allocation of the process is counted: the
// library's operator new, Asio's recycling allocator when its cache misses (it calls
// aligned_alloc), OpenSSL's. The workloads read the count before and after their measured loop
// and report allocations per operation.
#ifndef REDLOCK_BENCH_HEAP_COUNT_HPP
#define REDLOCK_BENCH_HEAP_COUNT_HPP

#include <cstdint>

namespace redlock::bench {

// Heap allocations (malloc, calloc, realloc, memalign, aligned_alloc, posix_memalign) in this
// process so far, from every thread.
std::uint64_t heap_allocations() noexcept;

}  // namespace redlock::bench

#endif
