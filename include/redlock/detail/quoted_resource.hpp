#ifndef REDLOCK_DETAIL_QUOTED_RESOURCE_HPP
#define REDLOCK_DETAIL_QUOTED_RESOURCE_HPP

// Not part of the API: how the library's messages, and the inline templates of its headers, name
// a resource.

#include "redlock/config.hpp"

#include <string>
#include <string_view>

namespace redlock::detail {

// A resource name for messages: quoted, escaped, cut to its first 200 bytes.
REDLOCK_API std::string quoted_resource(std::string_view resource);

}  // namespace redlock::detail

#endif
