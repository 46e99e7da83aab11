// The library's randomness in a simulation (src/entropy.hpp): drawn from the world's seeded
// generator, so that tokens and jitter are the same in every replay of a seed.

#include "entropy.hpp"
#include "sim/runtime/world.hpp"

namespace redlock::detail {

void lock_random_bytes(unsigned char* out, std::size_t n) {
  auto& random = sim::world::current().random();
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<unsigned char>(random() >> 56);
}

std::uint32_t lock_random_seed() {
  return static_cast<std::uint32_t>(sim::world::current().random()() >> 32);
}

}  // namespace redlock::detail
