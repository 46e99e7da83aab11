#ifndef REDLOCK_OPS_EXTEND_HPP
#define REDLOCK_OPS_EXTEND_HPP

#include <chrono>
#include <memory>

namespace redlock::detail {

class lease_state;
class user_operation;

// Extension and renewal of a held lease. One timer of the lease serves renewal and expiry: armed
// for the earlier of the next renewal and the end of the validity, so that a loss is reported on
// time also while an extension is in flight or after max_hold stopped renewal.

// The lease became held: plans its first renewal (half a TTL before the validity ends, with
// lock_options::auto_renew) and arms its timer.
void start_renewal(lease_state& lease);

// The lease's keys now live on another master than before (node_set::watch_masters: a failover,
// a slot that moved): renews now instead of at half-life, so that the key's TTL on the new master
// does not run down meanwhile (it came over with the TTL it had, and a renewal that went to the
// former master may fail or wait). With a renewal in flight, one more extension goes out beside
// it; a renewal never shortens what is claimed, so running both does no harm. Nothing without
// auto_renew, after max_hold stopped renewal, or when the lease is not held.
void renew_at_once(lease_state& lease);

// When the next renewal is due for the validity claimed now.
void schedule_renewal(lease_state& lease);

// Sends an extension by `ttl` (extend_script, token-checked) to every node and lowers the
// validity to its cap at once; a quorum's confirmation raises it again (extension_validity). A
// quorum saying the key is no longer ours loses the lease. `caller` (null for renewal) gets the
// outcome.
void send_extension(lease_state& lease, std::chrono::milliseconds ttl, bool from_renewal,
                    std::shared_ptr<user_operation> caller);

}  // namespace redlock::detail

#endif
