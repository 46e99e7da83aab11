#ifndef REDLOCK_ALGO_SLOT_WATCH_HPP
#define REDLOCK_ALGO_SLOT_WATCH_HPP

#include "algo/node_answer.hpp"
#include "algo/release_watch.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace redlock::detail {

// What a waiting semaphore acquire knows about each of the semaphore's slots (each slot is a lock
// of its own), and which one to try next. Pure: one release_watch per slot, fed by the last round.
//
// A round tries one slot on every node. A node that refuses it answers with the PTTL of every
// slot there (-2: free, -1: no expiry, -3: could not be read), so one refused round tells which
// slots may be free on a quorum. A node that granted the tried slot, or failed, said nothing of
// the others: for them it counts as blocked with no known expiry, which only errs towards waiting
// (the backoff then bounds the wait, as for a lock whose holders' TTLs are unknown).
//
// The next slot is drawn uniformly among those that may be free on a quorum and are not held by
// this client already, so that contenders that read the same reports spread over the free slots
// instead of all trying the lowest. When there is none, among those that are at least not known to
// be held on a quorum (too few nodes reported on them): trying one is how to find out.
class slot_watch {
 public:
  // What a node's refusal carried: its PTTL reply per slot.
  using slot_ttls = std::vector<long long>;

  slot_watch() = default;

  // Before any round: nothing is known, every slot is worth a try.
  void reset_unknown(std::size_t permits) {
    known_ = false;
    slots_.assign(permits, release_watch{});
  }

  // After a round on `tried` that was not held. `reports[i]` is node i's refusal (empty when it
  // granted, failed, or answered nothing); `now` is when the replies were read.
  void reset(std::size_t tried, const node_answers& answers, std::span<const slot_ttls> reports,
             std::size_t quorum, steady_clock::time_point now, double drift_factor) {
    known_ = true;
    quorum_ = quorum;
    const std::size_t permits = slots_.size();
    held_by_reports_.assign(permits, 0);
    node_answers unknown(answers.size());
    for (auto& answer : unknown)
      answer.what = node_answer::kind::no;
    for (std::size_t slot = 0; slot < permits; ++slot) {
      // The tried slot as for a lock: the nodes that granted it were cleaned up by the failed
      // round.
      slots_[slot].reset(slot == tried ? answers : unknown, quorum);
    }
    for (std::size_t node = 0; node < reports.size() && node < answers.size(); ++node)
      report(node, reports[node], now, drift_factor);
  }

  // Node `node`'s refusal of the last round, also one that arrives after it was decided: the PTTL
  // reply of every slot there, read at `now`. Ignored unless it has one per slot.
  void report(std::size_t node, const slot_ttls& ttls, steady_clock::time_point now,
              double drift_factor) {
    if (!known_ || ttls.size() != slots_.size()) return;
    for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
      const long long pttl = ttls[slot];
      if (pttl >= -1) ++held_by_reports_[slot];
      slots_[slot].holder_ttl(node, pttl < -2 ? -1 : pttl, now, drift_factor);
    }
  }

  // Whether the last round's reports show every slot held on a quorum of nodes (a slot held by
  // this client counts as held): no permit can be had now, the semaphore's `contended`. False
  // before the first report, and when too few nodes answered to tell.
  bool all_held(const std::vector<bool>& held_here) const noexcept {
    if (!known_) return false;
    for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
      const bool ours = slot < held_here.size() && held_here[slot];
      if (!ours && held_by_reports_[slot] < quorum_) return false;
    }
    return true;
  }

  // `node` announced that `slot` was released there.
  void released(std::size_t slot, std::size_t node) {
    if (slot < slots_.size()) slots_[slot].released(node);
  }

  std::size_t permits() const noexcept { return slots_.size(); }

  // Whether `slot` may be free on a quorum now (always, before the first report).
  bool may_be_free(std::size_t slot) const noexcept {
    return slot < slots_.size() && (!known_ || slots_[slot].may_be_free());
  }

  // Whether the last round's reports show `slot` held on a quorum of nodes.
  bool known_held(std::size_t slot) const noexcept {
    return known_ && slot < slots_.size() && held_by_reports_[slot] >= quorum_;
  }

  // A slot to try, not `held_here` (the client's own leases of the semaphore): drawn uniformly
  // among those that may be free on a quorum, or if there is none among those not known_held.
  // Empty when every slot is held here or known held.
  template <class Random>
  std::optional<std::size_t> choose(const std::vector<bool>& held_here, Random& random) const {
    std::vector<std::size_t> candidates;
    for (const bool sure_enough : {true, false}) {
      for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
        const bool ours = slot < held_here.size() && held_here[slot];
        if (!ours && (sure_enough ? may_be_free(slot) : !known_held(slot)))
          candidates.push_back(slot);
      }
      if (!candidates.empty()) break;
    }
    if (candidates.empty()) return std::nullopt;
    std::uniform_int_distribution<std::size_t> pick(0, candidates.size() - 1);
    return candidates[pick(random)];
  }

  // When some slot not `held_here` can be free on a quorum at the latest, if nobody extends or
  // releases: the earliest of the slots' release_watch::free_by. Empty when no slot has enough
  // known expiries.
  std::optional<steady_clock::time_point> free_by(const std::vector<bool>& held_here) const {
    std::optional<steady_clock::time_point> earliest;
    for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
      if (slot < held_here.size() && held_here[slot]) continue;
      const auto at = known_ ? slots_[slot].free_by() : steady_clock::time_point::min();
      if (at && (!earliest || *at < *earliest)) earliest = at;
    }
    return earliest;
  }

 private:
  bool known_ = false;
  std::size_t quorum_ = 1;
  std::vector<release_watch> slots_;
  std::vector<std::size_t> held_by_reports_;  // per slot: nodes whose report showed it held
};

}  // namespace redlock::detail

#endif
