#ifndef REDLOCK_TEXT_HPP
#define REDLOCK_TEXT_HPP

#include "redlock/detail/quoted_resource.hpp"

#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace redlock::detail {

// Bytes as a message may quote them: printable ASCII as is, everything else (and `"`, `\`) as
// \xNN. At most `limit` input bytes are shown; a longer input ends in "... (N bytes)".
std::string printable(std::string_view bytes, std::size_t limit = std::string_view::npos);

// quoted_resource() (redlock/detail/quoted_resource.hpp, for the public templates that use it) cuts
// a name to its first 200 bytes so that a huge name cannot make every diagnostic as large.

// Keys as a message lists them: each quoted_resource(), separated by ", ".
std::string quoted_keys(std::initializer_list<std::string_view> keys);
std::string quoted_keys(std::span<const std::string> keys);
// A set of locks as messages name it: the set "a", "b".
std::string quoted_set(std::span<const std::string> resources);

}  // namespace redlock::detail

#endif
