#ifndef REDLOCK_LOCK_SPACE_HPP
#define REDLOCK_LOCK_SPACE_HPP

#include "algo/wait_plan.hpp"
#include "lock/lease_home.hpp"
#include "lock/lease_state.hpp"
#include "log.hpp"
#include "nodes/node_set.hpp"
#include "nodes/release_announcements.hpp"
#include "redlock/options.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <random>
#include <string_view>
#include <vector>

namespace redlock::detail {

// What every operation and lease of one client shares: the node set, the local queues and the
// release announcements that feed them, the round-trip measure behind the waiting, and the
// registry of what a shutdown ends (the lease_home part, all that a lease sees of it). The client
// (client_impl) makes it and shuts it down; operations and leases keep it alive while they run.
// Lives on the client's executor.
class lock_space : public lease_home, public std::enable_shared_from_this<lock_space> {
 public:
  lock_space(boost::asio::any_io_executor executor, std::vector<node_config> nodes,
             client_options options);

  node_set& nodes() noexcept { return nodes_; }
  const node_set& nodes() const noexcept { return nodes_; }
  const client_options& options() const noexcept { return nodes_.options(); }
  void log(log_level level, std::string_view message) const { nodes_.log(level, message); }

  // Release announcements (client_options::release_channel), for acquires that wait. Null when
  // announcements are off or the client is closed. Created on first use.
  release_announcements* listener();

  // Whether acquires that wait may hear release announcements: a release channel is set and the
  // client is open.
  bool announces_releases() const noexcept {
    return !options().release_channel.empty() && !closed_;
  }
  // Every node is subscribed for `resource` (release_announcements::covers): a release of it would
  // be heard. Only looks: false while nobody listens.
  bool announcements_cover(std::string_view resource) const noexcept {
    return announces_releases() && listener_ && listener_->covers(resource);
  }
  // No node's subscription for `resource` is in its first attempt (release_announcements::settled);
  // true when there are no announcements to wait for. Only looks.
  bool announcements_settled(std::string_view resource) const noexcept {
    if (!announces_releases()) return true;
    return listener_ && listener_->settled(resource);
  }

  round_trip_average& round_trip() noexcept { return round_trip_; }
  std::minstd_rand& random() noexcept { return random_; }

  // After close(), operations fail with operation_aborted; the connections close once the
  // requests queued on them are out (within `drain_bound`).
  bool closed() const noexcept { return closed_; }
  void close(std::chrono::milliseconds drain_bound);

 private:
  node_set nodes_;
  std::shared_ptr<release_announcements> listener_;  // over nodes_, which outlives it
  round_trip_average round_trip_;
  std::minstd_rand random_;
  bool closed_ = false;
};

// The lock space a lease belongs to. Every lease's home is its client's lock space: leases are
// made only by the operations of a lock space, with it (start_acquire and the others).
inline lock_space& space_of(const lease_state& lease) noexcept {
  return static_cast<lock_space&>(*lease.home());
}
inline std::shared_ptr<lock_space> shared_space_of(const lease_state& lease) noexcept {
  return std::static_pointer_cast<lock_space>(lease.home());
}

}  // namespace redlock::detail

#endif
