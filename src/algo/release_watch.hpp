#ifndef REDLOCK_ALGO_RELEASE_WATCH_HPP
#define REDLOCK_ALGO_RELEASE_WATCH_HPP

#include "algo/node_answer.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace redlock::detail {

using std::chrono::steady_clock;

// What a waiting acquire knows about where the lock it wants is held, and so when trying again
// can succeed. Pure: fed the last round's answers, the holders' remaining TTLs (PTTL) and release
// announcements, it says whether a quorum of nodes may be free now and by when one will be at the
// latest.
//
// A node is *blocked* while the key there may belong to someone else: it refused our SET, or its
// answer is unknown (failed, not awaited). Nodes that granted it are not blocked: the failed round
// deleted its key there. An announcement from a node unblocks it (the key was deleted there); so
// does a PTTL of -2 (no key). Announcements from nodes that were not blocked change nothing, which
// is what keeps two losers of one split from waking each other in turn while a third party holds
// the lock: only a release that can free a quorum wakes a waiter.
//
// The TTL bound: a refusing node whose PTTL was p ms when its reply arrived at t has its key gone
// by t + p * (1 + drift_factor) + 1 ms at the latest unless the holder extends it (the server read
// its clock before t; the factor covers a server clock that runs slow, the millisecond PTTL's
// rounding). A quorum can be free once the earliest `needed()` of those moments have passed.
// Blocked nodes with no known expiry (no PTTL yet, PTTL -1: no expiry, failed nodes) never expire.
class release_watch {
 public:
  release_watch() = default;

  // After a round that was not held.
  void reset(const node_answers& answers, std::size_t quorum) {
    quorum_ = quorum;
    nodes_.assign(answers.size(), node{});
    for (std::size_t i = 0; i < answers.size(); ++i)
      nodes_[i].blocked = answers[i].what != node_answer::kind::yes;
  }

  // Every node held by a lease that is being released now, whose key lives until `expires` at the
  // latest (a local waiter that competes after a hand-off limit).
  void reset_all_held(std::size_t nodes, std::size_t quorum, steady_clock::time_point expires) {
    quorum_ = quorum;
    nodes_.assign(nodes, node{true, expires});
  }

  // A refusing node's PTTL reply: the key's remaining life in ms, -1 (no expiry) or -2 (no key),
  // received at `now`.
  void holder_ttl(std::size_t node, long long pttl_ms, steady_clock::time_point now,
                  double drift_factor) {
    if (node >= nodes_.size() || !nodes_[node].blocked) return;
    if (pttl_ms == -2) {
      released(node);
    } else if (pttl_ms >= 0) {
      const auto life = std::chrono::duration<double, std::milli>(
          static_cast<double>(pttl_ms) * (1.0 + std::max(drift_factor, 0.0)) + 1.0);
      nodes_[node].expires = now + std::chrono::duration_cast<steady_clock::duration>(life);
    } else {
      nodes_[node].expires.reset();
    }
  }

  // The key was announced deleted on `node`.
  void released(std::size_t node) {
    if (node < nodes_.size()) nodes_[node] = node_state_free();
  }

  // Whether node `i` is blocked (tests, diagnostics).
  bool blocked(std::size_t i) const noexcept { return i < nodes_.size() && nodes_[i].blocked; }

  // How many blocked nodes must still become free before a quorum can be.
  std::size_t needed() const noexcept {
    const auto blocked = static_cast<std::size_t>(
        std::count_if(nodes_.begin(), nodes_.end(), [](const node& n) { return n.blocked; }));
    const std::size_t free = nodes_.size() - blocked;
    return free >= quorum_ ? 0 : quorum_ - free;
  }

  bool may_be_free() const noexcept { return needed() == 0; }

  // When a quorum can be free at the latest if nobody extends or releases: the needed()-th
  // earliest expiry among the blocked nodes. Empty when too few of them have a known expiry.
  std::optional<steady_clock::time_point> free_by() const {
    const std::size_t want = needed();
    if (want == 0) return steady_clock::time_point::min();
    std::vector<steady_clock::time_point> known;
    for (const auto& n : nodes_) {
      if (n.blocked && n.expires) known.push_back(*n.expires);
    }
    if (known.size() < want) return std::nullopt;
    std::nth_element(known.begin(), known.begin() + static_cast<std::ptrdiff_t>(want - 1),
                     known.end());
    return known[want - 1];
  }

 private:
  struct node {
    bool blocked = false;
    std::optional<steady_clock::time_point> expires{};
  };
  static node node_state_free() noexcept { return node{}; }

  std::vector<node> nodes_;
  std::size_t quorum_ = 1;
};

}  // namespace redlock::detail

#endif
