#ifndef REDLOCK_DETAIL_INITIATE_HPP
#define REDLOCK_DETAIL_INITIATE_HPP

// The non-template entry points behind the public async_ functions. The public templates only
// adapt completion tokens (asio::async_initiate); every operation is implemented once, in src/.

#include "redlock/config.hpp"
#include "redlock/detail/quoted_resource.hpp"
#include "redlock/inspection.hpp"
#include "redlock/options.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace redlock {
class lease;
namespace detail {

class client_impl;
struct lease_state;
struct lease_access;

using void_handler = boost::asio::any_completion_handler<void(boost::system::error_code)>;

// A caller's handler, type-erased, and whether it completes on the client's own executor.
template <class Signature>
struct caller_handler {
  boost::asio::any_completion_handler<Signature> handler;
  bool on_client_executor = false;
};

// The executor of the client behind `client` or `state`; an empty one for a null state.
REDLOCK_API const boost::asio::any_io_executor& executor_of(const client_impl& client) noexcept;
REDLOCK_API const boost::asio::any_io_executor& executor_of(const lease_state* state) noexcept;

// Erases `handler`, noting whether its associated executor (defaulting to `io`) is `io` itself.
// Such a handler (a coroutine on the client's executor, a plain callback) is then completed
// through `io`, which saves type-erasing its executor: an allocation per operation.
template <class Signature, class Handler>
caller_handler<Signature> erase_handler(Handler&& handler, const boost::asio::any_io_executor& io) {
  bool same = false;
  using executor =
      boost::asio::associated_executor_t<std::decay_t<Handler>, boost::asio::any_io_executor>;
  if constexpr (std::is_same_v<executor, boost::asio::any_io_executor>) {
    same = io && boost::asio::get_associated_executor(handler, io) == io;
  }
  return {boost::asio::any_completion_handler<Signature>(std::forward<Handler>(handler)), same};
}

using void_caller = caller_handler<void(boost::system::error_code)>;
// What an acquire completes with: the lease, held or not (see client::async_acquire).
using acquire_signature = void(boost::system::error_code, redlock::lease);

// What an inspection completes with (client::async_inspect, semaphore::async_inspect).
using inspect_signature = void(boost::system::error_code, inspection);
using inspect_permits_signature = void(boost::system::error_code, std::vector<inspection>);

REDLOCK_API void initiate_inspect(const std::shared_ptr<client_impl>& client, std::string resource,
                                  caller_handler<inspect_signature> caller);
REDLOCK_API void initiate_inspect_permits(const std::shared_ptr<client_impl>& client,
                                          std::string name, std::size_t permits,
                                          caller_handler<inspect_permits_signature> caller);
REDLOCK_API void initiate_extend_by_token(const std::shared_ptr<client_impl>& client,
                                          std::string resource, std::string token,
                                          std::chrono::milliseconds ttl, void_caller caller);
REDLOCK_API void initiate_release_by_token(const std::shared_ptr<client_impl>& client,
                                           std::string resource, std::string token,
                                           void_caller caller);
REDLOCK_API void initiate_ping(const std::shared_ptr<client_impl>& client, void_caller caller);
REDLOCK_API void initiate_shutdown(const std::shared_ptr<client_impl>& client, void_caller caller);
REDLOCK_API void initiate_release(const std::shared_ptr<lease_state>& state, void_caller caller);
REDLOCK_API void initiate_extend(const std::shared_ptr<lease_state>& state,
                                 std::chrono::milliseconds ttl, void_caller caller);
REDLOCK_API void initiate_wait_lost(const std::shared_ptr<lease_state>& state, void_caller caller);

// Named initiations of the public async_ functions, rather than lambdas: an adapter may ask the
// initiation for its executor (get_executor()) before it launches the operation, as Asio's
// cancel_after does to arm its timer. Each holds what the operation runs on, and is cheap to copy:
// lazy tokens (deferred) keep it until the operation is launched.
class client_initiation {
 public:
  using executor_type = boost::asio::any_io_executor;

