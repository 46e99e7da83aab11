#ifndef REDLOCK_ALGO_CLEANUP_PLAN_HPP
#define REDLOCK_ALGO_CLEANUP_PLAN_HPP

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace redlock::detail {

// Where and when an acquire releases the keys of its failed rounds. Pure: it is told each failed
// round's targets and the answers that come after the decision, and returns the releases to send;
// the caller sends them (token-checked, on the node's one connection, so each runs after the SET
// it undoes).
//
// Rules:
//  - A failed round's key is released on every target (a node where the SET may have been
//    written: see acquire_round::cleanup_targets): at once where the node answered, and where its
//    answer is still to come, once it comes, unless it is a refusal or the SET failed unsent. In a
//    contended round the nodes that answer after the decision have almost always refused, and a
//    release sent to each of them would double the requests of a lost round.
//  - Such a deferral remembers its round (ballot, key, token, and the `Form` the caller needs to
//    read the late answers) until every deferred node has answered; every request is answered in
//    the end (a reply, an error, or the connection's failure), so it is settled or, at the latest,
//    released unconditionally: when the acquire finishes (drain), or when more than
//    max_deferred_rounds rounds wait (a node that stopped answering for a while), the oldest then.
//    A release where none was needed costs one request; a release forgotten leaves a key that
//    blocks everyone until its TTL.
template <class Form>
class cleanup_plan {
 public:
  static constexpr std::size_t max_deferred_rounds = 32;

  // A token-checked release of `key` on the nodes marked in `nodes`.
  struct release {
    std::string key;
    std::string token;
    std::vector<bool> nodes;

    bool operator==(const release&) const = default;
  };

  struct round_cleanup {
    // The round's key is released now on these nodes (the targets that answered); may be none.
    std::vector<bool> release_now;
    // Released after release_now, on every node it still waited for: the oldest deferral, pushed
    // out because max_deferred_rounds rounds were waiting already.
    std::optional<release> evicted;
  };

  // The round of `ballot` (which set `key` to `token`, its answers read as `form`) failed.
  // `targets[i]`: node i may hold the SET; `still_pending[i]`: node i has not answered yet.
  round_cleanup plan(std::size_t ballot, const std::string& key, const std::string& token,
                     Form form, const std::vector<bool>& targets,
                     const std::vector<bool>& still_pending) {
    round_cleanup out{targets, std::nullopt};
    deferral later{ballot, key, token, form, std::vector<bool>(targets.size(), false)};
    bool any_later = false;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] && i < still_pending.size() && still_pending[i]) {
        out.release_now[i] = false;
        later.nodes[i] = true;
        any_later = true;
      }
    }
    if (!any_later) return out;
    if (deferred_.size() == max_deferred_rounds) {
      out.evicted = release{std::move(deferred_.front().key), std::move(deferred_.front().token),
                            std::move(deferred_.front().nodes)};
      deferred_.erase(deferred_.begin());
    }
    deferred_.push_back(std::move(later));
    return out;
  }

  // `node` answered the failed round of `ballot` after its decision. `refused_or_unsent`: it
  // refused the SET, or the SET certainly never reached it. Returns the release to send to that
  // node, if it is one the round deferred and the SET may be there. Nothing for a node that is not
  // (or no longer) deferred.
  std::optional<release> settle(std::size_t ballot, std::size_t node, bool refused_or_unsent) {
    const auto waiting = find(deferred_, ballot);
    if (waiting == deferred_.end() || node >= waiting->nodes.size() || !waiting->nodes[node]) {
      return std::nullopt;
    }
    waiting->nodes[node] = false;
    std::optional<release> out;
    if (!refused_or_unsent) {
      out = release{waiting->key, waiting->token, std::vector<bool>(waiting->nodes.size(), false)};
      out->nodes[node] = true;
    }
    if (std::find(waiting->nodes.begin(), waiting->nodes.end(), true) == waiting->nodes.end()) {
      deferred_.erase(waiting);
    }
    return out;
  }

  // How to read a late answer to the round of `ballot`: empty when nothing of it is deferred.
  std::optional<Form> find_form(std::size_t ballot) const {
    const auto waiting = find(deferred_, ballot);
    if (waiting == deferred_.end()) return std::nullopt;
    return waiting->form;
  }

  // The acquire is finishing: every deferral, to release on the nodes it still waited for.
  std::vector<release> drain() {
    std::vector<release> out;
    out.reserve(deferred_.size());
    for (auto& waiting : deferred_)
      out.push_back({std::move(waiting.key), std::move(waiting.token), std::move(waiting.nodes)});
    deferred_.clear();
    return out;
  }

  // How many rounds wait for late answers.
  std::size_t deferred() const noexcept { return deferred_.size(); }

 private:
  struct deferral {
    std::size_t ballot;
    std::string key;
    std::string token;
    Form form;
    std::vector<bool> nodes;  // still to answer
  };

  template <class Deferrals>
  static auto find(Deferrals& deferred, std::size_t ballot) {
    return std::find_if(deferred.begin(), deferred.end(),
                        [&](const deferral& d) { return d.ballot == ballot; });
  }

  // Oldest first. A vector, not a deque: most acquires never defer, and an empty vector costs no
  // allocation where libstdc++'s deque allocates two blocks as it is made; it holds at most
  // max_deferred_rounds, so erasing the oldest moves little.
  std::vector<deferral> deferred_;
};

}  // namespace redlock::detail

#endif
