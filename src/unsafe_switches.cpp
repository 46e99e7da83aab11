#include "unsafe_switches.hpp"

namespace redlock::detail {

std::atomic<bool> skip_fence_write_back_for_tests{false};

}  // namespace redlock::detail
