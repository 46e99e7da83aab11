// acquire_machine: one round, from its request to its decision, and what its late answers, its
// fencing write-back and its cleanup ask for.
#include "algo/fence_quorum.hpp"
#include "algo/validity.hpp"
#include "lock/acquire_machine.hpp"
#include "lock/scripts.hpp"
#include "text.hpp"
#include "token.hpp"
#include "unsafe_switches.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace redlock::detail {

using boost::system::error_code;

void acquire_machine::begin_round(steady_clock::time_point now) {
  // A round after the first has a token of its own, set once the round opens.
  std::string fresh_token;
  if (rounds_ > 0) fresh_token = make_lock_token();
  request_ =
      strategy_->next_round({.nodes = nodes().size(),
                             .token = rounds_ > 0 ? std::string_view(fresh_token) : lease_->token(),
                             .ttl = options_.ttl,
                             .fencing = options_.fencing,
                             .first = rounds_ == 0,
                             .competing = competing_,
                             .single_round = single_round_},
                            home_.random());
  if (!request_) {
    if (single_round_) {
      lease_->diagnose(strategy_->nothing_to_try());
      return finish(error::contended);
    }
    // Until a lease of this client releases a slot (permit_released_here) or the deadline.
    stage_ = stage::queued;
    return arm_timer(deadline_);
  }
  if (rounds_++ > 0) lease_->use_token(std::move(fresh_token));
  claim_ends_.reset();
  lease_->sets_key(request_->key);
  stage_ = stage::in_round;
  woken_ = false;
  heard_.clear();
  // Only an acquire that listens can be covered, so an uncontended acquire never asks.
  covered_round_ =
      competing_ && listening_ && announcements_.announcements_cover(lease_->resource());
  round_.emplace(acquire_round::settings{.nodes = nodes().size(),
                                         .ttl = options_.ttl,
                                         .drift_factor = home_.options().drift_factor,
                                         .start = now});
  form_ = request_->form;
  if (options_.fencing) {
    fenced_keys_ = strategy_->fenced_keys();
    fences_.assign(fenced_keys_.size(), std::vector<std::optional<std::uint64_t>>(nodes().size()));
  }
  ask({.what = acquire_action::kind::send_round, .index = ++ballot_});
}

namespace {

// What read_set_reply makes of a plain SET's OK. Made before main, not on first use: a reference
// to a function's static would test its guard on every grant.
const set_answer plain_set_granted = [] {
  set_answer yes;
  yes.what = node_answer::kind::yes;
  return yes;
}();

}  // namespace

void acquire_machine::plain_grant(std::size_t node, steady_clock::time_point now) {
  // Of answer_in_full's steps, those a grant takes when there are no fences to note and no mark
  // (a plain SET).
  if (!round_->decided()) {
    if (!nodes().duplicate_nodes().empty() && round_->decides_with(node, node_answer::kind::yes))
      round_->set_nodes_not_independent();
    strategy_->record(node, plain_set_granted, now);
  }
  switch (round_->granted(node, now)) {
    case acquire_round::step::decided_now:
      return decided(now);
    case acquire_round::step::decided_before:
      note_late_refusal(node, plain_set_granted, now);
      return answered_after_decision(node);
    case acquire_round::step::undecided:
      return;
  }
}

