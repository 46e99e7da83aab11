#ifndef REDLOCK_ALGO_ACQUIRE_ROUND_HPP
#define REDLOCK_ALGO_ACQUIRE_ROUND_HPP

#include "algo/node_answer.hpp"
#include "algo/quorum.hpp"
#include "resp/value.hpp"

#include <boost/container/small_vector.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace redlock::detail {

using std::chrono::steady_clock;

// One Redlock round: `SET resource token NX PX ttl` sent to every node at `start`. A step function
// with no I/O: it is fed each node's answer and the clock, and decides at the first answer after
// which the outcome is certain (a quorum of grants, or too few nodes left to make one). Answers
// after the decision are still recorded (a held lease counts late grants) but change nothing.
//
// Decision rules:
//  - held: a quorum granted and validity = ttl - (now - start) - drift is positive, with
//    drift = ttl * drift_factor + 2 ms; valid until now + validity.
//  - validity_expired: a quorum granted, but no validity was left.
//  - no_quorum: a quorum cannot grant any more, and more nodes failed than a majority can spare;
//    contended: it cannot, but fewer failed (so nodes held by another owner made the difference).
//  - failing_for_good overrides every outcome but held: nodes failing in a way retrying cannot fix
//    (a connection failing for good, or an answer of condition::node_failure) are so many that the
//    others cannot make a quorum; the code is the most common of theirs (the lowest node's on a
//    tie). Nodes found to be one server (nodes_not_independent) prevent even `held`, with
//    error::invalid_argument.
//  - not held: the key is released on every node where the SET may have been written, i.e. every
//    node that did not refuse and did not fail unsent (granted, failed after the write, or still
//    in flight: a release queued behind the SET on that node's connection runs after it).
class acquire_round {
 public:
  struct settings {
    std::size_t nodes;
    std::chrono::milliseconds ttl;
    double drift_factor;
    steady_clock::time_point start;
  };

  enum class outcome : std::uint8_t {
    undecided,
    held,
    contended,
    no_quorum,
    validity_expired,
    failing_for_good,
  };

  struct decision {
    outcome what = outcome::undecided;
    // Success when held; else error::contended, no_quorum, validity_expired, or for
    // failing_for_good the nodes' lasting code (error::invalid_argument for nodes_not_independent).
    boost::system::error_code code;
    steady_clock::time_point valid_until{};  // held only
    // Not held, and a later round may succeed: false for failing_for_good.
    bool retry = false;
    // Not held: by node, whether a release must be sent there (see cleanup_targets).
    std::vector<bool> clean;

    bool decided() const noexcept { return what != outcome::undecided; }
    bool operator==(const decision&) const = default;
  };

  enum class step : std::uint8_t { undecided, decided_now, decided_before };

  explicit acquire_round(const settings& round);

  // Node `node` answered at `now`. A node's second answer in a round is ignored.
  step answer(std::size_t node, node_answer&& given, steady_clock::time_point now);
  // The same for a node's reply, read by fill_answer into the round's own answer for the node.
  step answer(std::size_t node, node_answer::kind what, const boost::system::error_code& ec,
              const resp::value& reply, std::string&& detail, steady_clock::time_point now);
  // The node granted (a SET's OK): what answer() makes of that, with nothing built or moved.
  step granted(std::size_t node, steady_clock::time_point now);
  // SET NX answered null: another owner holds the key there.
  step refused(std::size_t node, steady_clock::time_point now);
  // `unsent`: the SET certainly never reached the node.
  step failed(std::size_t node, boost::system::error_code code, bool unsent,
              steady_clock::time_point now);

  // What is known about the nodes apart from their answers, as of the next answer: the code the
  // node's connection fails with for good (empty: none), and that two nodes reached one server.
  void set_failing_for_good(std::size_t node, boost::system::error_code code);
  void set_nodes_not_independent() noexcept { not_independent_ = true; }
  // Whether node `node`'s answer `what` would decide the round: only that decision reads the
  // facts above, so a caller need not gather them for an answer that decides nothing.
  bool decides_with(std::size_t node, node_answer::kind what) const noexcept;

  const decision& result() const noexcept { return decision_; }
  bool decided() const noexcept { return decision_.decided(); }
  const tally& votes() const noexcept { return votes_; }
  const node_answers& answers() const noexcept { return answers_; }
  steady_clock::time_point start() const noexcept { return settings_.start; }

  // The nodes where our SET may be (or may still be written): not refused and not failed unsent.
  // Also what a round abandoned before its decision must release.
  std::vector<bool> cleanup_targets() const;

 private:
  void decide(steady_clock::time_point now);
  // Counts the answer `what` just stored for a node that had none, and decides the round if that
  // makes its outcome certain.
  step counted(node_answer::kind what, bool decided_before, steady_clock::time_point now);
  // Whether `what` is node `node`'s first answer in the round (a second one is ignored).
  bool first_answer(std::size_t node, node_answer::kind what) const noexcept;
  // Whether these votes make the round's outcome certain: a quorum granted, or none can.
  static bool certain(const tally& votes) noexcept;
  boost::system::error_code lasting_failure() const;

  settings settings_;
  tally votes_;
  node_answers answers_;
  // By node, like answers_: no allocation per round for up to seven nodes. Empty until a node
  // is set (set_failing_for_good): then none was failing for good.
  boost::container::small_vector<boost::system::error_code, 7> failing_for_good_;
  bool not_independent_ = false;
  decision decision_;
};

// After a round that was not held, how the acquire goes on: the code to complete with, or nothing
// to try again. A lasting failure and a single round (async_try_acquire) end with the round's
// code, a `deadline` (now + lock_options::wait) that has passed with error::wait_timeout.
std::optional<boost::system::error_code> acquire_ends(
    const acquire_round::decision& round, bool single_round,
    std::optional<steady_clock::time_point> deadline, steady_clock::time_point now);

}  // namespace redlock::detail

#endif
