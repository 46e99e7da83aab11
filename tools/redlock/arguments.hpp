#ifndef REDLOCK_TOOLS_REDLOCK_ARGUMENTS_HPP
#define REDLOCK_TOOLS_REDLOCK_ARGUMENTS_HPP

// The redlock command line, parsed without side effects: no I/O, no environment lookups (the
// caller passes REDLOCK_NODES in), so every rule here is unit-tested on its own.

#include "exit_codes.hpp"
#include "redlock/node_config.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace redlock::cli {

inline constexpr std::string_view nodes_variable = "REDLOCK_NODES";
inline constexpr std::string_view default_nodes = "redis://127.0.0.1:6379";

inline constexpr std::chrono::milliseconds default_ttl{30000};
inline constexpr std::chrono::milliseconds default_wait{10000};
inline constexpr std::chrono::milliseconds default_grace{5000};
inline constexpr std::chrono::milliseconds default_status_timeout{1000};

// Shorter TTLs leave renewal (at half the TTL, each request allowed 100 ms) no room to succeed;
// and a lock that nobody renews (acquire, extend) would end about as soon as a script's next step
// began.
inline constexpr std::chrono::milliseconds min_ttl{500};
// Keeps every arithmetic on durations far from overflow; nobody means a lock wait of weeks.
inline constexpr std::chrono::milliseconds max_duration{7LL * 24 * 3600 * 1000};

// --permits N: a semaphore of 1 .. max_permits permits (redlock::semaphore::max_permits, which
// run_command.cpp checks this against; kept here so that parsing needs no client headers).
inline constexpr std::size_t max_permits = 1024;

// run RESOURCE...: at most max_run_resources of them, the library's bound on a set of locks
// (client::async_acquire_all; run_command.cpp checks that the two agree).
inline constexpr std::size_t max_run_resources = 64;

// The command line cannot be run as written. what() is one line naming the culprit (the flag, the
// URL part, the duration) without the "redlock: " prefix; the tool prints it and exits 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "500ms", "30s", "2m", "1h", or a bare number of seconds; a decimal point is allowed ("1.5s",
// "0.25"). The result must be a whole number of milliseconds, at least 1 ms (or zero, when
// `zero_allowed`: "0", "0s", "0.0ms") and at most max_duration. Throws std::invalid_argument
// saying what is wrong with `text`.
std::chrono::milliseconds parse_duration(std::string_view text, bool zero_allowed = false);

// Comma-separated redis:// URLs (node_config::from_url_list). `source` says where the list came
// from ("--nodes", "REDLOCK_NODES") and starts every message. Throws usage_error for an empty list
// or entry, a bad URL (with from_url's reason) or the same host:port twice.
std::vector<node_config> parse_node_list(std::string_view list, std::string_view source);

// --tls-ca FILE, --tls-cert FILE, --tls-key FILE, --tls-server-name NAME and --tls-insecure, as
// given: applied by apply_tls_flags to every rediss:// node of the list.
struct tls_flags {
  std::optional<std::string> ca_file;
  std::optional<std::string> cert_file;
  std::optional<std::string> key_file;
  std::optional<std::string> server_name;
  bool insecure = false;

  bool any() const noexcept { return ca_file || cert_file || key_file || server_name || insecure; }
};

// Sets what the flags give on every TLS node; what a node's URL sets itself (?ca=, ?sni=, ...)
// stays, being the more specific. --tls-insecure turns verification off on every TLS node. Throws
// usage_error when a flag is given but no node is rediss://, or --tls-cert without --tls-key (or
// the reverse).
void apply_tls_flags(const tls_flags& flags, std::vector<node_config>& nodes);

// What `run` and `acquire` share: how the lock is taken, and how its outcome is told.
struct lock_request {
  std::vector<node_config> nodes;
  std::string resource;
  std::chrono::milliseconds ttl = default_ttl;
  // Zero: exactly one acquire round, no retry (flock -n).
  std::chrono::milliseconds wait = default_wait;
  // The exit code when the lock is held elsewhere or --wait ran out (flock -E).
  int conflict_exit_code = exit_code::not_acquired;
  bool quiet = false;
  // --json: what the command tells is said in JSON objects, one per line (JSON Lines), for scripts.
  bool json = false;
  // lock_options::fencing: the lease gets a fencing token, passed on to COMMAND or printed.
  bool fencing = false;
};

// Which side of a read-write lock `redlock run` takes (--read, --write).
enum class rw_side : std::uint8_t { read, write };

struct run_options : lock_request {
  // Zero: a COMMAND that must be stopped gets SIGKILL at once, without SIGTERM first.
  std::chrono::milliseconds grace = default_grace;
  // --permits N: `resource` names a redlock::semaphore of N permits, and one of them is taken
  // instead of the lock. Unset: the lock `resource`.
  std::optional<std::size_t> permits;
  // --read / --write: `resource` names a redlock::rw_lock, taken for reading (shared with other
  // readers) or for writing. Unset: the lock `resource`.
  std::optional<rw_side> side;
  // Every RESOURCE given, in the given order, each once (never empty). Several: one lease over
  // all of them (client::async_acquire_all), and `resource` is what the lines call them ("a, b
  // and c"); neither --permits nor --read/--write then.
  std::vector<std::string> resources;
  std::vector<std::string> command;  // never empty
};

// `redlock acquire`: the lock taken as `run` takes it, then left to expire with its TTL unless a
// later `extend` or `release` with its token comes first.
struct acquire_options : lock_request {};

// `redlock extend`: the lock `resource` held by `token`, given a new TTL.
struct extend_options {
  std::vector<node_config> nodes;
  std::string resource;
  std::string token;  // never empty
  std::chrono::milliseconds ttl{};
  bool quiet = false;  // no line on success (errors are still printed)
  bool json = false;   // one JSON object on stdout instead of the line on stderr
};

// `redlock release`: the lock `resource` held by `token`, or with `force` by whoever holds it.
struct release_options {
  std::vector<node_config> nodes;
  std::string resource;
  std::string token;   // empty exactly when `force`
  bool force = false;  // every holder found on the nodes, each released by its token
  bool yes = false;    // with `force`: no question asked
  bool quiet = false;
  bool json = false;
};

struct status_options {
  std::vector<node_config> nodes;
  std::chrono::milliseconds timeout = default_status_timeout;  // per node, connect included
  std::optional<std::size_t> permits;  // as run_options::permits: show every slot of a semaphore
  // --read / --write (either: both show the whole lock): `resource` names a redlock::rw_lock,
  // shown with its writer, readers and waiting writer's marks.
  std::optional<rw_side> side;
  bool json = false;  // --json: JSON objects on stdout instead of text lines
  // RESOURCE (or NAME with --permits, --read, --write); with several, what the lines call them
  // all ("a, b and c").
  std::string resource;
  // Every RESOURCE given, in the given order, each once (never empty). Several: each is shown as
  // a lock, then the set of them (as `run` takes several RESOURCEs, as one lease).
  std::vector<std::string> resources;
};

// --help, -h or "help [COMMAND]": topic is "" for the whole tool, else the command's name.
struct help_request {
  std::string topic;
};

struct version_request {};

using invocation = std::variant<help_request, version_request, run_options, status_options,
                                acquire_options, extend_options, release_options>;

// `args` are argv[1..]. `env_nodes` is REDLOCK_NODES if set (an empty value counts as unset);
// --nodes wins over it and default_nodes applies when neither is given. Throws usage_error.
invocation parse_command_line(std::span<const std::string> args,
                              std::optional<std::string_view> env_nodes);

}  // namespace redlock::cli

#endif
