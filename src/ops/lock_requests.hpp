#ifndef REDLOCK_OPS_LOCK_REQUESTS_HPP
#define REDLOCK_OPS_LOCK_REQUESTS_HPP

#include "lock/hold_keys.hpp"
#include "nodes/node_set.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace redlock::detail {

// The kinds of request a lock operation sends, each with its own rules on the connections
// (rules_of), which travel with the request to the node set:
//  - set, extend, ping, read: skipped (failed at once, unsent) on a node that has let a request
//    time out and not answered it since (connection::unresponsive): a stopped, stalled or much
//    delayed node. A round that cannot win without such a node is then decided in one round trip
//    and frees the keys it took on the others, instead of holding them for node_timeout while
//    rival rounds split the remaining votes.
//  - the sets and extends: a NOSCRIPT answer is final (the node did not act), never resent behind
//    requests written after it: a SET could then run after its round's cleanup release, an
//    extension after a longer, later one.
//  - release: always sent, in order behind every SET it may have to undo; written also after its
//    deadline, and kept for a node that is down until its next handshake (for at most the key's
//    longest lifetime), so that a broken link does not leave the key (release_rules).
enum class lock_request : std::uint8_t {
  set,
  set_asking_ttl,
  fenced_set,
  slot_set,
  read_set,   // a read-write lock's reader (rw_read_acquire_script)
  write_set,  // a read-write lock's writer (rw_write_acquire_script)
  multi_set,  // a set of locks (multi_acquire_script)
  fence_write_back,
  extend,
  read_extend,   // a read-write lock reader's extension (rw_read_extend_script); as extend
  multi_extend,  // a set's extension (multi_extend_script); as extend
  ping,
  read  // inspection: the keys' values and PTTLs (client::async_inspect)
};

// What a request of `kind` runs on the nodes besides its bytes.
request_rules rules_of(lock_request kind) noexcept;

// A release of a hold of `kind` (release_script_for), for a key that may have been given a TTL of
// up to `key_lifetime`.
request_rules release_rules(hold_kind kind, std::chrono::milliseconds key_lifetime) noexcept;

// The token-checked release of `held` with `token`, announced on `channel` unless empty: a
// cluster node announces on the channel moved into the key's slot with SPUBLISH (in_slot), which
// only the shard that owns the slot carries, and where the client's subscribers of that node
// listen (release_announcements).
payload_by_node_kind encode_release(const node_set& nodes, const hold_keys& held,
                                    std::string_view token, std::string_view channel);

// Called with a node whose answer to a best-effort release shows the key gone there (deleted, or
// found no longer ours).
using key_gone = std::function<void(std::size_t node)>;

// Token-checked release of `held` (encode_release with `token`, announced on `channel` unless
// empty) on every node or those in `only`; nobody waits for it. Requests on each node's
// connection run in order, so a release sent after a SET on that node executes after it.
// `key_lifetime`: the longest TTL the key may have been given.
void release_best_effort(node_set& nodes, const hold_keys& held, std::string_view token,
                         std::string_view channel, std::chrono::milliseconds key_lifetime,
                         const std::vector<bool>* only = nullptr, key_gone on_gone = {});

}  // namespace redlock::detail

#endif
