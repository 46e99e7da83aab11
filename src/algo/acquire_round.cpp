#include "algo/acquire_round.hpp"

#include "algo/replies.hpp"
#include "algo/validity.hpp"
#include "redlock/error.hpp"

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <utility>

namespace redlock::detail {

using boost::system::error_code;

acquire_round::acquire_round(const settings& round)
    : settings_(round), votes_(round.nodes), answers_(round.nodes) {}

acquire_round::step acquire_round::answer(std::size_t node, node_answer&& given,
                                          steady_clock::time_point now) {
  const bool decided_before = decided();
  if (!first_answer(node, given.what))
    return decided_before ? step::decided_before : step::undecided;
  answers_[node] = std::move(given);
  return counted(answers_[node].what, decided_before, now);
}

acquire_round::step acquire_round::answer(std::size_t node, node_answer::kind what,
                                          const error_code& ec, const resp::value& reply,
                                          std::string&& detail, steady_clock::time_point now) {
  const bool decided_before = decided();
  if (!first_answer(node, what)) return decided_before ? step::decided_before : step::undecided;
  fill_answer(answers_[node], what, ec, reply, std::move(detail));
  return counted(what, decided_before, now);
}

acquire_round::step acquire_round::counted(node_answer::kind what, bool decided_before,
                                           steady_clock::time_point now) {
  count(votes_, what);
  if (decided_before) return step::decided_before;
  if (!certain(votes_)) return step::undecided;
  decide(now);
  return step::decided_now;
}

bool acquire_round::first_answer(std::size_t node, node_answer::kind what) const noexcept {
  return answers_[node].what == node_answer::kind::pending && what != node_answer::kind::pending;
}

bool acquire_round::certain(const tally& votes) noexcept {
  return votes.yes_quorum() || votes.yes_quorum_impossible();
}

bool acquire_round::decides_with(std::size_t node, node_answer::kind what) const noexcept {
  if (decided() || !first_answer(node, what)) return false;
  tally after = votes_;
  count(after, what);
  return certain(after);
}

acquire_round::step acquire_round::granted(std::size_t node, steady_clock::time_point now) {
  const bool decided_before = decided();
  node_answer& answer = answers_[node];
  if (answer.what != node_answer::kind::pending)
    return decided_before ? step::decided_before : step::undecided;
  answer.what = node_answer::kind::yes;
  answer.unsent = false;
  answer.failure = {};
  answer.detail.clear();
  return counted(node_answer::kind::yes, decided_before, now);
}

acquire_round::step acquire_round::refused(std::size_t node, steady_clock::time_point now) {
  node_answer given;
  given.what = node_answer::kind::no;
  return answer(node, std::move(given), now);
}

acquire_round::step acquire_round::failed(std::size_t node, error_code code, bool unsent,
                                          steady_clock::time_point now) {
  node_answer given;
  given.what = node_answer::kind::failed;
  given.unsent = unsent;
  given.failure = code;
  return answer(node, std::move(given), now);
}

void acquire_round::set_failing_for_good(std::size_t node, error_code code) {
  // Sized on first use: nearly every round is decided by a quorum of grants, which never asks.
  if (failing_for_good_.empty()) failing_for_good_.resize(answers_.size());
  failing_for_good_[node] = code;
}

std::vector<bool> acquire_round::cleanup_targets() const {
  std::vector<bool> targets(answers_.size());
  for (std::size_t i = 0; i < answers_.size(); ++i) {
    targets[i] = answers_[i].what != node_answer::kind::no && !answers_[i].unsent;
  }
  return targets;
}

void acquire_round::decide(steady_clock::time_point now) {
  decision& d = decision_;
  if (not_independent_) {
    // Only one of two nodes that are one server is ever let in, so no vote counted twice; but
    // the client has fewer independent nodes than it was configured with.
    d.code = error::invalid_argument;
  } else if (votes_.yes_quorum()) {
    const auto left = validity(settings_.ttl, settings_.drift_factor, settings_.start, now);
    if (left > steady_clock::duration::zero()) {
      d.what = outcome::held;
      d.code = {};
      d.valid_until = now + left;
      return;
    }
    d.what = outcome::validity_expired;
    d.code = error::validity_expired;
  } else if (votes_.too_many_failed()) {
    d.what = outcome::no_quorum;
    d.code = error::no_quorum;
  } else {
    d.what = outcome::contended;
    d.code = error::contended;
  }
  d.clean = cleanup_targets();
  d.retry = true;
  if (const auto lasting = lasting_failure()) {
    d.what = outcome::failing_for_good;
    d.code = lasting;
    d.retry = false;
  }
}

error_code acquire_round::lasting_failure() const {
  if (not_independent_) return error::invalid_argument;
  // Few nodes and few codes: counted in place, in order of the nodes.
  boost::container::small_vector<std::pair<error_code, std::size_t>, 4> codes;
  std::size_t failing = 0;
  for (std::size_t i = 0; i < answers_.size(); ++i) {
    error_code code = i < failing_for_good_.size() ? failing_for_good_[i] : error_code();
    if (!code && answers_[i].failure == condition::node_failure) code = answers_[i].failure;
    if (!code) continue;
    ++failing;
    auto found = std::find_if(codes.begin(), codes.end(),
                              [&](const auto& entry) { return entry.first == code; });
    if (found == codes.end()) {
      codes.emplace_back(code, 1);
    } else {
      ++found->second;
    }
  }
  if (failing == 0 || answers_.size() - failing >= votes_.quorum()) return {};
  return std::max_element(codes.begin(), codes.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

std::optional<error_code> acquire_ends(const acquire_round::decision& round, bool single_round,
                                       std::optional<steady_clock::time_point> deadline,
                                       steady_clock::time_point now) {
  if (!round.retry || single_round) return round.code;
  if (deadline && now >= *deadline) return make_error_code(error::wait_timeout);
  return std::nullopt;
}

}  // namespace redlock::detail
