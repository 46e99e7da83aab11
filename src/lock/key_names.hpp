#ifndef REDLOCK_LOCK_KEY_NAMES_HPP
#define REDLOCK_LOCK_KEY_NAMES_HPP

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace redlock::detail {

// The names of the keys each kind of lock keeps on a node, made from the names the user gives.
// Every key of one lock is in the hash slot of its name, so that one script may touch them all on
// a Redis Cluster node.

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

}  // namespace redlock::detail

#endif