void acquire_machine::answer_in_full(std::size_t node, const error_code& ec,
                                     const resp::value& reply, steady_clock::time_point now) {
  set_answer answer = read_set_reply(ec, reply, form_);
  if (answer.marked && stage_ == stage::finished) note_mark(node);
  if (form_ == set_form::fenced_set && answer.what == node_answer::kind::yes &&
      answer.counters.size() != fences_.size()) {
    // Not the script this client sent: no vote.
    answer.what = node_answer::kind::failed;
    answer.detail = fmt::format("a grant with {} fencing counters for a set of {} resources",
                                answer.counters.size(), fences_.size());
  }
  if (!round_->decided()) {
    // The decision reads what is known of the nodes then: gathered for the answer that decides.
    // The nodes' lasting failures are not gathered for a grant that makes the quorum (nearly every
    // round): the round is then held, or its validity ran out, and a later round can succeed
    // where a quorum just granted; it is not failing for good (acquire_round::lasting_failure).
    if (round_->decides_with(node, answer.what)) {
      if (answer.what != node_answer::kind::yes) {
        lasting_now_.resize(nodes_.size());
        nodes().permanent_failures(lasting_now_);
        for (std::size_t i = 0; i < lasting_now_.size(); ++i)
          round_->set_failing_for_good(i, lasting_now_[i]);
      }
      if (!nodes().duplicate_nodes().empty()) round_->set_nodes_not_independent();
    }
    strategy_->record(node, answer, now);
    if (!fences_.empty() && answer.what == node_answer::kind::yes) note_fences(node, answer);
  }
  switch (round_->answer(node, answer.what, ec, reply, std::move(answer.detail), now)) {
    case acquire_round::step::decided_now:
      return decided(now);
    case acquire_round::step::decided_before:
      note_late_refusal(node, answer, now);
      if (stage_ == stage::fencing) {
        late_grant late{.node = node};
        late.counters.resize(fence_plan_.size());
        for (std::size_t r = 0; r < fence_plan_.size(); ++r) {
          if (form_ != set_form::fenced_set) {
            late.counters[r] = answer.counter;
          } else if (r < answer.counters.size()) {
            late.counters[r] = answer.counters[r];
          }
        }
        late_grants_.push_back(std::move(late));
        ask({.what = acquire_action::kind::late_grant_to_write_backs,
             .index = late_grants_.size() - 1});
      }
      return answered_after_decision(node);
    case acquire_round::step::undecided:
      return;
  }
}

void acquire_machine::decided(steady_clock::time_point now) {
  if (stage_ != stage::in_round) return;  // cancelled meanwhile
  home_.round_trip().note(now - round_->start());
  const acquire_round::decision& round = round_->result();
  if (round.what == acquire_round::outcome::held) {
    auto valid_until = round.valid_until;
    if (has_defect(known_defect::validity_without_elapsed)) {  // unsafe: tests only
      valid_until += now - round_->start();
    }
    if (options_.fencing) {
      if (has_defect(known_defect::reader_fence_not_written_back) &&
          fenced_keys_.front().token_is_member) {  // unsafe: tests only
        lease_->fencing_tokens_known({fence_of(fences_.front())});
        return succeed(valid_until);
      }
      return write_back_fence(valid_until, now);
    }
    return succeed(valid_until);
  }
  if (has_defect(known_defect::failed_round_not_cleaned)) {  // unsafe: tests only
    clean_up_failed_round(std::vector<bool>(round.clean.size(), false));
  } else {
    clean_up_failed_round(round.clean);
  }
  if (auto problem = strategy_->lasting_problem(nodes()); !problem.empty()) {
    lease_->diagnose(std::move(problem));
    home_.log(log_level::error, lease_->diagnostics());
    return finish(error::invalid_argument);
  }
  if (!round.retry) {
    // Misconfigured nodes (a wrong password, a missing permission, two names of one server)
    // make every later round fail the same way: say so now instead of retrying until `wait`.
    lease_->diagnose(explain(round.code, now, true));
    home_.log(log_level::error, lease_->diagnostics());
    return finish(round.code);
  }
  lease_->diagnose(explain(round.code, now));
  home_.log(log_level::debug, lease_->diagnostics());
  const bool due_now = learn_from_round(now);
  if (round.code == error::contended && strategy_->another_try_may_win(home_.random()))
    return begin_round(now);
  if (const auto code = acquire_ends(round, single_round_, deadline_, now)) return finish(*code);
  const bool first_look = rounds_ == 1 && !covered_round_;
  listen();
  if (first_look) {
    // Known neither when the key expires nor whether a release would be heard: once subscribed,
    // try again (asking PTTL this time). Whether it is subscribed is asked once the interest is
    // registered: a subscription not yet asked for counts as settled.
    stage_ = stage::subscribing;
    return ask(acquire_action::kind::check_subscription);
  }
  sleep(now, due_now);
}

void acquire_machine::note_fences(std::size_t node, const set_answer& answer) {
  if (form_ != set_form::fenced_set) {
    fences_.front()[node] = answer.counter;
    return;
  }
  for (std::size_t r = 0; r < fences_.size(); ++r)
    fences_[r][node] = answer.counters[r];
}

