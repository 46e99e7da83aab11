#ifndef REDLOCK_TEST_SUPPORT_LOCK_RECORDER_HPP
#define REDLOCK_TEST_SUPPORT_LOCK_RECORDER_HPP

#include "redlock/client.hpp"
#include "redlock/lease.hpp"
#include "redlock/options.hpp"
#include "support/history.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <string>
#include <tuple>
#include <utility>

namespace redlock::test {

// A lock taken once, without renewal: what most fault scenarios hold.
inline lock_options plain_lock(std::chrono::milliseconds ttl) {
  lock_options options;
  options.ttl = ttl;
  options.auto_renew = false;
  return options;
}

// One client of a history: acquires, extends and releases through the library and records what
// it saw, for check_mutual_exclusion. Unsafe variants record by hand what they would believe.
class lock_recorder {
 public:
  lock_recorder(history& log, std::string process, std::string resource)
      : log_(log), process_(std::move(process)), resource_(std::move(resource)) {}

  const std::string& resource() const noexcept { return resource_; }

  boost::asio::awaitable<lease> try_acquire(client& locks, const lock_options& options) {
    return acquire(locks, options, true);
  }

  // async_acquire: rounds until acquired, `options.wait` or cancellation.
  boost::asio::awaitable<lease> acquire(client& locks, const lock_options& options,
                                        bool one_round = false) {
    constexpr auto tuple = boost::asio::as_tuple(boost::asio::use_awaitable);
    const auto invoke = mono_now();
    boost::system::error_code ec;
    lease acquired;
    if (one_round) {
      std::tie(ec, acquired) = co_await locks.async_try_acquire(resource_, options, tuple);
    } else {
      std::tie(ec, acquired) = co_await locks.async_acquire(resource_, options, tuple);
    }
    event e{process_,
            resource_,
            acquired.token(),
            op_kind::acquire,
            op_result::ok,
            invoke,
            mono_now(),
            0,
            std::chrono::duration_cast<std::chrono::nanoseconds>(options.ttl).count()};
    if (ec) {
      e.result = op_result::failed;
    } else {
      e.valid_until = to_mono_ns(acquired.valid_until());
    }
    log_.record(e);
    last_error_ = ec;
    co_return std::move(acquired);
  }

  // Records the validity the lease reports afterwards, whatever the outcome: an extension that
  // failed may still have shortened it.
  boost::asio::awaitable<boost::system::error_code> extend(lease& held,
                                                           std::chrono::milliseconds ttl) {
    const auto invoke = mono_now();
    auto [ec] = co_await held.async_extend(ttl, boost::asio::as_tuple(boost::asio::use_awaitable));
    record_extended(held.token(), invoke, ec ? op_result::failed : op_result::ok,
                    to_mono_ns(held.valid_until()));
    last_error_ = ec;
    co_return ec;
  }

  boost::asio::awaitable<boost::system::error_code> release(lease& held) {
    const auto invoke = mono_now();
    const std::string token = held.token();
    auto [ec] = co_await held.async_release(boost::asio::as_tuple(boost::asio::use_awaitable));
    log_.record({process_, resource_, token, op_kind::release,
                 ec ? op_result::failed : op_result::ok, invoke, mono_now(), 0, 0});
    co_return ec;
  }

  // What an unsafe client does by hand; `believed_until` is how long it then thinks it holds.
  void record_acquired(const std::string& token, mono_ns invoke, mono_ns believed_until) {
    log_.record({process_, resource_, token, op_kind::acquire, op_result::ok, invoke, mono_now(),
                 believed_until, 0});
  }
  void record_extended(const std::string& token, mono_ns invoke, op_result result,
                       mono_ns believed_until) {
    log_.record({process_, resource_, token, op_kind::extend, result, invoke, mono_now(),
                 believed_until, 0});
  }
  void record_released(const std::string& token, mono_ns invoke) {
    log_.record(
        {process_, resource_, token, op_kind::release, op_result::ok, invoke, mono_now(), 0, 0});
  }
  void record_lost(const std::string& token) {
    const auto now = mono_now();
    log_.record({process_, resource_, token, op_kind::lost, op_result::ok, now, now, 0, 0});
  }

  boost::system::error_code last_error() const noexcept { return last_error_; }

 private:
  history& log_;
  std::string process_;
  std::string resource_;
  boost::system::error_code last_error_;
};

}  // namespace redlock::test

#endif
