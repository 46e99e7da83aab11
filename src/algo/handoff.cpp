#include "algo/handoff.hpp"

namespace redlock::detail {

handoff decide_handoff(const handoff_inputs& in) {
  handoff out;
  out.handoffs_in_a_row = in.handoffs_in_a_row;
  if (!in.holder) return out;
  if (!in.waiting) {
    out.handoffs_in_a_row = 0;
    return out;
  }
  if (in.certain && in.handoffs_in_a_row < in.local_handoffs) {
    out.announce = false;
    out.handoffs_in_a_row = in.handoffs_in_a_row + 1;
    return out;
  }
  out.handoffs_in_a_row = 0;
  out.next_waiter_competes = true;
  const auto longest = std::chrono::duration<double, std::milli>(
      static_cast<double>(in.longest_ttl.count()) * (1.0 + in.drift_factor) + 1.0);
  out.key_gone_by = in.now + std::chrono::duration_cast<steady_clock::duration>(longest);
  return out;
}

}  // namespace redlock::detail
