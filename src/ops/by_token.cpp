#include "ops/by_token.hpp"

#include "algo/replies.hpp"
#include "algo/validity.hpp"
#include "call_observer.hpp"
#include "lock/scripts.hpp"
#include "ops/lock_requests.hpp"
#include "ops/vote.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <span>
#include <string_view>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// A lock known by its token only, as another process (or an operator) hands it over: the same
// token-checked scripts as a lease's, with no validity to keep and no renewal to plan. What the
// nodes answer is all there is, so the outcome is the vote's.
class by_token_op final : public operation_vote {
 public:
  enum class kind : std::uint8_t { extend, release };

  by_token_op(std::shared_ptr<lock_space> space, void_caller&& caller, kind what,
              std::string resource, std::string token)
      : operation_vote(std::move(space), std::move(caller), vote_replies::token_script),
        what_(what),
        resource_(std::move(resource)),
        token_(std::move(token)) {}

  // Why the arguments cannot work; empty when they can.
  std::string problem(std::chrono::milliseconds ttl) const {
    if (resource_.empty()) return "redlock: a lock without a resource name";
    if (token_.empty())
      return fmt::format("redlock: {}: an empty token", quoted_resource(resource_));
    if (what_ == kind::extend) {
      const auto drift = drift_allowance(ttl, space()->options().drift_factor);
      if (ttl <= drift) {
        return fmt::format(
            "redlock: cannot extend {} by {} ms: not longer than the drift allowance of {} ms",
            quoted_resource(resource_), ttl.count(), to_ms(drift));
      }
    }
    return {};
  }

  void extend(std::chrono::milliseconds ttl) {
    const std::string ttl_text = std::to_string(ttl.count());
    const std::string_view keys[] = {resource_};
    const std::string_view args[] = {token_, ttl_text};
    extend_payload_ = encode_evalsha(extend_script(), std::span(keys), args);
    space()->nodes().send(resource_, extend_payload_, *this, open_ballot(),
                          rules_of(lock_request::extend));
  }

  void release() {
    auto& nodes = space()->nodes();
    release_payload_ = encode_release(nodes, hold_keys::lock_key(resource_), token_,
                                      space()->options().release_channel);
    // Its key's lifetime is not known here: kept for a node that is down only while it reconnects.
    nodes.send(resource_, release_payload_, *this, open_ballot(),
               release_rules(hold_kind::lock, space()->options().connect_timeout), nullptr);
  }

  // Ends it before anything is sent, telling the observer.
  void refuse(error_code ec) {
    report(ec);
    finish(ec);
  }

 private:
  std::optional<error_code> decide(const tally& t) override {
    return what_ == kind::extend ? extension_outcome(t) : release_outcome(t);
  }

  void decided(error_code ec) override {
    if (ec) {
      space()->log(
          log_level::warning,
          fmt::format(
              "redlock: {} {} by token: {}: {}", what_ == kind::extend ? "extending" : "releasing",
              quoted_resource(resource_), ec.message(),
              space()->nodes().describe(answers(), what_ == kind::extend ? "extended" : "released",
                                        "not ours", nullptr, quoted_keys({resource_}))));
    }
    report(ec);
    finish(ec);
  }

  void report(error_code ec) {
    observer* const watcher = space()->watcher();
    if (watcher == nullptr) return;
    call_observer(*watcher, space()->executor(),
                  what_ == kind::extend ? &observer::on_extend : &observer::on_release,
                  lease_event{.resource = resource_, .error = ec, .held = {}});
  }

  kind what_;
  std::string resource_;
  std::string token_;
  // Read by the connections until every node has answered.
  std::string extend_payload_;
  payload_by_node_kind release_payload_;
};

}  // namespace

void start_extend_by_token(const std::shared_ptr<lock_space>& space, std::string resource,
                           std::string token, std::chrono::milliseconds ttl, void_caller caller) {
  auto op = std::make_shared<by_token_op>(space, std::move(caller), by_token_op::kind::extend,
                                          std::move(resource), std::move(token));
  if (space->closed()) return op->refuse(asio::error::operation_aborted);
  if (const auto problem = op->problem(ttl); !problem.empty()) {
    space->log(log_level::warning, problem);
    return op->refuse(error::invalid_argument);
  }
  // Total cancellation is not honoured, as for a lease's extension: once sent it may apply.
  op->start();
  op->extend(ttl);
}

void start_release_by_token(const std::shared_ptr<lock_space>& space, std::string resource,
                            std::string token, void_caller caller) {
  auto op = std::make_shared<by_token_op>(space, std::move(caller), by_token_op::kind::release,
                                          std::move(resource), std::move(token));
  if (space->closed()) return op->refuse(asio::error::operation_aborted);
  if (const auto problem = op->problem({}); !problem.empty()) {
    space->log(log_level::warning, problem);
    return op->refuse(error::invalid_argument);
  }
  op->start();
  op->release();
}

}  // namespace redlock::detail
