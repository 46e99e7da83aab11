#ifndef REDLOCK_TOKEN_HPP
#define REDLOCK_TOKEN_HPP

#include <string>

namespace redlock::detail {

// 160 random bits (lock_random_bytes: the kernel's CSPRNG), as 40 lower-case hex digits. Each call
// returns fresh bytes; none is ever handed out twice. Throws std::system_error if the kernel
// refuses (never happens on Linux >= 3.17 once the pool is initialised).
std::string make_lock_token();

// A token that is no longer needed (its lease is gone, or a later round replaced it): its storage
// serves a later make_lock_token on this thread, which then allocates nothing. `token` is left
// empty or as it was.
void recycle_lock_token(std::string&& token) noexcept;

}  // namespace redlock::detail

#endif
