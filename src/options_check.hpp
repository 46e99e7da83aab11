#ifndef REDLOCK_OPTIONS_CHECK_HPP
#define REDLOCK_OPTIONS_CHECK_HPP

#include "redlock/node_config.hpp"
#include "redlock/options.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace redlock::detail {

// The longest Unix socket path a socket address holds: sockaddr_un::sun_path is 108 bytes on Linux,
// the terminating zero included.
inline constexpr std::size_t longest_unix_path = 107;

// Why a client cannot be built on `nodes` with `options`: an empty text when it can, else the
// reason without the "redlock: " prefix ("node_timeout must be positive").
std::string check_client_options(const std::vector<node_config>& nodes,
                                 const client_options& options);

// Why `resource` cannot be locked with `options` on a client with `client`: an empty text when it
// can, else the reason ("the resource name is empty").
std::string check_lock_options(const std::string& resource, const lock_options& options,
                               const client_options& client);

}  // namespace redlock::detail

#endif
