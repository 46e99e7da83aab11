#ifndef REDLOCK_SCRIPTS_HPP
#define REDLOCK_SCRIPTS_HPP

#include "hold.hpp"
#include "net/connection.hpp"
#include "net/script.hpp"
#include "resp/value.hpp"

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace redlock::detail {

// The Lua scripts: compare the token, then act. Neither touches a key holding another value, and
// extend never creates a missing key (PEXPIRE on a missing key is a no-op returning 0).
// release: KEYS[1] = resource, ARGV[1] = token, then optionally the announcement's channel and
// "shard" (see release_request in nodes/node_set.hpp). extend: the same, ARGV[2] = ttl in
// milliseconds; an optional KEYS[2] is a key that must live at least as long as the lock (a
// semaphore's permits record): when the lock is extended, it is made to live at least ttl too, if
// it exists and has an expiry. Both return 1 when they acted and 0 when the key is not ours.
const script& release_script();
const script& extend_script();

// acquire: KEYS[1] = resource, ARGV[1] = token, ARGV[2] = ttl in milliseconds. SET NX PX; returns
// SET's +OK when granted, else the key's PTTL (an integer: ms left, or -1 for no expiry), or nil
// when the PTTL could not be read.
const script& acquire_script();

// fenced_acquire: acquire_script's SET NX PX, and when it is granted the fencing counter
// (KEYS[2], see fencing_counter_key) is incremented: the grant is answered as a one-element array
// holding the counter's new value. A refusal is answered as by acquire_script.
// KEYS[1] = resource, KEYS[2] = counter, ARGV[1] = token, ARGV[2] = ttl in milliseconds.
const script& fenced_acquire_script();

// fence_write_back: while the key still holds our token, raises the counter to at least ARGV[2]
// (a decimal, compared exactly, never lowered) and returns 1; else changes nothing and returns 0.
// KEYS[1] = resource, KEYS[2] = counter, ARGV[1] = token, ARGV[2] = the lease's fencing token.
const script& fence_write_back_script();

// `name` followed by `suffix`, in the hash slot of `name` as a key: when `name` has a hash tag
// ("{...}", not empty) it decides the slot already; otherwise the whole name is made one, unless
// it holds a '}' that would end the tag early, and then the key is simply name + suffix.
std::string key_in_hash_slot_of(std::string_view name, std::string_view suffix);

// Whether every key made from `name` by key_in_hash_slot_of is in the hash slot of `name`: false
// only for a name that holds a '}' and no hash tag, whose suffixed keys hash as a whole.
bool keys_share_hash_slot(std::string_view name) noexcept;

// The key of `resource`'s fencing counter on each node: `resource` + ":fence", in its hash slot.
std::string fencing_counter_key(std::string_view resource);

// The lock key of slot `slot` (from 0) of the semaphore `name`: `name` + ":slot:N", every slot of
// one semaphore in the same hash slot.
std::string semaphore_slot_key(std::string_view name, std::size_t slot);

// What every slot key of the semaphore `name` starts with (slot keys are this + the slot's
// number): the key of the semaphore's local queue, by which release announcements of its slots
// are routed.
std::string permit_queue_key(std::string_view name);

// The semaphore slot a slot key names, given the key's prefix (permit_queue_key); empty when `key`
// is not prefix + a number.
std::optional<std::size_t> slot_of_key(std::string_view key, std::string_view prefix);

// Splits a slot key into permit_queue_key and the slot's number; empty when `key` does not end in
// ":slot:" and a number.
std::optional<std::pair<std::string_view, std::size_t>> split_slot_key(std::string_view key);

// The key on each node that records how many permits the holders of semaphore `name` count with
// (semaphore_acquire_script): `name` + ":permits", in the slot keys' hash slot.
std::string semaphore_permits_key(std::string_view name);

// semaphore_acquire: SET NX PX of one slot; where it is refused, the PTTL of every slot.
// KEYS[1..P] = the slot keys, KEYS[P+1] = the permits record (semaphore_permits_key), then with
// fencing the tried slot's fencing counter; ARGV[1] = the tried slot (1-based), ARGV[2] = token,
// ARGV[3] = ttl in milliseconds, ARGV[4] = P (decimal), ARGV[5] = "1" with fencing.
//  - The record holds another number of permits (a holder counts with another size): nothing is
//    set, and the answer is the array ["permits", that number].
//  - Granted: the record is set to P, living at least ttl; answered OK, or with fencing the
//    counter after its increment (an integer).
//  - Refused: a string of P decimal PTTL replies separated by commas, slot by slot (-2: free, -1:
//    no expiry, -3: could not be read, an ACL without PTTL); at most 21 bytes a slot.
const script& semaphore_acquire_script();
// The most a refusal of semaphore_acquire_script takes per slot: "-9223372036854775808,".
inline constexpr std::size_t semaphore_refusal_bytes_per_permit = 21;

// A read-write lock `name` keeps three keys on each node, in the hash slot of `name`:
//  - the writer's key, `name` + ":write": the writing lease's token, with its TTL;
//  - the readers' key, `name` + ":read": a sorted set of the reading leases' tokens, each scored
//    by its own deadline in milliseconds of the node's clock (TIME), the set itself expiring at
//    the latest deadline; entries past their deadline count for nothing and are removed by the
//    next script that looks;
//  - the waiting writer's mark, `name` + ":write-waiting": the token of a writer that found live
//    readers, with the writer's TTL. New readers are refused while it lives, so that a stream of
//    readers cannot keep a writer out forever; its writer renews it with every round.
std::string rw_writer_key(std::string_view name);
std::string rw_readers_key(std::string_view name);
std::string rw_mark_key(std::string_view name);
// The local queue of read-write lock `name` in a client, and what its releases announce: `name` +
// ":rw", in its hash slot (not a key anything is stored under). Distinct from a mutex called
// `name`.
std::string rw_queue_key(std::string_view name);

// rw_read_acquire: a reader is granted when there is no writer and no waiting writer's mark: its
// token is added to the readers with the deadline now + ttl. Answered OK, or with fencing {the
// counter as it is} (0 when no writer has had a token yet; a reader takes none of its own). A
// refusal is the PTTL of the writer's key, or else of the mark (nil when it could not be read).
// rw_write_acquire: a writer is granted when there is no writer, no live reader and no mark but
// its own: the writer's key is set to the round's token, its mark deleted. Answered OK, or with
// fencing {the counter after its increment}. A refusal by another writer's key or mark is its
// PTTL (or nil); a refusal by live readers sets (or renews) this writer's mark with its TTL and is
// answered {"readers", ms until the last reader's deadline}. The mark holds the writer's mark id,
// one for all the rounds of an acquire (each round has a token of its own).
// Both: KEYS = writer's key, readers' key, mark, then with fencing the counter
// (fencing_counter_key(name)); ARGV[1] = token, ARGV[2] = ttl in milliseconds, ARGV[3] = "1" with
// fencing, else "0"; rw_write_acquire also ARGV[4] = the mark id.
const script& rw_read_acquire_script();
const script& rw_write_acquire_script();

// rw_read_extend: while the reader's entry is live, moves its deadline to now + ttl (the set
// living at least as long) and returns 1; else returns 0, removing an entry past its deadline.
// KEYS[1] = readers' key, ARGV[1] = token, ARGV[2] = ttl in milliseconds.
const script& rw_read_extend_script();

// rw_read_release: removes the reader's entry; returns 1 when it was live, 0 when it was gone or
// past its deadline. When no live reader is left, ARGV[2] (if not empty) is the channel the
// release is announced on, with ARGV[4] as the message (PUBLISH, or SPUBLISH when ARGV[3] is
// "shard"): a waiting writer may now win. KEYS[1] = readers' key, ARGV[1] = token.
const script& rw_read_release_script();

// rw_write_release: deletes the writer's key if it holds the token, and the mark if it holds
// ARGV[5], the mark id (when given and not empty: a writer that gives up, or ends holding; a failed
// round whose writer keeps waiting leaves its marks); returns 1 when the writer's key was deleted,
// else 0. Announced as by rw_read_release when anything was deleted. KEYS[1] = writer's key,
// KEYS[2] = mark, ARGV[1..4] as rw_read_release. A writer extends its key with extend_script.
const script& rw_write_release_script();

// A set of locks, one lease for several resources (client::async_acquire_all). Its keys are the
// resources' own lock keys, KEYS[1..n] in the set's order; on one node multi_acquire and
// multi_extend act on all of them or on none. A fenced set writes each resource's token back with
// fence_write_back_script: each of its keys holds the set's token.
// multi_acquire: granted only when none of the keys exists: each is set to ARGV[1] (the token)
// with ARGV[2] (ttl in milliseconds). With fencing (ARGV[3] = "1"; KEYS[n+1..2n] are the
// resources' fencing counters, fencing_counter_key) each counter is incremented and the grant is
// answered {counter 1, ..., counter n}; else OK. A refusal changes nothing and is the longest PTTL
// of the keys that exist (-1 when one has no expiry; nil when a PTTL could not be read): when
// the whole set is free there at the latest.
const script& multi_acquire_script();
// multi_extend: when every key holds ARGV[1], gives each the TTL ARGV[2] and returns 1; else
// changes nothing and returns 0.
const script& multi_extend_script();
// multi_release: deletes each key that holds ARGV[1], announcing each on ARGV[2] when given and not
// empty (its message is the key; SPUBLISH when ARGV[3] is "shard", as release_script); returns 1
// when every key was ours, else 0.
const script& multi_release_script();
// The most resources one set may have. Every script above runs on all of them at once, and a
// script blocks its server while it runs; 64 keys (128 with their fencing counters) keep that to
// tens of microseconds, a request to a few kilobytes, and the local queues' bookkeeping small.
inline constexpr std::size_t max_set_size = 64;

// What a reply says was written, for request_options::counts_once_replicated: whether a round's
// SET or acquire script granted (OK, or with fencing an array of counters; a refusal is nil, a
// PTTL, or an array that starts with a word: {"readers", ms}, {"permits", n}); whether a
// semaphore's round granted (the same, or with fencing the counter alone; its refusal is a
// string of PTTLs); and whether a token-checked script acted (1; 0 when the key was not ours).
bool acquire_granted(const resp::value& reply) noexcept;
bool slot_acquire_granted(const resp::value& reply) noexcept;
bool script_acted(const resp::value& reply) noexcept;

// The script that releases a hold of `kind` (hold.hpp).
const script& release_script_for(hold_kind kind);

// Sets up a connection's handshake as a client's: loads the scripts, and checks that the ACL user
// may run every command the lock sends (connection_options::permission_probes), so that a node
// that could grant a lock but not release it fails at connect with error::permission_denied.
void prepare_for_lock(connection_options& settings);

}  // namespace redlock::detail

#endif
