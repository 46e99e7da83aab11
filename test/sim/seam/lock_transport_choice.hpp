#ifndef REDLOCK_TEST_SIM_SEAM_LOCK_TRANSPORT_CHOICE_HPP
#define REDLOCK_TEST_SIM_SEAM_LOCK_TRANSPORT_CHOICE_HPP

// The transport seam's choice for the simulation (src/lock_transport_choice.hpp): every
// connection of the library runs over the simulated network to a model server.

#include "sim/runtime/sim_transport.hpp"

namespace redlock::detail {

using lock_transport = sim::sim_transport;

}  // namespace redlock::detail

#endif
