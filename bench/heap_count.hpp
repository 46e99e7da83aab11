// How many times redlock_bench has allocated from the heap: heap_count.cpp replaces the global
// operator new of this program (and only this program: the library is not built with it) by one
// that counts each call before it calls malloc. The workloads read the count before and after
// their measured loop and report allocations per operation.
//
// Only operator new is counted (every std::string, container, shared state, coroutine frame and
// Asio handler of the library and the program); a direct malloc (OpenSSL's) is not.
#ifndef REDLOCK_BENCH_HEAP_COUNT_HPP
#define REDLOCK_BENCH_HEAP_COUNT_HPP

#include <cstdint>

namespace redlock::bench {

// Calls of operator new (every form) in this process so far, from every thread.
std::uint64_t heap_allocations() noexcept;

}  // namespace redlock::bench

#endif
