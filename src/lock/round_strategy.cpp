#include "lock/round_strategy.hpp"

#include <fmt/format.h>

namespace redlock::detail {

std::string round_strategy::cross_slot_problem(bool fencing) const {
  if (keys_in_one_slot(fencing)) return {};
  return fmt::format(
      "redlock: cannot acquire {} on a Redis Cluster node: its keys would not share one hash "
      "slot, because the name holds a '}}' but no hash tag; give it one, as in \"{{orders}}:42\"",
      subject());
}

}  // namespace redlock::detail
