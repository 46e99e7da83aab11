#ifndef REDLOCK_REDLOCK_HPP
#define REDLOCK_REDLOCK_HPP

// Umbrella header: the whole public API of redlock-asio.

#include "redlock/client.hpp"
#include "redlock/error.hpp"
#include "redlock/inspection.hpp"
#include "redlock/lease.hpp"
#include "redlock/mutex.hpp"
#include "redlock/node_config.hpp"
#include "redlock/observer.hpp"
#include "redlock/options.hpp"
#include "redlock/rw_lock.hpp"
#include "redlock/semaphore.hpp"
#include "redlock/version.hpp"
#include "redlock/with_lock.hpp"

/// @namespace redlock
/// A distributed lock over N independent Redis masters (the Redlock algorithm), for Boost.Asio.
///
/// A redlock::client holds a connection to each node; its acquires give a redlock::lease, which
/// renews itself, reports its loss and releases with a token-checked script. On top of it:
/// redlock::with_lock, redlock::mutex, redlock::semaphore, redlock::rw_lock, and sets of locks
/// (redlock::client::async_acquire_all). The guide (docs/index.md) explains each; the umbrella
/// header redlock/redlock.hpp includes the whole public API.

#endif
