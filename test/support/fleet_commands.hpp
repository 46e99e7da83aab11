#ifndef REDLOCK_TEST_SUPPORT_FLEET_COMMANDS_HPP
#define REDLOCK_TEST_SUPPORT_FLEET_COMMANDS_HPP

#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <string_view>

namespace redlock::test {

// Sends `command` to every server of `fleet` that is running, each on a connection of its own,
// and waits for each reply (up to 2 s); a server that refuses it throws.
inline void on_every_node(redis_fleet& fleet, std::initializer_list<std::string_view> command) {
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    if (!fleet[i].running()) continue;
    sync_client client(fleet[i].port(), {}, {}, std::chrono::seconds(2));
    client.command(command);
  }
}

}  // namespace redlock::test

#endif
