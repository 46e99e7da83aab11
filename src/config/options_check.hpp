#ifndef REDLOCK_CONFIG_OPTIONS_CHECK_HPP
#define REDLOCK_CONFIG_OPTIONS_CHECK_HPP

#include "redlock/node_config.hpp"
#include "redlock/options.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

// The longest Unix socket path a socket address holds: sockaddr_un::sun_path is 108 bytes on Linux,
// the terminating zero included.
inline constexpr std::size_t longest_unix_path = 107;

// The most replicas node_config::wait_replicas may ask for. A master has a few replicas, rarely
// more than a dozen; a number no master has can never be reached, so every vote of that node would
// fail after node_timeout. Such a value is a typo (or counts something else) and is refused up
// front; 64 is far above any real replica set and still catches "wait_replicas=1000".
inline constexpr unsigned most_wait_replicas = 64;

// The most permits a semaphore may have: semaphore::max_permits, for the operations that check a
// count (client.cpp keeps the two equal).
inline constexpr std::size_t most_permits = 1024;

// "host[:port]" or "[IPv6]:port" taken apart, the way a node URL's host and a seed are written.
struct endpoint {
  std::string host;                   // without the brackets of an IPv6 address
  std::optional<std::uint16_t> port;  // empty when the text has none
  std::string problem;                // why the text is not of that form; empty when it is
  bool blank_in_port = false;         // the port holds whitespace: two addresses run together?
};

// Parses `text`. A host name takes letters, digits, '-', '.' and '_'; an IPv6 address must be in
// brackets, and `bracket_example` ("redis://[::1]:6379") shows how when it is not. The port is
// decimal, 1-65535. The problem reads like "port 0 is out of range 1-65535".
endpoint parse_endpoint(std::string_view text, std::string_view bracket_example);

// Why `seed` is not a seed as node_config::seeds holds it ("host:port", the port required), or an
// empty text.
std::string seed_problem(std::string_view seed);

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
