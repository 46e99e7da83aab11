#ifndef REDLOCK_NET_SHA1_HPP
#define REDLOCK_NET_SHA1_HPP

#include <string>
#include <string_view>

namespace redlock::detail {

// Lower-case hex SHA-1 of `data` (40 characters): the name Redis gives a script for EVALSHA.
std::string sha1_hex(std::string_view data);

}  // namespace redlock::detail

#endif
