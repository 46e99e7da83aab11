#ifndef REDLOCK_LOCK_LEASE_TIMERS_HPP
#define REDLOCK_LOCK_LEASE_TIMERS_HPP

#include "clock.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/intrusive/list.hpp>
#include <boost/intrusive/set.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
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
// the reactor kept them all in its heap. Here a lease's timer is an entry that it carries itself:
// arming it allocates nothing, and the clock's one timer waits for the earliest entry only. When
// it fires, every entry due by then is called, in time order, in one turn of the executor, which
// is what lets their renewals go out together (ops/extend.cpp).
//
// Most leases are released long before their first renewal is due, so an entry is armed into an
// unordered list first (`pending_`), which costs two links to join and to leave; only when the
// clock's timer fires are the entries pending then put in order, and the due ones called. The
// timer waits for the earliest ordered entry or the earliest time any pending entry was armed for
// since the list was last emptied (`pending_earliest_`). That time is kept when its entry is
// disarmed, so the timer may fire early: it then finds nothing due, and waits again.
//
// Entries are nearly always armed in the order of their times: each renewal arms its lease half a
// TTL ahead, and leases share their TTL. An entry that comes no earlier than the last one in the
// in-order list (`in_order_`) is appended to it, through the same two links, and the first one is
// taken off it when due; only the others go into an ordered set (`ordered_`). With 100 000 leases,
// each renewal's erase from a balanced tree of that size, which rebalanced it and touched nodes
// of other leases all over memory, took a quarter of their renewals' time.
//
// Lives in the leases' home (lock_home), on the client's executor; every member is called there.
// An entry is armed only while its lease holds. A lease stops holding on the executor and is
// disarmed then; a held lease is destroyed only there (~lease hands it to the executor), and its
// destructor disarms it too.
class lease_timers {
 public:
  class entry : public boost::intrusive::set_base_hook<>,
                public boost::intrusive::list_base_hook<> {
   public:
    bool armed() const noexcept { return place_ != place::none; }

   protected:
    entry() = default;
    entry(const entry&) = delete;
    entry& operator=(const entry&) = delete;
    ~entry() = default;  // its owner disarms it first

   private:
    friend class lease_timers;
    enum class place : unsigned char { none, pending, in_order, ordered };
    // The time it was armed for has come; it is no longer armed.
    virtual void due() = 0;
    steady_clock::time_point at_{};
    place place_ = place::none;
  };

  explicit lease_timers(boost::asio::any_io_executor executor)
      : executor_(std::move(executor)), alive_(std::make_shared<char>()) {}
  lease_timers(const lease_timers&) = delete;
  lease_timers& operator=(const lease_timers&) = delete;
  ~lease_timers() {
    pending_.clear();
    in_order_.clear();
    ordered_.clear();
  }

  // Calls `e.due()` at `at`, unless armed again or disarmed before.
  void arm(entry& e, steady_clock::time_point at) {
    // Already waiting for that moment (a renewal's answer often keeps it): nothing moves.
    if (e.place_ != entry::place::none && e.at_ == at) return;
    unlink(e);
    e.at_ = at;
    e.place_ = entry::place::pending;
    pending_.push_back(e);
    if (at < pending_earliest_) pending_earliest_ = at;
    if (!firing_ && at < waiting_for_) wait_for(at);
  }
  // With other entries armed, the clock's timer may still fire for it: it then finds nothing due,
  // and waits again. With none, the wait is cancelled: an io_context whose client stopped
  // holding leases runs out of work (a tool's or a test's run() returns).
  void disarm(entry& e) noexcept {
    if (e.place_ == entry::place::none) return;
    unlink(e);
    if (armed() == 0 && timer_ && waiting_for_ != steady_clock::time_point::max()) {
      waiting_for_ = steady_clock::time_point::max();
      ++generation_;
      timer_->cancel();
    }
  }

  std::size_t armed() const noexcept {
    return pending_.size() + in_order_.size() + ordered_.size();
  }

 private:
  struct earlier {
    bool operator()(const entry& a, const entry& b) const noexcept { return a.at_ < b.at_; }
  };
  using entry_set =
      boost::intrusive::multiset<entry,
                                 boost::intrusive::base_hook<boost::intrusive::set_base_hook<>>,
                                 boost::intrusive::compare<earlier>>;
  using entry_list =
      boost::intrusive::list<entry,
                             boost::intrusive::base_hook<boost::intrusive::list_base_hook<>>>;

  // Takes `e` out of where it is armed, if it is.
  void unlink(entry& e) noexcept {
    if (e.place_ == entry::place::pending) {
      pending_.erase(pending_.iterator_to(e));
      if (pending_.empty()) pending_earliest_ = steady_clock::time_point::max();
    } else if (e.place_ == entry::place::in_order) {
      in_order_.erase(in_order_.iterator_to(e));
    } else if (e.place_ == entry::place::ordered) {
      ordered_.erase(ordered_.iterator_to(e));
    }
    e.place_ = entry::place::none;
  }

  // The ordered entry due first, if any.
  entry* first_ordered() noexcept {
    entry* first = in_order_.empty() ? nullptr : &in_order_.front();
    if (!ordered_.empty() && (first == nullptr || ordered_.begin()->at_ < first->at_))
      first = &*ordered_.begin();
    return first;
  }

  // The time the earliest armed entry may be due at: none is due before it.
  steady_clock::time_point earliest() noexcept {
    const entry* first = first_ordered();
    return std::min(first ? first->at_ : steady_clock::time_point::max(), pending_earliest_);
  }

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
    // Pending entries join the ordered ones, in the order they were armed: at the end of the
    // in-order list when none there is later, else into the set. Hinted at the end: an entry
    // out of the list's order is still mostly later than those in the set (a wrong hint costs
    // one comparison, then the usual search).
    while (!pending_.empty()) {
      entry& e = pending_.front();
      pending_.pop_front();
      if (in_order_.empty() || in_order_.back().at_ <= e.at_) {
        e.place_ = entry::place::in_order;
        in_order_.push_back(e);
      } else {
        e.place_ = entry::place::ordered;
        ordered_.insert(ordered_.end(), e);
      }
    }
    pending_earliest_ = steady_clock::time_point::max();
    {
      // Arming during the calls below waits for nothing: the timer is set once, after them.
      struct firing_scope {
        bool& firing;
        explicit firing_scope(bool& flag) : firing(flag) { firing = true; }
        ~firing_scope() { firing = false; }
      } scope(firing_);
      // Only the entries ordered now: one that a due() arms again, even for a time already past,
      // is pending, and is called in the next turn, not in a loop here.
      for (entry* e = first_ordered(); e != nullptr && e->at_ <= now; e = first_ordered()) {
        unlink(*e);
        e->due();
      }
    }
    if (armed() != 0) wait_for(earliest());
  }

  boost::asio::any_io_executor executor_;
  std::optional<lock_timer> timer_;
  entry_list pending_;
  entry_list in_order_;  // no entry earlier than the one before it
  entry_set ordered_;    // the entries that came out of the list's order
  // No pending entry is armed for earlier (max: none pending).
  steady_clock::time_point pending_earliest_ = steady_clock::time_point::max();
  steady_clock::time_point waiting_for_ = steady_clock::time_point::max();  // max: no wait
  unsigned generation_ = 0;
  bool firing_ = false;
  std::shared_ptr<char> alive_;
};

}  // namespace redlock::detail

#endif
