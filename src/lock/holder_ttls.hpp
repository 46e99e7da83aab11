#ifndef REDLOCK_LOCK_HOLDER_TTLS_HPP
#define REDLOCK_LOCK_HOLDER_TTLS_HPP

#include "algo/node_answer.hpp"
#include "algo/release_watch.hpp"
#include "algo/replies.hpp"
#include "lock/round_strategy.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace redlock::detail {

using std::chrono::steady_clock;

// What the rounds of one key learn of its holders (a lock's rounds, a read-write lock's): the
// PTTL each refusing node answered, read into a release_watch once the round is decided. The
// nodes that refused are blocked until an announcement from them, a PTTL that has run out, or the
// next round.
class holder_ttls {
 public:
  // A round that asks for PTTLs opens on `nodes` nodes; clear() for one that asks none.
  void open_round(std::size_t nodes) { ttls_.assign(nodes, std::nullopt); }
  void clear() noexcept { ttls_.clear(); }  // no allocation

  // An answer of the current round that came before its decision.
  void record(std::size_t node, const set_answer& answer, steady_clock::time_point now) {
    if (answer.holder_pttl && node < ttls_.size())
      ttls_[node] = holder_ttl{*answer.holder_pttl, now};
  }

  // After a decision without the lock: what the round taught replaces what was known.
  void learn(const node_answers& answers, std::size_t quorum, double drift_factor) {
    watch_.reset(answers, quorum);
    for (std::size_t i = 0; i < ttls_.size() && i < answers.size(); ++i) {
      if (ttls_[i] && answers[i].what == node_answer::kind::no)
        watch_.holder_ttl(i, ttls_[i]->pttl_ms, ttls_[i]->at, drift_factor);
    }
  }

  // A refusal that came after the decision: kept for a later learn (a fenced round's write-back
  // can still fail), and applied now when the acquire waits on this round (`watching`). Returns
  // whether it was.
  bool late_refusal(std::size_t node, const set_answer& answer, steady_clock::time_point now,
                    double drift_factor, bool watching) {
    if (!answer.holder_pttl) return false;
    record(node, answer, now);
    if (!watching) return false;
    watch_.holder_ttl(node, *answer.holder_pttl, now, drift_factor);
    return true;
  }

  release_watch& watch() noexcept { return watch_; }
  const release_watch& watch() const noexcept { return watch_; }

 private:
  struct holder_ttl {
    long long pttl_ms;
    steady_clock::time_point at;
  };

  // The current round's PTTL replies, by node; empty for a round that asks none.
  std::vector<std::optional<holder_ttl>> ttls_;
  release_watch watch_;
};

// A strategy whose refusals carry one PTTL per node (a lock's rounds, a set's): what they learn
// is a holder_ttls, and an announcement from a node frees that node.
class ttl_watching_rounds : public round_strategy {
 public:
  void record(std::size_t node, const set_answer& answer, steady_clock::time_point now) override {
    holders_.record(node, answer, now);
  }
  void learn(const node_answers& answers, std::size_t quorum, steady_clock::time_point,
             double drift_factor) override {
    holders_.learn(answers, quorum, drift_factor);
  }
  bool late_refusal(std::size_t node, const set_answer& answer, steady_clock::time_point now,
                    double drift_factor, bool watching) override {
    return holders_.late_refusal(node, answer, now, drift_factor, watching);
  }
  void forget_holder(std::size_t, std::size_t node) override { holders_.watch().released(node); }
  void held_until(std::size_t nodes, std::size_t quorum,
                  steady_clock::time_point key_gone_by) override {
    holders_.watch().reset_all_held(nodes, quorum, key_gone_by);
  }
  bool may_be_free() const override { return holders_.watch().may_be_free(); }
  std::optional<steady_clock::time_point> free_by() const override {
    return holders_.watch().free_by();
  }

 protected:
  holder_ttls holders_;
};

}  // namespace redlock::detail

#endif
