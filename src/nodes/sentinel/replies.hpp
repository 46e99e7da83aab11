#ifndef REDLOCK_NODES_SENTINEL_REPLIES_HPP
#define REDLOCK_NODES_SENTINEL_REPLIES_HPP

#include "nodes/cluster/topology.hpp"
#include "resp/value.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace redlock::detail {

// What a sentinel node reads in the sentinels' answers: pure functions, unit-tested without a
// network (test/unit/test_sentinel_replies.cpp).

// A sentinel's answer to SENTINEL GET-MASTER-ADDR-BY-NAME: the master it names, or why none.
struct master_answer {
  std::optional<cluster_endpoint> master;
  // Why there is none, naming the sentinel `from`: empty when there is one.
  std::string problem;
  // The sentinel does not know the master's name (a nil reply): a configuration error that
  // asking again will not cure, unlike a sentinel that is down or answers nonsense.
  bool unknown_name = false;
};
master_answer read_master_answer(const resp::value& reply, std::string_view from,
                                 std::string_view master_name);

// The payload of a "+switch-master" message, "NAME old-ip old-port new-ip new-port": the new
// master when it is about `master_name`, else nothing (another group's, or unreadable).
std::optional<cluster_endpoint> switched_to(std::string_view text, std::string_view master_name);

// When the master last changed, for people (redlock status).
struct master_record {
  // Since when the sentinels have named this master: as the sentinel that answered knows it
  // (SENTINEL MASTER's role-reported-time: its switch to it, or its own start when it never
  // switched), else when the node heard of the switch (+switch-master) or first adopted it.
  std::chrono::system_clock::time_point since{};
  std::optional<long long> config_epoch;  // the group's; unknown after an announced switch
};

// From a SENTINEL MASTER reply (name, value, ... as a RESP2 array or a RESP3 map) read at `now`:
// the record of `master`. Nothing when the reply describes another address (a switch in
// between), lacks role-reported-time or is an error.
std::optional<master_record> read_master_record(const resp::value& reply,
                                                const cluster_endpoint& master,
                                                std::chrono::system_clock::time_point now);

}  // namespace redlock::detail

#endif
