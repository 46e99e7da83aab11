#ifndef REDLOCK_LOCK_HOLD_KEYS_HPP
#define REDLOCK_LOCK_HOLD_KEYS_HPP

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace redlock::detail {

// What a lease, or one acquire round, holds on every node; it decides which scripts release and
// extend it (release_script_for and extend_script_for in scripts.hpp).
enum class hold_kind : std::uint8_t {
  lock,    // a lock's key: a mutex's, or a semaphore slot's
  reader,  // a read-write lock's reader: its entry in the readers' set
  writer,  // a read-write lock's writer: the writer's key, and while it waited its mark
  set,     // a set of locks (client::async_acquire_all): every resource's lock key
};

// The keys of one hold, as a release addresses them. Views: the owner keeps the strings.
struct hold_keys {
  hold_kind kind = hold_kind::lock;
  // The key the acquire set: the lock's, the readers' set, or the writer's key. Every other key
  // here is in its hash slot.
  std::string_view key{};
  // A writer's: its mark key (rw_mark_key), and the mark id the release deletes it with; an empty
  // id leaves the mark, as a failed round of a writer that keeps waiting does.
  std::string_view mark{};
  std::string_view mark_id{};
  // A read-write lock's: what its release announcements say, the lock's local queue key
  // (rw_queue_key), by which waiting clients route them. A lock's announcement says its key.
  std::string_view message{};
  // A set's: every lock key of the set, `key` the first of them.
  std::span<const std::string> keys{};
  // hash_slot(key) when the holder had it already (lease_state::resource_slot): a release to a
  // cluster node then routes without hashing again.
  std::optional<std::uint16_t> slot{};

  // A lock's key.
  static hold_keys lock_key(std::string_view key) noexcept {
    return {.kind = hold_kind::lock,
            .key = key,
            .mark = {},
            .mark_id = {},
            .message = {},
            .keys = {},
            .slot = {}};
  }
};

}  // namespace redlock::detail

#endif
