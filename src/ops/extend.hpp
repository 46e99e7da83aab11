#ifndef REDLOCK_OPS_EXTEND_HPP
#define REDLOCK_OPS_EXTEND_HPP

#include <chrono>
#include <memory>

namespace redlock::detail {

class lease_state;

// Extension and renewal of a held lease: the driver of its lease_machine (lock/lease_machine.hpp),
// which one timer of the lease wakes for renewal and expiry, and whose extensions are sent here.

// The lease became held (lease_state::held_with): carries out what its machine asked then (the
// first renewal's timer).
void start_renewal(lease_state& lease);

// The lease's keys now live on another master than before (node_set::watch_masters: a failover,
// a slot that moved): renews now instead of at half-life, so that the key's TTL on the new master
// does not run down meanwhile (it came over with the TTL it had, and a renewal that went to the
// former master may fail or wait). With a renewal in flight, one more extension goes out beside
// it; a renewal never shortens what is claimed, so running both does no harm. Nothing without
// auto_renew, after max_hold stopped renewal, or when the lease is not held.
void renew_at_once(lease_state& lease);

}  // namespace redlock::detail

#endif
