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
#include "redlock/with_lock.hpp"

#endif
