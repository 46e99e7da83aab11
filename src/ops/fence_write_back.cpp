#include "ops/fence_write_back.hpp"

#include "algo/replies.hpp"
#include "lock/scripts.hpp"
#include "ops/lock_requests.hpp"

#include <fmt/format.h>

#include <string_view>

namespace redlock::detail {

using boost::system::error_code;

fence_write_back::fence_write_back(std::shared_ptr<lock_space> space, on_decided done)
    : fan_out_sink(space->nodes().size()),
      space_(std::move(space)),
      done_(std::move(done)),
      quorum_(space_->nodes().size(), space_->nodes().quorum()),
      answers_(space_->nodes().size()) {}

void fence_write_back::send(const fence_write& write, const std::string& token,
                            const std::vector<bool>& still_pending) {
  const std::string fence_text = std::to_string(write.fence);
  const std::string_view keys[] = {write.key, write.counter};
  const std::string_view args[] = {token, fence_text, write.token_is_member ? "member" : ""};
  payload_ = encode_evalsha(fence_write_back_script(), keys,
                            std::span(args, write.token_is_member ? 3 : 2));
  key_ = write.key;
  first_tag_ = open_ballot();
  const auto targets = quorum_.start(write.fence, write.counters, still_pending);
  for (std::size_t i = 0; i < answers_.size(); ++i)
    show_state(i);
  write_to(targets);
  report_if_decided();
}

void fence_write_back::late_answer(std::size_t node, std::optional<std::uint64_t> counter) {
  if (reported_) return;
  const bool write = quorum_.late_answer(node, counter);
  show_state(node);
  if (write) {
    std::vector<bool> only(answers_.size(), false);
    only[node] = true;
    write_to(only);
  }
  report_if_decided();
}

void fence_write_back::write_to(const std::vector<bool>& targets) {
  if (std::find(targets.begin(), targets.end(), true) == targets.end()) return;
  space_->nodes().send(key_, payload_, *this, first_tag_, rules_of(lock_request::fence_write_back),
                       &targets);
}

void fence_write_back::show_state(std::size_t node) {
  node_answer& shown = answers_[node];
  switch (quorum_.state(node)) {
    case fence_quorum::node_state::at_token:
      shown = node_answer{};
      shown.what = node_answer::kind::yes;
      shown.detail = "its grant's increment reached the token";
      return;
    case fence_quorum::node_state::awaited:
      shown = node_answer{};  // pending
      return;
    case fence_quorum::node_state::not_asked:
    case fence_quorum::node_state::round_pending:
      shown = node_answer{};
      shown.what = node_answer::kind::failed;
      shown.unsent = true;
      shown.detail = "not asked: it did not grant";
      return;
    case fence_quorum::node_state::written_back:
    case fence_quorum::node_state::write_back_failed:
      return;  // the write-back's own answer is shown
  }
}

void fence_write_back::on_answer(std::size_t node, const error_code& ec, const resp::value& reply) {
  std::string detail;
  const auto what = classify_script_reply(ec, reply, detail);
  fill_answer(answers_[node], what, ec, reply, std::move(detail));
  quorum_.answered(node, what == node_answer::kind::yes);
  report_if_decided();
}

void fence_write_back::report_if_decided() {
  const auto decision = quorum_.decision();
  if (reported_ || !decision) return;
  reported_ = true;
  done_(*decision, answers_);
}

void fence_write_backs::start(const std::shared_ptr<lock_space>& space,
                              const std::vector<fence_write>& plan, const std::string& token,
                              const std::vector<bool>& still_pending, const on_decided& done,
                              const std::function<bool()>& wanted) {
  each_.clear();
  for (std::size_t r = 0; r < plan.size(); ++r) {
    each_.push_back(std::make_shared<fence_write_back>(
        space,
        [done, r](bool confirmed, const node_answers& answers) { done(r, confirmed, answers); }));
  }
  const auto each = each_;  // an outcome may drop them
  for (std::size_t r = 0; r < each.size() && wanted(); ++r) {
    each[r]->send(plan[r], token, still_pending);
  }
}

void fence_write_backs::late_grant(const struct late_grant& grant) {
  const auto each = each_;  // an outcome may drop them
  for (std::size_t r = 0; r < each.size() && r < grant.counters.size(); ++r)
    each[r]->late_answer(grant.node, grant.counters[r]);
}

}  // namespace redlock::detail
