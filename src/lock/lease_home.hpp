#ifndef REDLOCK_LOCK_LEASE_HOME_HPP
#define REDLOCK_LOCK_LEASE_HOME_HPP

#include "lock/local_queues.hpp"
#include "lock/operation_registry.hpp"
#include "redlock/observer.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <string>
#include <utility>

namespace redlock::detail {

// What a lease needs of the client it belongs to, and nothing of how the client reaches its
// nodes: the client's executor, its local queues, the registry that a shutdown ends leases
// through, the observer and the drift factor. The lock space is the one home of every lease of a
// client (lock_space.hpp); lease_state holds it as this, so that the lock's state knows no node
// set. Lives on the client's executor.
class lease_home : public operation_registry {
 public:
  const boost::asio::any_io_executor& executor() const noexcept { return executor_; }
  local_queues& queues() noexcept { return queues_; }
  const local_queues& queues() const noexcept { return queues_; }
  // client_options::observer; null when there is none.
  observer* watcher() const noexcept { return watcher_; }
  // client_options::drift_factor.
  double drift_factor() const noexcept { return drift_factor_; }

 protected:
  // `release_channel` and `drift_factor` as in client_options; `watcher` may be null, and must
  // outlive this object.
  lease_home(boost::asio::any_io_executor executor, const std::string& release_channel,
             double drift_factor, observer* watcher)
      : executor_(std::move(executor)),
        queues_(release_channel, drift_factor),
        watcher_(watcher),
        drift_factor_(drift_factor) {}
  ~lease_home() = default;

 private:
  boost::asio::any_io_executor executor_;
  local_queues queues_;
  observer* watcher_;
  double drift_factor_;
};

}  // namespace redlock::detail

#endif
