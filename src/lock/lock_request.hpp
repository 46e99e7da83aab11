#ifndef REDLOCK_LOCK_LOCK_REQUEST_HPP
#define REDLOCK_LOCK_LOCK_REQUEST_HPP

#include <cstdint>
#include <memory>
#include <string>

namespace redlock::detail {

// The kinds of request a lock operation sends, each with its own rules on the connections
// (rules_of in ops/lock_requests.hpp), which travel with the request to the node set:
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
  batch_extend,  // many locks' renewals in one request (batch_extend_script); as extend
  ping,
  read  // inspection: the keys' values and PTTLs (client::async_inspect)
};

// A request's bytes, shared by every node it goes to and kept alive by the requests themselves
// (the node set's shared_payload is this type).
using shared_request_bytes = std::shared_ptr<const std::string>;

}  // namespace redlock::detail

#endif
