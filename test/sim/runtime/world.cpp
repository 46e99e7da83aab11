#include "sim/runtime/world.hpp"

#include <stdexcept>

namespace redlock::sim {

namespace {
thread_local world* current_world = nullptr;
}  // namespace

world::world(std::uint64_t seed) : random_(seed), previous_(current_world) {
  detail::lock_clock::start_run();
  current_world = this;
}

world::~world() {
  closing_ = true;
  // Handlers still queued refer to objects of the run: they are destroyed, not run, with the
  // processes (an io_context's destructor destroys what it holds).
  for (auto& p : processes_)
    p->busy.reset();
  processes_.clear();
  events_.clear();
  current_world = previous_;
}

world& world::current() {
  if (!current_world) throw std::logic_error("sim: no world on this thread");
  return *current_world;
}

world::event_id world::at(time_point when, std::function<void()> what) {
  if (when < now()) when = now();
  event_id id{when, next_sequence_++};
  events_.emplace(id, std::move(what));
  return id;
}

bool world::cancel(const event_id& id) {
  return events_.erase(id) > 0;
}

world::process& world::add_process() {
  processes_.push_back(std::make_unique<process>());
  return *processes_.back();
}

void world::settle() {
  for (;;) {
    std::size_t ran = 0;
    for (auto& p : processes_) {
      if (p->stalled_until > now()) continue;
      ran += p->context.poll();
    }
    if (ran == 0) return;
  }
}

time_point world::next_instant() const {
  // A stalled process's end of stall is an instant like an event's.
  time_point next = time_point::max();
  if (!events_.empty()) next = events_.begin()->first.first;
  for (const auto& p : processes_) {
    if (p->stalled_until > now() && p->stalled_until < next) next = p->stalled_until;
  }
  return next;
}

bool world::step() {
  settle();
  const time_point next = next_instant();
  if (next == time_point::max()) return false;
  detail::lock_clock::advance_to(next);
  if (!events_.empty() && events_.begin()->first.first <= now()) {
    auto first = events_.begin();
    auto what = std::move(first->second);
    events_.erase(first);
    ++events_run_;
    what();
  }
  return true;
}

bool world::run_until(const std::function<bool()>& done, time_point limit) {
  for (;;) {
    settle();
    if (done()) return true;
    if (next_instant() > limit) {
      // Nothing happens before the limit: time still passes up to it (keys expire, leases run
      // out), as it would for a program that waits.
      if (limit != time_point::max() && now() < limit) detail::lock_clock::advance_to(limit);
      settle();
      return done();
    }
    step();
  }
}

std::int64_t world::uniform(std::int64_t low, std::int64_t high) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(random_);
}

bool world::chance(double p) {
  return std::bernoulli_distribution(p)(random_);
}

}  // namespace redlock::sim
