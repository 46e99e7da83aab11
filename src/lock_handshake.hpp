#ifndef REDLOCK_LOCK_HANDSHAKE_HPP
#define REDLOCK_LOCK_HANDSHAKE_HPP

#include "net/connection_options.hpp"

namespace redlock::detail {

// Sets up a connection's handshake as a client's: loads the scripts, and checks that the ACL user
// may run every command the lock sends (connection_options::permission_probes), so that a node
// that could grant a lock but not release it fails at connect with error::permission_denied.
void prepare_for_lock(connection_options& settings);

}  // namespace redlock::detail

#endif
