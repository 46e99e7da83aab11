#ifndef REDLOCK_ALGO_FENCE_QUORUM_HPP
#define REDLOCK_ALGO_FENCE_QUORUM_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace redlock::detail {

// The fencing token of a held round: the highest counter among the grants that decided it (each
// grant returns its node's counter after its own increment); 0 when there is none. `counters[i]`
// is unset where node i did not grant.
std::uint64_t fence_of(const std::vector<std::optional<std::uint64_t>>& counters);

// The write-back of one fenced resource of a held round (round_strategy::fenced_key): `counter`
// is raised to `fence` where `key` still holds the round's token. `counters[i]`: node i's counter
// as its grant returned it; unset where it did not grant (yet).
struct fence_write {
  std::string key;
  std::string counter;
  // The key holds the lease's token as a member of a sorted set (a read-write lock's readers),
  // not as its value.
  bool token_is_member = false;
  std::uint64_t fence = 0;
  std::vector<std::optional<std::uint64_t>> counters{};
};

// A grant of the held round after its decision, from `node`: its counters by fenced resource.
struct late_grant {
  std::size_t node = 0;
  std::vector<std::optional<std::uint64_t>> counters{};
};

// The counting of a held round's fencing write-back: which granting nodes must have their counter
// raised to the token, and when a quorum of all the client's nodes is known to be at it. Pure:
// fed the round's grants, its late answers and the write-backs' answers; the caller sends.
//
// Why it suffices: on a quorum W the counter is at the token or above while our key lives there.
// A later lease's grants are a quorum too, so some node of W is among them; there its SET NX
// succeeded only after our key was gone, and its increment starts from our token or more.
//
// Rules:
//  - A granting node whose counter is at the token or above (its grant's increment reached the
//    token) is confirmed at once: counters never go down. So when every grant returned the same
//    counter, as on an uncontended resource, nothing is sent at all.
//  - A granting node below the token is awaited: a write-back is sent to it, and confirms it if
//  it
//    answers that it raised the counter.
//  - Nodes whose answer to the round was still to come at its decision may grant late; they join
//    in the same way (late_answer), so that the quorum can be made of the first to confirm among
//    all granting nodes, not only of those that decided the round. A late refusal or failure only
//    leaves one fewer node that could.
//  - Undecided while fewer than a quorum are confirmed and the confirmed, awaited and pending
//  nodes
//    together could still make one; then decided: confirmed if a quorum is. Decided as soon as
//    certain, and never changed after; later answers send nothing.
class fence_quorum {
 public:
  enum class node_state : std::uint8_t {
    not_asked,          // did not grant the round: nothing is sent there
    round_pending,      // its answer to the round is still to come
    at_token,           // confirmed by its grant: its increment reached the token
    awaited,            // below the token: a write-back is sent (unless decided), not answered
    written_back,       // confirmed by the write-back
    write_back_failed,  // the write-back failed or was refused
  };

  fence_quorum(std::size_t nodes, std::size_t quorum);

  // The round was decided with the token `fence`. `counters[i]`: node i's counter as its grant
  // returned it, unset where it did not grant; `still_pending[i]`: node i's answer to the round
  // is still to come (it is given to late_answer when it comes). Returns by node where a
  // write-back must be sent: none when the outcome is certain already.
  std::vector<bool> start(std::uint64_t fence,
                          const std::vector<std::optional<std::uint64_t>>& counters,
                          const std::vector<bool>& still_pending);

  // A pending node answered the round after its decision: `counter` if it granted. Returns
  // whether a write-back must be sent to it. Ignored once decided, and for a node that was not
  // pending.
  bool late_answer(std::size_t node, std::optional<std::uint64_t> counter);

  // The write-back sent to `node` answered: `confirmed` if the node's counter is at the token
  // now. Ignored for a node that was not awaited.
  void answered(std::size_t node, bool confirmed);

  // Empty while undecided; else whether a quorum confirmed the token.
  std::optional<bool> decision() const noexcept { return decision_; }

  node_state state(std::size_t node) const { return nodes_.at(node); }
  std::uint64_t fence() const noexcept { return fence_; }
  std::size_t confirmed() const noexcept { return confirmed_; }

 private:
  // At the token already, else awaited: returns whether a write-back must be sent.
  bool granted(std::size_t node, std::uint64_t counter);
  void decide();

  std::vector<node_state> nodes_;
  std::size_t quorum_;
  std::uint64_t fence_ = 0;
  std::size_t awaited_ = 0;    // write-backs sent and not answered
  std::size_t pending_ = 0;    // nodes whose answer to the round has not arrived
  std::size_t confirmed_ = 0;  // at the token: by their grant, or by the write-back
  std::optional<bool> decision_;
};

}  // namespace redlock::detail

#endif
