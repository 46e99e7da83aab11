#ifndef REDLOCK_OPS_ACQUIRE_DRIVER_HPP
#define REDLOCK_OPS_ACQUIRE_DRIVER_HPP

#include "clock.hpp"
#include "completion.hpp"
#include "lock/acquire_machine.hpp"
#include "ops/fence_write_back.hpp"
#include "ops/vote.hpp"
#include "redlock/detail/initiate.hpp"
#include "wake_timer.hpp"

#include <memory>

namespace redlock::detail {

// Drives one acquire_machine: carries out its actions with the node set, one timer and the
// caller's completion, and turns what happens (replies, the timer, the local queues' calls,
// cancellation, the fencing write-backs' outcomes) into the machine's inputs, each with the time
// it happened. Decides nothing itself.
using moment = steady_clock::time_point;

class acquire_driver final : public abortable,
                             public fan_out_sink,
                             public queued_acquire,
                             private announcement_facts,
                             public std::enable_shared_from_this<acquire_driver> {
 public:
  acquire_driver(std::shared_ptr<lock_space> space, std::unique_ptr<round_strategy> strategy,
                 std::shared_ptr<lease_state> lease, const lock_options& options, bool single_round,
                 caller_handler<acquire_signature>&& caller);

  // What the acquire's lease is to be (a set's resources, a companion key): told before start().
  lease_state& lease() const noexcept { return *machine_.lease(); }
  void start() {
    // One owner both keeps the driver alive through the drive and is what the queues keep.
    const std::shared_ptr<queued_acquire> self = shared_from_this();
    drive([&](acquire_machine& m, moment now) { m.start(now, self); }, true);
  }

  void wake() override {
    drive([](acquire_machine& m, moment now) { m.wake(now); });
  }
  void compete(moment key_gone_by) override {
    drive([=](acquire_machine& m, moment now) { m.compete(key_gone_by, now); });
  }
  void announced(std::size_t node, std::size_t slot) override {
    drive([=](acquire_machine& m, moment now) { m.announced(node, slot, now); });
  }
  void permit_released_here(std::size_t slot) override {
    drive([=](acquire_machine& m, moment now) { m.permit_released_here(slot, now); });
  }
  void subscription_changed(bool subscribed) override {
    const bool settled = space_->announcements_settled(lease().resource());
    drive(
        [=](acquire_machine& m, moment now) { m.subscription_changed(subscribed, settled, now); });
  }
  void claims_until(moment until) override {
    drive([=](acquire_machine& m, moment) { m.claims_until(until); });
  }
  void abort() override { cancel(boost::asio::cancellation_type::terminal); }

 private:
  std::shared_ptr<void> owner() override { return shared_from_this(); }
  bool announcements_cover(std::string_view resource) const override {
    return space_->announcements_cover(resource);
  }
  void on_answer(std::size_t node, const boost::system::error_code& ec,
                 const resp::value& reply) override {
    drive([&](acquire_machine& m, moment now) { m.answer(node, ec, reply, now); }, true);
  }
  void on_earlier_answer(std::size_t ballot, std::size_t node, const boost::system::error_code& ec,
                         const resp::value& reply) override {
    drive([&](acquire_machine& m, moment) { m.earlier_answer(ballot, node, ec, reply); }, true);
  }
  void cancel(boost::asio::cancellation_type type) {
    drive([=](acquire_machine& m, moment) { m.cancel(type); });
  }

  // Gives the machine one input at the time it happens, then carries out what it asks, oldest
  // first. An input that comes while an action is carried out (see acquire_machine on
  // reentrancy) only adds its actions to the outer call's. Leaving the queues may drop the last
  // owner: `pinned` says the caller holds one (a reply's request, the timer's wait).
  template <class Input>
  void drive(Input&& input, bool pinned = false) {
    if (!pinned) {
      const auto keep_alive = shared_from_this();
      return drive_pinned(input);
    }
    drive_pinned(input);
  }
  template <class Input>
  void drive_pinned(Input& input) {
    input_time_ = lock_clock::now();
    input(machine_, input_time_);
    if (driving_) return;
    driving_ = true;
    while (auto action = machine_.next_action())
      perform(*action);
    driving_ = false;
  }

  void perform(const acquire_action& action);
  void write_back_fence();
  void complete(boost::system::error_code ec);

  std::shared_ptr<lock_space> space_;
  acquire_machine machine_;
  completion<boost::system::error_code, redlock::lease> done_;
  wake_timer timer_;
  fence_write_backs write_backs_;  // the held round's
  bool driving_ = false;
  // When the latest input happened. An outcome is decided by an input, and reported with its
  // time: the observer's event needs no clock reading of its own.
  moment input_time_{};
};

}  // namespace redlock::detail

#endif
