#ifndef REDLOCK_TOKEN_HPP
#define REDLOCK_TOKEN_HPP

#include <string>

namespace redlock::detail {

// 160 random bits (lock_random_bytes: the kernel's CSPRNG), as 40 lower-case hex digits. Each call
// returns fresh bytes; none is ever handed out twice. Throws std::system_error if the kernel
// refuses (never happens on Linux >= 3.17 once the pool is initialised).
std::string make_lock_token();

}  // namespace redlock::detail

#endif
