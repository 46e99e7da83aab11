#ifndef REDLOCK_LOCK_LEASE_MACHINE_HPP
#define REDLOCK_LOCK_LEASE_MACHINE_HPP

#include "algo/extension_validity.hpp"

#include <boost/container/small_vector.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace redlock::detail {

using std::chrono::steady_clock;

// One thing a held lease asks of its driver (ops/extend.cpp).
struct lease_action {
  enum class kind : std::uint8_t {
    // Wake lease_machine::timer at `at` (the earlier of the next renewal and the validity's end).
    arm_timer,
    // Send extension number `id` by `ttl` to every node (extend_script, token-checked); its
    // outcome goes to extension_decided. `from_renewal`: the renewal's own, not a user's.
    send_extension,
    // The validity ran out: the lease is lost (lease_machine::why_expired says why).
    expire,
  };
  // The two small members last: 32 bytes instead of 40, and every lease keeps room for two.
  steady_clock::time_point at{};
  std::chrono::milliseconds ttl{0};
  std::uint64_t id = 0;
  kind what = kind::arm_timer;
  bool from_renewal = false;
};

// The renewal and expiry of one held lease, with no I/O and no clock: every input says what time
// it is, and its effects are lease_actions the driver takes with next_action(). How extensions move
// the validity is extension_validity's; when to renew and by how much, renewal_due and
// plan_renewal's (both algo/extension_validity.hpp). This is the bookkeeping around them.
//
// One timer serves renewal and expiry: it is armed for the earlier of the next renewal and the
// validity's end, so a loss is reported on time also while an extension is in flight or after
// max_hold stopped renewal. With auto_renew, the renewal is due half a TTL before the validity
// ends; a failed one is retried soon while the validity lasts (renewal_retry_at); the one that
// reaches acquired_at + max_hold is the last.
class lease_machine {
 public:
  struct settings {
    std::chrono::milliseconds ttl{0};
    bool auto_renew = false;
    std::optional<std::chrono::milliseconds> max_hold{};
    double drift_factor = 0.01;
  };
  explicit lease_machine(const settings& how) : settings_(how) {}

  const extension_validity& validity() const noexcept { return validity_; }
  const std::optional<std::chrono::milliseconds>& max_hold() const noexcept {
    return settings_.max_hold;
  }
  // Why the validity ran out, for the loss it is reported as.
  enum class expiry : std::uint8_t {
    max_hold,                    // the last extension before max_hold ran its course
    last_extension_unconfirmed,  // ... was not confirmed by a quorum in time
    ttl_without_renewal,         // auto_renew off, no extension pending
    extension_unconfirmed,       // an extension was not confirmed in time
  };
  expiry why_expired() const noexcept;

  std::optional<lease_action> next_action();

  // ---- Inputs. ----
  // Held from `acquired_at` (the winning round's start), valid until `valid_until`.
  void held(steady_clock::time_point acquired_at, steady_clock::time_point valid_until);
  // The timer asked for last is due.
  void timer(steady_clock::time_point now);
  // The lease's keys now live on another master (a failover, a slot that moved): renew now
  // instead of at half-life. With a renewal in flight, one more extension goes out beside it.
  // Nothing without auto_renew or after max_hold stopped renewal.
  void renew_now(steady_clock::time_point now);
  // A user's extension by `ttl` (longer than the drift allowance; the lease is held).
  void extend(std::chrono::milliseconds ttl, steady_clock::time_point now);
  // Extension `id` was decided with `ec` by the vote: returns how it counts (a confirmation that
  // came too late to count is no_quorum).
  boost::system::error_code extension_decided(std::uint64_t id, bool from_renewal,
                                              boost::system::error_code ec,
                                              steady_clock::time_point now);
  // After extension_decided, while the lease is still held: the next renewal, and the timer.
  void plan_after_extension(bool from_renewal, bool failed, steady_clock::time_point now);
  // The lease is no longer held: nothing more is asked.
  void stop() noexcept {
    ended_ = true;
    actions_.clear();
    head_ = 0;
  }

  // For tests: when the next renewal is due (max: none).
  steady_clock::time_point next_renewal() const noexcept { return next_renewal_; }

 private:
  void ask(const lease_action& action) {
    if (!ended_) actions_.push_back(action);
  }
  // Only the latest wake-up matters: one still waiting to be carried out is replaced, so that a
  // renewal asks for two actions (send, then arm), which stay within actions_'s own storage, and
  // arms the timer once.
  void arm() {
    const auto pending = actions_.begin() + static_cast<std::ptrdiff_t>(head_);
    actions_.erase(std::remove_if(pending, actions_.end(),
                                  [](const lease_action& a) {
                                    return a.what == lease_action::kind::arm_timer;
                                  }),
                   actions_.end());
    ask({.at = std::min(next_renewal_, validity_.valid_until()),
         .what = lease_action::kind::arm_timer});
  }
  // When the next renewal is due for the validity claimed now.
  void schedule();
  // renewal_due for the validity claimed now, at the start of its tick (renewal_tick_start).
  steady_clock::time_point renewal_due_now() const;
  void renew(steady_clock::time_point now);
  void send(std::chrono::milliseconds ttl, bool from_renewal, steady_clock::time_point now);

  settings settings_;
  extension_validity validity_;
  steady_clock::time_point acquired_at_{};
  steady_clock::time_point next_renewal_ = steady_clock::time_point::max();  // max: none due
  bool renewal_in_flight_ = false;
  bool stopped_by_max_hold_ = false;
  bool ended_ = false;
  boost::container::small_vector<lease_action, 2> actions_;
  std::size_t head_ = 0;
};

}  // namespace redlock::detail

#endif
