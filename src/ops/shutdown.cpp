#include "ops/shutdown.hpp"

#include "lock/lease_state.hpp"
#include "lock_space.hpp"
#include "ops/lease_end.hpp"
#include "ops/vote.hpp"
#include "redlock/error.hpp"

#include <utility>
#include <vector>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

// The releases an async_shutdown waits for, owned by those releases' handlers only.
struct client_shutdown::progress {
  std::shared_ptr<error_code> outcome_of_client;
  std::size_t releases_pending = 0;
  error_code outcome;  // the first failure
  std::vector<std::shared_ptr<user_operation>> waiters;

  void release_answered(error_code ec) {
    // A key that is no longer ours on a quorum (it expired) is as gone as a released one.
    if (ec && ec != error::not_held && !outcome) outcome = ec;
    if (--releases_pending == 0) finish_waiters();
  }

  void finish_waiters() {
    *outcome_of_client = outcome;
    auto done = std::move(waiters);
    waiters.clear();
    for (auto& waiter : done)
      waiter->finish(outcome);
  }
};

void client_shutdown::run(lock_space& space, std::shared_ptr<user_operation> waiter) {
  if (done_) {
    if (!waiter) return;
    if (auto under_way = in_progress_.lock()) {
      waiter->start();
      under_way->waiters.push_back(std::move(waiter));
    } else {
      waiter->finish(*outcome_);
    }
    return;
  }
  done_ = true;
  for (auto* op : space.operations())
    op->abort();
  // Started only now, or the loop above would have aborted it too.
  auto under_way = std::make_shared<progress>();
  under_way->outcome_of_client = outcome_;
  in_progress_ = under_way;
  if (waiter) {
    waiter->start();
    under_way->waiters.push_back(std::move(waiter));
  }
  for (auto* state : space.leases<lease_state>()) {
    if (state->current() != lease_state::phase::held) continue;
    if (under_way->waiters.empty()) {
      const auto how = release_on_nodes(*state);
      state->stop_holding(lease_state::phase::released, asio::error::operation_aborted,
                          how.next_waiter);
      state->report(&observer::on_release, error_code{});
      continue;
    }
    // Before the space is closed, which would fail the release at once. Its handler runs posted
    // on the executor, so the count cannot reach zero inside this loop.
    ++under_way->releases_pending;
    initiate_release(
        state->shared_from_this(),
        void_caller{void_handler([under_way](error_code ec) { under_way->release_answered(ec); }),
                    true});
  }
  // The releases just queued still go out, also those kept for a node whose link broke (which
  // takes a reconnect); then each connection closes.
  const auto& options = space.options();
  space.close(2 * options.node_timeout + options.connect_timeout);
  if (under_way->releases_pending == 0) under_way->finish_waiters();
}

}  // namespace redlock::detail
