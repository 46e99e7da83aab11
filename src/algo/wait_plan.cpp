#include "algo/wait_plan.hpp"

namespace redlock::detail {

namespace {

steady_clock::duration pick_up_to(steady_clock::duration ceiling, std::minstd_rand& random) {
  std::uniform_int_distribution<steady_clock::duration::rep> pick(0, ceiling.count());
  return steady_clock::duration(pick(random));
}

}  // namespace

steady_clock::duration wake_jitter(steady_clock::duration round_trip, unsigned competitions_lost,
                                   std::minstd_rand& random) {
  return pick_up_to(round_trip / (1 << std::min(competitions_lost, 6u)), random);
}

steady_clock::duration collision_delay(steady_clock::duration round_trip, unsigned wakes_in_a_row,
                                       steady_clock::duration ceiling, std::minstd_rand& random) {
  auto window = round_trip * (1 << std::min(wakes_in_a_row, 5u));
  if (ceiling > steady_clock::duration::zero()) window = std::min(window, ceiling);
  return pick_up_to(window, random);
}

steady_clock::time_point wake_at(const sleep_facts& facts, steady_clock::time_point now,
                                 std::optional<steady_clock::time_point> deadline) {
  steady_clock::time_point at = facts.backoff_until;
  if (facts.free_by && !facts.may_be_free) {
    at = facts.announcements_cover ? *facts.free_by : std::min(*facts.free_by, facts.backoff_until);
  }
  return until_deadline(std::max(at, now), deadline);
}

}  // namespace redlock::detail
