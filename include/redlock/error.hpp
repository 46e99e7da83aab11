#ifndef REDLOCK_ERROR_HPP
#define REDLOCK_ERROR_HPP

#include "redlock/config.hpp"

#include <boost/system/error_code.hpp>

#include <type_traits>

namespace redlock {

/// The error code of every completion: boost::system::error_code.
using error_code = boost::system::error_code;

/// Errors of the "redlock" category. Failures of the transport itself (connection refused, reset,
/// host not found) keep their boost::asio / system error codes; the values below name what the
/// library decided. Every operation that fails with one of them also has a message naming the node
/// or the cause where one applies (see each operation's documentation).
///
/// @see The guide: @ref md_docs_errors.
enum class error {
  // Lock-level outcomes.
  invalid_argument = 1,  ///< bad input: empty resource, ttl <= 0, no nodes, duplicate nodes, ...
  no_quorum,             ///< too few nodes answered for a majority decision
  /// held: by other owners on too many nodes for a majority, or by
  /// another lease of this very client
  contended,
  validity_expired,  ///< a quorum granted it, but too late: no validity left
  wait_timeout,      ///< lock_options::wait elapsed before the lock was acquired
  lock_lost,         ///< a held lease could not be kept (renewal failed, key gone or foreign)
  not_held,          ///< release/extend of a lease that is no longer ours
  // Node-level outcomes.
  /// the server sent bytes that are not valid RESP, or exceed a parser limit, or a reply (not an
  /// error) of a shape the command sent cannot have: a server running other scripts, a proxy that
  /// pairs replies with the wrong requests
  protocol_error,
  server_error,       ///< the server answered with an error reply where none was expected
  not_connected,      ///< the node is down and reconnecting; the request was not sent
  connection_lost,    ///< the connection broke while the request waited for its reply
  request_timeout,    ///< the request's own deadline passed before its reply arrived
  connect_timeout,    ///< connecting (TCP connect + handshake) took longer than connect_timeout
  auth_failed,        ///< AUTH was refused (WRONGPASS), or the server requires it (NOAUTH)
  select_failed,      ///< SELECT of the configured database was refused (e.g. index out of range)
  node_unresponsive,  ///< a request to the node timed out and is still unanswered; not sent
  permission_denied,  ///< the node's ACL user may not run a command the lock needs (NOPERM)
  /// TLS (rediss://) could not be set up: unreadable CA, certificate or key files, a server that
  /// does not speak TLS, a TLS alert (e.g.\ the server requires a client certificate).
  tls_handshake_failed,
  certificate_rejected,  ///< the server's certificate failed verification: CA, name, expiry
  /// The server is not of the kind its URL names: a cluster node given as `redis://` (MOVED, ASK),
  /// a sentinel as `redis://` or `redis+cluster://`, a plain server as `redis+sentinel://`, or
  /// sentinels that know no master named `master=`. The message names the URL (or name) to use.
  wrong_node_kind,
};

/// Conditions that group the codes above (and others) by what a caller can do about them.
/// Compare with ==: `if (ec == redlock::condition::node_failure)`.
enum class condition {
  /// A node is set up so that the lock cannot work with it, and retrying will not change that until
  /// someone fixes the configuration: error::auth_failed, select_failed, permission_denied,
  /// protocol_error (the server does not speak RESP, sent what the client refuses to parse, or
  /// answered a lock script with a reply it cannot give),
  /// tls_handshake_failed, certificate_rejected and wrong_node_kind.
  /// An acquire fails with one of these at once, without retrying, when such nodes alone make a
  /// quorum impossible; the message names them.
  node_failure = 1,
  /// The lock was not acquired, and trying again later may succeed: error::contended (someone
  /// else holds it), no_quorum (too few nodes answered), validity_expired (granted too late to be
  /// of use) and wait_timeout (lock_options::wait elapsed). Not cancellation, invalid arguments or
  /// node failures, which retrying does not cure.
  not_acquired,
};

/// The category of the error codes: its name() is "redlock".
REDLOCK_API const boost::system::error_category& error_category() noexcept;

/// The error_code of `e`, in error_category(); lets an error convert to an error_code.
inline boost::system::error_code make_error_code(error e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// The category of the conditions: its name() is "redlock.condition".
REDLOCK_API const boost::system::error_category& condition_category() noexcept;

/// The error_condition of `c`, in condition_category(); lets an error_code compare with it.
inline boost::system::error_condition make_error_condition(condition c) noexcept {
  return {static_cast<int>(c), condition_category()};
}

}  // namespace redlock

/// @cond
template <>
struct boost::system::is_error_code_enum<redlock::error> : std::true_type {};

template <>
struct boost::system::is_error_condition_enum<redlock::condition> : std::true_type {};
/// @endcond

#endif
