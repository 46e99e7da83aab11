#include "unsafe_switches.hpp"

namespace redlock::detail {

std::atomic<bool> skip_fence_write_back_for_tests{false};
std::atomic<known_defect> defect_for_tests{known_defect::none};
std::atomic<int> renewal_tick_ms_for_tests{0};

}  // namespace redlock::detail
