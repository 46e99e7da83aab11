#ifndef REDLOCK_TOOLS_REDLOCK_CONNECT_WAIT_HPP
#define REDLOCK_TOOLS_REDLOCK_CONNECT_WAIT_HPP

// When the commands stop waiting for the connections to open (lock_steps.hpp): decided from one
// look at the nodes (client::async_inspect), without I/O.

#include "redlock/error.hpp"
#include "redlock/inspection.hpp"

namespace redlock::cli {

// Whether some node of `seen` may still answer if asked again: it failed only by being slow
// (request_timeout, node_unresponsive), as a node does while its first connect and handshake
// are still going. A node that answered, or failed otherwise (down and refusing connections,
// misconfigured), gives the same answer however long one waits; so does a look that ended as a
// whole (cancelled, a name the library refuses: `ec`).
bool still_connecting(error_code ec, const inspection& seen);

// Whether `open_connections` is done after a look that completed with `ec`: a quorum answered
// (no error), or no node is still connecting. A down node then fails the round that follows at
// once, as it would after any wait: `--wait 0` gives up at once, not after connect_timeout.
bool quorum_connected_or_settled(error_code ec, const inspection& seen);

}  // namespace redlock::cli

#endif
