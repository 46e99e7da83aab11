#ifndef REDLOCK_LOCK_SCRIPTS_HPP
#define REDLOCK_LOCK_SCRIPTS_HPP

#include "lock/hold_keys.hpp"
#include "resp/script.hpp"
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
// "shard" (see encode_release in ops/lock_requests.hpp). extend: the same, ARGV[2] = ttl in
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
// holding the counter's new value as decimal text (as every fenced script below answers a
// counter: a Lua number would round it above 2^53). A refusal is answered as by acquire_script.
// KEYS[1] = resource, KEYS[2] = counter, ARGV[1] = token, ARGV[2] = ttl in milliseconds.
const script& fenced_acquire_script();

// fence_write_back: while the key still holds our token, raises the counter to at least ARGV[2]
// (a decimal, compared exactly, never lowered) and returns 1; else changes nothing and returns 0.
// KEYS[1] = resource, KEYS[2] = counter, ARGV[1] = token, ARGV[2] = the lease's fencing token;
// ARGV[3] = "member" when KEYS[1] is a sorted set that holds the token as a member (a read-write
// lock's readers) instead of as its value.
const script& fence_write_back_script();

// semaphore_acquire: SET NX PX of one slot; where it is refused, the PTTL of every slot.
// KEYS[1..P] = the slot keys, KEYS[P+1] = the permits record (semaphore_permits_key), then with
// fencing the tried slot's fencing counter; ARGV[1] = the tried slot (1-based), ARGV[2] = token,
// ARGV[3] = ttl in milliseconds, ARGV[4] = P (decimal), ARGV[5] = "1" with fencing.
//  - The record holds another number of permits (a holder counts with another size): nothing is
//    set, and the answer is the array ["permits", that number].
//  - Granted: the record is set to P, living at least ttl; answered OK, or with fencing
//    {the counter after its increment}.
//  - Refused: a string of P decimal PTTL replies separated by commas, slot by slot (-2: free, -1:
//    no expiry, -3: could not be read, an ACL without PTTL); at most 21 bytes a slot.
const script& semaphore_acquire_script();
// The most a refusal of semaphore_acquire_script takes per slot: "-9223372036854775808,".
inline constexpr std::size_t semaphore_refusal_bytes_per_permit = 21;

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

// batch_extend: the renewals of many locks at once, one request per node (ops/extend.cpp). For
// each KEYS[i] that holds ARGV[2i - 1] (its token), sets its TTL to ARGV[2i] milliseconds. Returns
// one answer per key, in order: 1 extended, 0 not ours (gone or another token), or the error that
// reading it met (a key of another type). As extend_script without a second key, per key.
const script& batch_extend_script();
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
// SET or acquire script granted (OK, or with fencing an array of counters as decimal text; a
// refusal is nil, a PTTL, or an array that starts with a word: {"readers", ms}, {"permits", n});
// a semaphore's round reads the same, its refusal being a string of PTTLs); and whether a
// token-checked script acted (1; 0 when the key was not ours).
bool acquire_granted(const resp::value& reply) noexcept;
bool script_acted(const resp::value& reply) noexcept;
// The same for batch_extend's answers: whether it extended any of its keys.
bool some_key_extended(const resp::value& reply) noexcept;

// The script that releases a hold of `kind` (lock/hold_keys.hpp).
const script& release_script_for(hold_kind kind);

}  // namespace redlock::detail

#endif