  explicit client_initiation(std::shared_ptr<client_impl> client) noexcept
      : client_(std::move(client)) {}
  // The client's executor, on which the operation runs.
  executor_type get_executor() const noexcept { return executor_of(*client_); }

 protected:
  std::shared_ptr<client_impl> client_;
};

class lease_initiation {
 public:
  using executor_type = boost::asio::any_io_executor;

  explicit lease_initiation(std::shared_ptr<lease_state> state) noexcept
      : state_(std::move(state)) {}
  // The lease's client's executor; empty for a lease that was never acquired.
  executor_type get_executor() const noexcept { return executor_of(state_.get()); }

 protected:
  std::shared_ptr<lease_state> state_;
};

struct ping_initiation : client_initiation {
  using client_initiation::client_initiation;
  template <class Handler>
  void operator()(Handler&& handler) const {
    initiate_ping(client_, erase_handler<void(boost::system::error_code)>(
                               std::forward<Handler>(handler), executor_of(*client_)));
  }
};

struct inspect_initiation : client_initiation {
  using client_initiation::client_initiation;
  template <class Handler>
  void operator()(Handler&& handler, std::string resource) const {
    initiate_inspect(
        client_, std::move(resource),
        erase_handler<inspect_signature>(std::forward<Handler>(handler), executor_of(*client_)));
  }
};

struct inspect_permits_initiation : client_initiation {
  using client_initiation::client_initiation;
  template <class Handler>
  void operator()(Handler&& handler, std::string name, std::size_t permits) const {
    initiate_inspect_permits(client_, std::move(name), permits,
                             erase_handler<inspect_permits_signature>(
                                 std::forward<Handler>(handler), executor_of(*client_)));
  }
};

struct extend_by_token_initiation : client_initiation {
  using client_initiation::client_initiation;
  template <class Handler>
  void operator()(Handler&& handler, std::string resource, std::string token,
                  std::chrono::milliseconds ttl) const {
    initiate_extend_by_token(client_, std::move(resource), std::move(token), ttl,
                             erase_handler<void(boost::system::error_code)>(
                                 std::forward<Handler>(handler), executor_of(*client_)));
  }
};

struct release_by_token_initiation : client_initiation {
  using client_initiation::client_initiation;
  template <class Handler>
  void operator()(Handler&& handler, std::string resource, std::string token) const {
    initiate_release_by_token(client_, std::move(resource), std::move(token),
                              erase_handler<void(boost::system::error_code)>(
                                  std::forward<Handler>(handler), executor_of(*client_)));
  }
};

struct shutdown_initiation : client_initiation {
  using client_initiation::client_initiation;
  template <class Handler>
  void operator()(Handler&& handler) const {
    initiate_shutdown(client_, erase_handler<void(boost::system::error_code)>(
                                   std::forward<Handler>(handler), executor_of(*client_)));
  }
};

struct release_initiation : lease_initiation {
  using lease_initiation::lease_initiation;
  template <class Handler>
  void operator()(Handler&& handler) const {
    initiate_release(state_, erase_handler<void(boost::system::error_code)>(
                                 std::forward<Handler>(handler), executor_of(state_.get())));
  }
};

struct extend_initiation : lease_initiation {
  using lease_initiation::lease_initiation;
  template <class Handler>
  void operator()(Handler&& handler, std::chrono::milliseconds ttl) const {
    initiate_extend(state_, ttl,
                    erase_handler<void(boost::system::error_code)>(std::forward<Handler>(handler),
                                                                   executor_of(state_.get())));
  }
};

struct wait_lost_initiation : lease_initiation {
  using lease_initiation::lease_initiation;
  template <class Handler>
  void operator()(Handler&& handler) const {
    initiate_wait_lost(state_, erase_handler<void(boost::system::error_code)>(
                                   std::forward<Handler>(handler), executor_of(state_.get())));
  }
};

}  // namespace detail
}  // namespace redlock

#endif
