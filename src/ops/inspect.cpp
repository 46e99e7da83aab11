#include "ops/inspect.hpp"

#include "algo/inspection.hpp"
#include "completion.hpp"
#include "config/options_check.hpp"
#include "lock/key_names.hpp"
#include "lock/scripts.hpp"
#include "lock_space.hpp"
#include "ops/lock_requests.hpp"
#include "ops/vote.hpp"
#include "resp/encoder.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// One read of some keys (one lock's, or every slot of a semaphore) on every node, waiting for every
// node's answer (each has node_timeout) or a cancellation. Read-only: nothing to undo when it is
// cancelled or the client shuts down, which complete it at once with what was read so far.
// `Result` is inspection (one key) or std::vector<inspection> (a semaphore's slots).
template <class Result>
class inspect_op final : public abortable,
                         public fan_out_sink,
                         public std::enable_shared_from_this<inspect_op<Result>> {
 public:
  inspect_op(std::shared_ptr<lock_space> space, std::vector<std::string> keys,
             caller_handler<void(error_code, Result)>&& caller)
      : fan_out_sink(space->nodes().size()),
        space_(std::move(space)),
        keys_(std::move(keys)),
        done_(std::move(caller.handler), space_->executor(), caller.on_client_executor),
        pending_(space_->nodes().size()) {
    for (const auto& key : keys_) {
      inspection& seen = seen_.emplace_back();
      seen.resource = key;
      seen.quorum = space_->nodes().quorum();
      for (std::size_t node = 0; node < space_->nodes().size(); ++node) {
        auto& holding = seen.nodes.emplace_back();
        holding.address = space_->nodes().node(node).address();
      }
    }
  }

  // `problem`: why the arguments cannot be inspected; empty when they can.
  void start(std::string_view problem = {}) {
    if (space_->closed())
      return complete(asio::error::operation_aborted, "the client is shut down");
    if (keys_.front().empty()) problem = "redlock: cannot inspect an empty resource name";
    if (!problem.empty()) return complete(error::invalid_argument, problem);
    space_->track(this);
    done_.on_cancel([weak = this->weak_from_this()](asio::cancellation_type) {
      if (auto self = weak.lock()) self->complete(asio::error::operation_aborted, "cancelled");
    });
    std::vector<std::string_view> command{"EVAL", read_holdings_script};
    const std::string key_count = std::to_string(keys_.size());
    command.push_back(key_count);
    for (const auto& key : keys_)
      command.push_back(key);
    resp::encode_command(payload_, command);
    space_->nodes().send(keys_.front(), payload_, *this, open_ballot(),
                         rules_of(lock_request::read));
  }

  void abort() override { complete(asio::error::operation_aborted, "the client is shut down"); }

 private:
  std::shared_ptr<void> owner() override { return this->shared_from_this(); }

  void on_answer(std::size_t node, const error_code& ec, const resp::value& reply) override {
    if (done_.done()) return;
    auto holdings = read_holdings(seen_.front().nodes[node].address, ec, reply, keys_.size());
    for (std::size_t key = 0; key < keys_.size(); ++key)
      seen_[key].nodes[node] = std::move(holdings[key]);
    if (--pending_ == 0) complete({}, {});
  }

  // Judges what was read and completes; with fewer than a quorum of answers, no_quorum.
  void complete(error_code ec, std::string_view why) {
    if (done_.done()) return;
    space_->untrack(this);
    for (auto& seen : seen_) {
      judge(seen);
      if (!why.empty()) {
        seen.diagnostics = std::string(why);
      } else if (seen.answered() < seen.quorum) {
        ec = error::no_quorum;
        seen.diagnostics = fmt::format(
            "redlock: inspecting {}: {} of {} nodes answered (quorum {})",
            quoted_resource(seen.resource), seen.answered(), seen.nodes.size(), seen.quorum);
      }
    }
    if constexpr (std::is_same_v<Result, inspection>) {
      done_.complete(ec, std::move(seen_.front()));
    } else {
      done_.complete(ec, std::move(seen_));
    }
  }

  std::shared_ptr<lock_space> space_;
  std::vector<std::string> keys_;
  completion<error_code, Result> done_;
  std::vector<inspection> seen_;  // by key
  std::size_t pending_;           // nodes still to answer
  std::string payload_;           // read by the connections until every node has answered
};

}  // namespace

void start_inspect(const std::shared_ptr<lock_space>& space, std::string resource,
                   caller_handler<inspect_signature> caller) {
  std::vector<std::string> keys;
  keys.push_back(std::move(resource));
  std::make_shared<inspect_op<inspection>>(space, std::move(keys), std::move(caller))->start();
}

void start_inspect_permits(const std::shared_ptr<lock_space>& space, std::string name,
                           std::size_t permits, caller_handler<inspect_permits_signature> caller) {
  std::vector<std::string> keys;
  std::string problem;
  if (name.empty()) {
    problem = "redlock: cannot inspect a semaphore without a name";
  } else if (permits == 0 || permits > most_permits) {
    problem = fmt::format("redlock: cannot inspect semaphore {}: {} permits, not 1..{}",
                          quoted_resource(name), permits, most_permits);
  }
  if (!problem.empty()) {
    keys.push_back(std::move(name));  // one inspection, to carry the diagnostics
  } else {
    for (std::size_t slot = 0; slot < permits; ++slot)
      keys.push_back(semaphore_slot_key(name, slot));
  }
  std::make_shared<inspect_op<std::vector<inspection>>>(space, std::move(keys), std::move(caller))
      ->start(problem);
}

}  // namespace redlock::detail
