#ifndef REDLOCK_ENTROPY_HPP
#define REDLOCK_ENTROPY_HPP

// Where the library's randomness comes from: the bytes of lock tokens, and the seeds of every
// pseudo-random sequence it draws (the jitter of retries and of reconnect delays). Nothing else in
// the library asks the system for randomness, so that a build which links its own definitions of
// these two functions instead of entropy.cpp's (a simulation, where a seed decides a whole run)
// makes every choice of the library reproducible.

#include <cstddef>
#include <cstdint>

namespace redlock::detail {

// `n` bytes from the kernel's CSPRNG (getrandom), never handed out twice, also not to a forked
// child. Throws std::system_error if the kernel refuses (never on Linux >= 3.17 once its pool is
// initialised).
void lock_random_bytes(unsigned char* out, std::size_t n);

// A seed for a pseudo-random sequence (std::random_device).
std::uint32_t lock_random_seed();

}  // namespace redlock::detail

#endif
