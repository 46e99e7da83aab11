#ifndef REDLOCK_LOCK_TRANSPORT_CHOICE_HPP
#define REDLOCK_LOCK_TRANSPORT_CHOICE_HPP

// The byte stream under every connection of the library, as built by default: sockets (TCP, TLS
// over TCP, Unix-domain; net/transport.hpp). Chosen at build time as the clock is (clock.hpp): a
// build that puts a folder with its own lock_transport_choice.hpp before src/ on the include path
// runs the unchanged connections over its own streams (test/sim/seam/: a simulated network).
//
// A lock_transport does for a connection what net/transport.hpp's class does, with its interface:
// made from an executor and a node_config; connect (an awaitable, cancellable through its
// cancellation slot); write_now (what the stream takes without waiting, or would_block);
// async_write / async_read_some with any completion token; close, is_open,
// peer, verified_name, stage_text, describe; and the static tls_reason, is_tls_error and
// is_tls_protocol_error.

#include "net/transport.hpp"

namespace redlock::detail {

using lock_transport = transport;

}  // namespace redlock::detail

#endif
