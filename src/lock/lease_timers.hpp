#ifndef REDLOCK_LOCK_LEASE_TIMERS_HPP
#define REDLOCK_LOCK_LEASE_TIMERS_HPP

#include "clock.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/intrusive/set.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

namespace redlock::detail {

using std::chrono::steady_clock;

// The renewal and expiry timers of every lease of one client, on one timer of the clock.
//
// A client may hold a hundred thousand leases, each re-armed twice per renewal. With a timer each,
// every re-arm cancelled a wait (whose handler then ran for nothing) and allocated a new one, and
// the reactor kept them all in its heap. Here a lease's timer is an entry in an ordered set that
// it carries itself: arming it allocates nothing, and the clock's one timer waits for the earliest
// entry only. When it fires, every entry due by then is called, in time order, in one turn of the
// executor, which is what lets their renewals go out together (ops/extend.cpp).
//
// Lives in the leases' home (lock_home), on the client's executor; every member is called there.
// An entry is armed only while its lease holds. A lease stops holding on the executor and is
// disarmed then; a held lease is destroyed only there (~lease hands it to the executor), and its
// destructor disarms it too.
class lease_timers {
 public:
  class entry : public boost::intrusive::set_base_hook<> {
   public:
    bool armed() const noexcept { return is_linked(); }

   protected:
    entry() = default;
    entry(const entry&) = delete;
    entry& operator=(const entry&) = delete;
    ~entry() = default;  // its owner disarms it first

   private:
    friend class lease_timers;
    // The time it was armed for has come; it is no longer armed.
    virtual void due() = 0;
    steady_clock::time_point at_{};
  };

  explicit lease_timers(boost::asio::any_io_executor executor)
      : executor_(std::move(executor)), alive_(std::make_shared<char>()) {}
  lease_timers(const lease_timers&) = delete;
  lease_timers& operator=(const lease_timers&) = delete;
  ~lease_timers() { armed_.clear(); }

  // Calls `e.due()` at `at`, unless armed again or disarmed before.
  void arm(entry& e, steady_clock::time_point at) {
    if (e.is_linked()) {
      // Already waiting for that moment (a renewal's answer often keeps it): nothing moves.
      if (e.at_ == at) return;
      armed_.erase(armed_.iterator_to(e));
    }
    e.at_ = at;
    // Hinted at the end: a lease is mostly armed for its next renewal, half a TTL away, later
    // than every entry armed before it with the same TTL; there the insert costs no search down
    // the tree (a wrong hint costs one comparison, then the usual search).
    armed_.insert(armed_.end(), e);
    if (!firing_ && at < waiting_for_) wait_for(at);
  }
  // With other entries armed, the clock's timer may still fire for it: it then finds nothing due,
  // and waits again. With none, the wait is cancelled: an io_context whose client stopped
  // holding leases runs out of work (a tool's or a test's run() returns).
  void disarm(entry& e) noexcept {
    if (!e.is_linked()) return;
    armed_.erase(armed_.iterator_to(e));
    if (armed_.empty() && timer_ && waiting_for_ != steady_clock::time_point::max()) {
      waiting_for_ = steady_clock::time_point::max();
      ++generation_;
      timer_->cancel();
    }
  }

  std::size_t armed() const noexcept { return armed_.size(); }

 private:
  struct earlier {
    bool operator()(const entry& a, const entry& b) const noexcept { return a.at_ < b.at_; }
  };
  using entry_set = boost::intrusive::multiset<entry, boost::intrusive::compare<earlier>>;

  void wait_for(steady_clock::time_point at) {
    waiting_for_ = at;
    const unsigned generation = ++generation_;
    if (!timer_) timer_.emplace(executor_);
    timer_->expires_at(at);
    // A wait that completed before the timer was set again is stale: its generation tells it.
    // The set may be gone when a wait completes (the client destroyed): `alive` tells that.
    timer_->async_wait(
        [this, alive = std::weak_ptr<char>(alive_), generation](boost::system::error_code ec) {
          if (ec || !alive.lock() || generation != generation_) return;
          fire();
        });
  }

  void fire() {
    waiting_for_ = steady_clock::time_point::max();
    const auto now = lock_clock::now();
    {
      // Arming during the calls below waits for nothing: the timer is set once, after them.
      struct firing_scope {
        bool& firing;
        explicit firing_scope(bool& flag) : firing(flag) { firing = true; }
        ~firing_scope() { firing = false; }
      } scope(firing_);
      // At most the entries armed now: a due() that arms its entry again for a time already past
      // is called again in the next turn, not in a loop here.
      for (std::size_t budget = armed_.size();
           budget > 0 && !armed_.empty() && armed_.begin()->at_ <= now; --budget) {
        entry& e = *armed_.begin();
        armed_.erase(armed_.begin());
        e.due();
      }
    }
    if (!armed_.empty()) wait_for(armed_.begin()->at_);
  }

  boost::asio::any_io_executor executor_;
  std::optional<lock_timer> timer_;
  entry_set armed_;
  steady_clock::time_point waiting_for_ = steady_clock::time_point::max();  // max: no wait
  unsigned generation_ = 0;
  bool firing_ = false;
  std::shared_ptr<char> alive_;
};

}  // namespace redlock::detail

#endif
