#ifndef REDLOCK_NET_LINK_FAILURES_HPP
#define REDLOCK_NET_LINK_FAILURES_HPP

#include "backoff.hpp"
#include "entropy.hpp"
#include "redlock/options.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace redlock::detail {

// What one node's connection keeps of its failures, with no socket or timer: the most recent
// cause, whether the last connect failed in a way that retrying will not fix, and how long to wait
// before the next connect attempt. The connection tells it what happened (a step of the link
// failed, a connect attempt ended) and acts on what it says.
class link_failures {
 public:
  // `name` ("host:port") starts last_error(); `seed` seeds the jitter of the reconnect delays.
  link_failures(std::string name, const retry_policy& reconnect,
                std::uint32_t seed = lock_random_seed());

  // A step of a link (resolve, connect, handshake, read, write, health check) failed with `ec`;
  // `what` is the cause without the node's name.
  void record(boost::system::error_code ec, std::string_view what);
  // The connection cannot go on (an exception from deep inside, which only resource exhaustion
  // throws): `what` becomes the last error.
  void record_internal_failure(std::string_view what);

  // A connect attempt ended with `ec`; success: the link is up.
  void connect_finished(boost::system::error_code ec) noexcept;

  // The link is down: how long to wait before the next connect attempt. Exponential backoff with
  // full jitter over the retry_policy, grown by every failure since the last successful connect.
  std::chrono::milliseconds next_delay();

  // "host:port: cause"; empty if there was none.
  const std::string& last_error() const noexcept { return last_error_; }
  // The same without the node's name, for the texts of requests that fail because of it.
  const std::string& last_cause() const noexcept { return last_cause_; }
  // Set while the last connect attempt failed in a way that retrying will not fix until someone
  // changes a configuration (is_permanent_connect_failure); cleared by a successful connect.
  boost::system::error_code permanent_failure() const noexcept { return permanent_failure_; }

 private:
  std::string name_;
  std::string last_error_;
  std::string last_cause_;
  boost::system::error_code permanent_failure_;
  backoff backoff_;
  std::minstd_rand jitter_;
};

}  // namespace redlock::detail

#endif