void acquire_machine::write_back_fence(steady_clock::time_point valid_until,
                                       steady_clock::time_point now) {
  fence_pending_.assign(nodes().size(), false);
  for (std::size_t i = 0; i < nodes().size(); ++i)
    fence_pending_[i] = round_->answers()[i].what == node_answer::kind::pending;
  stage_ = stage::fencing;
  fenced_valid_until_ = valid_until;
  // Each resource's token is written back on its own: the argument of fence_quorum holds per
  // resource, whatever quorum confirms the others. A set's key of each resource holds the round's
  // token on every granting node, which is what fence_write_back_script checks.
  fence_plan_.assign(fences_.size(), {});
  for (std::size_t r = 0; r < fences_.size(); ++r) {
    fence_write& write = fence_plan_[r];
    write.key = fenced_keys_[r].key;
    write.counter = fenced_keys_[r].counter;
    write.token_is_member = fenced_keys_[r].token_is_member;
    write.counters.resize(nodes().size());
    for (std::size_t i = 0; i < nodes().size(); ++i) {
      // A grant always carries its counter (>= 1).
      if (round_->answers()[i].what == node_answer::kind::yes)
        write.counters[i] = fences_[r][i].value_or(0);
    }
    write.fence = fence_of(write.counters);
  }
  if (skipping_fence_write_back()) {  // unsafe: tests only (unsafe_switches.hpp)
    write_backs_undecided_ = 1;
    return fence_written_back(rounds_, 0, true, {}, now);
  }
  write_backs_undecided_ = fence_plan_.size();
  ask(acquire_action::kind::write_back_fence);
}

void acquire_machine::fence_written_back(unsigned round, std::size_t resource, bool confirmed,
                                         const node_answers& answers,
                                         steady_clock::time_point now) {
  // Cancelled meanwhile, or a write-back of an earlier round that decided after another failed.
  if (stage_ != stage::fencing || round != rounds_) return;
  if (confirmed && --write_backs_undecided_ > 0) return;  // the other resources' still to come
  const auto valid_until = fenced_valid_until_;
  if (confirmed && now < valid_until) {
    std::vector<std::uint64_t> tokens;
    tokens.reserve(fence_plan_.size());
    for (const auto& write : fence_plan_)
      tokens.push_back(write.fence);
    lease_->fencing_tokens_known(std::move(tokens));
    return succeed(valid_until);
  }
  // Like a failed round: release what this round may have set, then try again or end. The
  // write-backs still in flight report to a round that is over.
  release_where(round_->cleanup_targets(), lease_->resource(), lease_->token());
  const error_code code =
      confirmed ? make_error_code(error::validity_expired) : make_error_code(error::no_quorum);
  const auto& fenced = fenced_keys_[resource];
  lease_->diagnose(
      confirmed
          ? fmt::format("redlock: {}: the fencing write-back was confirmed after the validity "
                        "ran out ({} ms after the round started)",
                        subject(),
                        std::chrono::duration_cast<std::chrono::milliseconds>(now - round_->start())
                            .count())
          : fmt::format("redlock: {}: the fencing write-back was confirmed by fewer than {} of "
                        "{} nodes: {}",
                        subject(), nodes().quorum(), nodes().size(),
                        nodes().describe(answers, "raised", "the key was no longer ours", nullptr,
                                         quoted_keys({fenced.key, fenced.counter}))));
  home_.log(log_level::debug, lease_->diagnostics());
  if (single_round_) return finish(code);
  if (deadline_ && now >= *deadline_) return finish(error::wait_timeout);
  const bool due_now = learn_from_round(now);
  listen();
  sleep(now, due_now);
}

std::string acquire_machine::explain(error_code ec, steady_clock::time_point now,
                                     bool lasting) const {
  const tally& t = round_->votes();
  if (lasting && ec == error::invalid_argument && !nodes().duplicate_nodes().empty()) {
    return fmt::format("redlock: {} not acquired: {}", subject(), nodes().duplicate_nodes());
  }
  const auto failing = lasting_failures();
  return fmt::format(
      "redlock: {} not acquired ({}): {} of {} nodes granted, quorum {}, round took {} ms{}: {}",
      subject(), ec.message(), t.yes_count(), t.nodes(), t.quorum(), to_ms(now - round_->start()),
      lasting ? "; not retried: the failing nodes cannot serve the lock until their "
                "configuration is fixed"
              : "",
      nodes().describe(round_->answers(), "granted", "held by another owner", &failing,
                       strategy_->keys_of_round(options_.fencing)));
}

