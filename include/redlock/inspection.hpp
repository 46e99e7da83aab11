#ifndef REDLOCK_INSPECTION_HPP
#define REDLOCK_INSPECTION_HPP

#include "redlock/config.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock {

/// What one node holds under a lock key, read in one step (value and PTTL together).
struct node_holding {
  std::string address;  ///< node_config::address()
  /// Set when the node could not be asked (down, too slow, refused the read); then nothing below
  /// is known. `error_text` says why, naming the node.
  boost::system::error_code error;
  /// Why the node could not be asked, naming the node, when `error` is set; see error.
  std::string error_text;
  /// The key's value, i.e.\ its holder's token; empty when there is no key.
  std::optional<std::string> holder;
  /// The key's remaining time to live (PTTL); empty when there is no key or it has no expiry.
  std::optional<std::chrono::milliseconds> ttl;
  /// The key exists but holds no string (WRONGTYPE): not a lock key, though it blocks the lock.
  bool not_a_lock = false;

  /// Whether the node answered: `error` is not set.
  bool answered() const noexcept { return !error; }
};

/// A lock as its nodes show it at one moment (client::async_inspect), with the verdict `redlock
/// status` prints. A snapshot: the lock may change as soon as it is read.
struct inspection {
  /// What the nodes show about the lock (to_string() names each verdict).
  enum class verdict {
    held,      ///< one holder's token on a quorum of nodes
    free,      ///< no key on any node that answered, and those that did not cannot make a quorum
    not_held,  ///< keys on some nodes, but no holder has (or, with the silent nodes, could have) a
               ///< quorum: leftovers of failed rounds, or a lock that is ending
    unknown,   ///< too few nodes answered for any of the above
  };

  std::string resource;  ///< the key read (for a semaphore: the slot's key)
  /// How many nodes make a quorum: a majority of the client's nodes.
  std::size_t quorum = 0;
  std::vector<node_holding> nodes;  ///< by node index, in the client's node order
  /// The verdict.
  verdict state = verdict::unknown;
  /// With verdict::held: the token on a quorum, and how long it stays held there at least (the
  /// quorum-th longest of its TTLs on those nodes; empty if a key has no expiry).
  std::optional<std::string> holder;
  /// With verdict::held: how long the lock stays held on a quorum at least; see holder.
  std::optional<std::chrono::milliseconds> held_for;
  /// Why the inspection is incomplete, when it completed with an error (too few answers, the
  /// client shut down, cancelled, a bad resource name); empty otherwise.
  std::string diagnostics;

  /// Whether `token` (lease::token()) is the holder on a quorum.
  bool held_by(std::string_view token) const noexcept {
    return state == verdict::held && holder == token;
  }
  /// Nodes holding `token`, and nodes that answered.
  REDLOCK_API std::size_t nodes_holding(std::string_view token) const noexcept;
  /// Number of nodes that answered (node_holding::answered()).
  REDLOCK_API std::size_t answered() const noexcept;
};

/// "held", "free", "not_held" or "unknown".
REDLOCK_API std::string_view to_string(inspection::verdict v) noexcept;

}  // namespace redlock

#endif
