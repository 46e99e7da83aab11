#ifndef REDLOCK_TEST_SIM_RUNTIME_WORLD_HPP
#define REDLOCK_TEST_SIM_RUNTIME_WORLD_HPP

// The scheduler of a simulated run: virtual time, the events due at future instants (timer
// expiries, deliveries of bytes, faults), and the event loops of the simulated processes. One
// thread runs everything; nothing happens between two steps, so a run is a pure function of its
// seed.
//
// A step runs every ready handler of every process's io_context (in a fixed order, again and again
// until none is left), then moves the clock to the earliest event and runs it. Events due at the
// same instant run in the order they were scheduled.

#include "clock/virtual_clock.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

namespace redlock::sim {

using time_point = detail::lock_clock::time_point;
using duration = detail::lock_clock::duration;

class world {
 public:
  using event_id = std::pair<time_point, std::uint64_t>;

  // Starts a run: the clock at its epoch, `seed` deciding every random choice. There is one world
  // per thread at a time (the library's timers and streams find it through current()).
  explicit world(std::uint64_t seed);
  ~world();
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  static world& current();
  static time_point now() noexcept { return detail::lock_clock::now(); }

  // `what` runs at `when` (now if earlier); returns an id for cancel().
  event_id at(time_point when, std::function<void()> what);
  event_id after(duration delay, std::function<void()> what) {
    return at(now() + delay, std::move(what));
  }
  // Whether the event was still pending.
  bool cancel(const event_id& id);

  // A process's event loop. Its handlers run only while it is not stalled; stalled_until moves
  // its next turn (a process whose event loop is blocked: a GC pause, a slow callback).
  struct process {
    boost::asio::io_context context{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> busy =
        boost::asio::make_work_guard(context);
    time_point stalled_until{};
  };
  process& add_process();
  const std::vector<std::unique_ptr<process>>& processes() const noexcept { return processes_; }

  // Runs ready handlers, then the next event. False when there was no event left.
  bool step();
  // Steps until `done()` holds after a step, or until the next event would come after `limit`
  // (or none is left); then the clock moves on to `limit`. Returns whether `done()` held.
  bool run_until(const std::function<bool()>& done, time_point limit);
  // When the next event is due, or a stalled process wakes: time_point::max() if never.
  time_point next_instant() const;
  // Runs every handler that is ready now, without moving the clock.
  void settle();

  std::mt19937_64& random() noexcept { return random_; }
  // A uniform integer in [low, high].
  std::int64_t uniform(std::int64_t low, std::int64_t high);
  // true with probability `p`.
  bool chance(double p);

  // The world is being destroyed: its event loops go, with what they hold, and nothing may be
  // posted to them any more.
  bool closing() const noexcept { return closing_; }

  std::size_t pending_events() const noexcept { return events_.size(); }
  std::uint64_t events_run() const noexcept { return events_run_; }

 private:
  std::map<event_id, std::function<void()>> events_;
  std::uint64_t next_sequence_ = 0;
  std::uint64_t events_run_ = 0;
  std::vector<std::unique_ptr<process>> processes_;
  std::mt19937_64 random_;
  world* previous_ = nullptr;
  bool closing_ = false;
};

}  // namespace redlock::sim

#endif
