#ifndef REDLOCK_LOCK_LOCK_HOME_HPP
#define REDLOCK_LOCK_LOCK_HOME_HPP

#include "algo/wait_plan.hpp"
#include "lock/lease_timers.hpp"
#include "lock/local_queues.hpp"
#include "lock/node_facts.hpp"
#include "lock/operation_registry.hpp"
#include "log.hpp"
#include "redlock/observer.hpp"
#include "redlock/options.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <random>
#include <string_view>
#include <utility>

namespace redlock::detail {

// What the lock's state and machines see of the client they belong to, and nothing of how it
// reaches its nodes: the client's executor and options, its local queues, the registry that a
// shutdown ends operations and leases through, the round-trip measure and random source behind
// the waiting, the leases' timers, whether it is closed, and the nodes as facts (node_facts). The
// lock space is the one home of a client's leases and acquires (lock_space.hpp); they hold it as
// this, so that the lock knows no node set, and a unit test can give them a home of its own. Lives
// on the client's executor.
class lock_home : public operation_registry {
 public:
  const boost::asio::any_io_executor& executor() const noexcept { return executor_; }
  const client_options& options() const noexcept { return options_; }
  local_queues& queues() noexcept { return queues_; }
  const local_queues& queues() const noexcept { return queues_; }
  // client_options::observer; null when there is none.
  observer* watcher() const noexcept { return options_.observer.get(); }
  double drift_factor() const noexcept { return options_.drift_factor; }
  round_trip_average& round_trip() noexcept { return round_trip_; }
  // The leases' renewal and expiry timers (lease_state::renewal_timer).
  lease_timers& timers() noexcept { return timers_; }
  std::minstd_rand& random() noexcept { return random_; }
  void log(log_level level, std::string_view message) const {
    call_logger(options_.logger, executor_, level, message);
  }
  // The nodes, as far as the lock's decisions need them.
  virtual const node_facts& nodes_known() const noexcept = 0;

  // After the client closed, operations fail with operation_aborted.
  bool closed() const noexcept { return closed_; }
  // Whether acquires that wait may hear release announcements: a release channel is set and the
  // client is open.
  bool announces_releases() const noexcept { return !options_.release_channel.empty() && !closed_; }

 protected:
  // `random_seed`: of random().
  lock_home(boost::asio::any_io_executor executor, client_options options,
            std::minstd_rand::result_type random_seed)
      : executor_(std::move(executor)),
        options_(std::move(options)),
        queues_(options_.release_channel, options_.drift_factor),
        timers_(executor_),
        random_(random_seed) {}
  ~lock_home() = default;

  void mark_closed() noexcept { closed_ = true; }

 private:
  boost::asio::any_io_executor executor_;
  client_options options_;
  local_queues queues_;
  round_trip_average round_trip_;
  lease_timers timers_;
  std::minstd_rand random_;
  bool closed_ = false;
};

}  // namespace redlock::detail

#endif