std::vector<std::string> acquire_machine::lasting_failures() const {
  std::vector<std::string> texts(nodes().size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto connection_failure = nodes().permanent_failure(i);
    if (connection_failure && round_->answers()[i].what == node_answer::kind::pending) {
      texts[i] = nodes().last_error(i);
    }
  }
  return texts;
}

void acquire_machine::release_where(std::vector<bool> targets, std::string key, std::string token) {
  if (std::find(targets.begin(), targets.end(), true) == targets.end()) return;
  releases_.push_back(
      {.key = std::move(key), .token = std::move(token), .targets = std::move(targets)});
  ask({.what = acquire_action::kind::release, .index = releases_.size() - 1});
}

void acquire_machine::drop_marks(std::optional<std::size_t> node) {
  acquire_release drop{.key = lease_->resource(), .token = lease_->token(), .with_mark = true};
  if (node) {
    drop.targets.assign(nodes().size(), false);
    drop.targets[*node] = true;
  }
  releases_.push_back(std::move(drop));
  ask({.what = acquire_action::kind::release, .index = releases_.size() - 1});
}

void acquire_machine::note_mark(std::size_t node) {
  if (stage_ != stage::finished) return strategy_->mark_seen();
  if (acquired_) return;
  drop_marks(node);
}

void acquire_machine::clean_up_failed_round(const std::vector<bool>& targets) {
  std::vector<bool> still_pending(targets.size(), false);
  for (std::size_t i = 0; i < targets.size(); ++i)
    still_pending[i] = round_->answers()[i].what == node_answer::kind::pending;
  auto plan =
      cleanups_.plan(ballot_, lease_->resource(), lease_->token(), form_, targets, still_pending);
  release_where(std::move(plan.release_now), lease_->resource(), lease_->token());
  if (plan.evicted)
    release_where(std::move(plan.evicted->nodes), std::move(plan.evicted->key),
                  std::move(plan.evicted->token));
}

void acquire_machine::earlier_answer(std::size_t of_ballot, std::size_t node, const error_code& ec,
                                     const resp::value& reply) {
  const auto form = cleanups_.find_form(of_ballot);
  if (!form) {
    // No cleanup waits for it: a refusal (a grant would have one). Only a writer's mark matters;
    // every round of a writer has the same form.
    const bool writer = form_ == set_form::write || form_ == set_form::fenced_write;
    if (writer && read_set_reply(ec, reply, form_).marked) note_mark(node);
    return;
  }
  auto answer = read_set_reply(ec, reply, *form);
  if (answer.marked) note_mark(node);
  settle_deferred_cleanup(of_ballot, node,
                          make_answer(answer.what, ec, reply, std::move(answer.detail)));
}

void acquire_machine::settle_deferred_cleanup(std::size_t of_ballot, std::size_t node,
                                              const node_answer& answer) {
  const bool refused_or_unsent = answer.what == node_answer::kind::no || answer.unsent;
  if (auto release = cleanups_.settle(of_ballot, node, refused_or_unsent))
    release_where(std::move(release->nodes), std::move(release->key), std::move(release->token));
}

void acquire_machine::send_deferred_cleanups() {
  for (auto& release : cleanups_.drain())
    release_where(std::move(release.nodes), std::move(release.key), std::move(release.token));
}

void acquire_machine::answered_after_decision(std::size_t node) {
  if (!acquired_) return settle_deferred_cleanup(ballot_, node, round_->answers()[node]);
  if (round_->answers()[node].what == node_answer::kind::yes) lease_->granted_late();
  note_if_degraded();
}

void acquire_machine::note_if_degraded() {
  const tally& t = round_->votes();
  if (!t.complete() || t.yes_count() == t.nodes()) return;
  if (lease_->current() != lease_state::phase::held) return;
  lease_->diagnose(fmt::format(
      "redlock: {} acquired on {} of {} nodes (quorum {}): {}", subject(), t.yes_count(), t.nodes(),
      t.quorum(), nodes().describe(round_->answers(), "granted", "held by another owner")));
  home_.log(log_level::warning, lease_->diagnostics());
}

}  // namespace redlock::detail
