#ifndef REDLOCK_LEASE_HPP
#define REDLOCK_LEASE_HPP

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>

#include "redlock/detail/initiate.hpp"
#include "redlock/error.hpp"

namespace redlock {

// A lock held (or once held) on a resource: the result of client::async_acquire and
// client::async_try_acquire. Move-only.
//
// While held and lock_options::auto_renew is on, a renewal task on the client's executor extends
// the lock at half of its TTL. If the lock cannot be kept (a quorum of nodes says the key is gone
// or owned by someone else, or validity runs out before a quorum confirms an extension) the lease
// is *lost*: held() turns false and async_wait_lost completes with error::lock_lost.
//
// Destroying a lease that is still held stops the renewal and starts a bounded, best-effort
// release on every node; the destructor never blocks and never throws.
//
// Thread safety: a lease belongs to its client's executor. Call its members there (with a
// multi-threaded io_context, through the strand the client was given). A default-constructed lease
// has no executor; its operations complete through the handler's associated executor.
class lease {
 public:
  using executor_type = boost::asio::any_io_executor;

  lease() noexcept = default;
  lease(lease&& other) noexcept
      : state_(std::move(other.state_)), acquired_(std::exchange(other.acquired_, false)) {}
  // Releases (best effort, as the destructor) what this lease held before taking `other`'s lock.
  lease& operator=(lease&& other) noexcept;
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  ~lease();

  // The client's executor; a default-constructed lease has none (empty executor).
  executor_type get_executor() const noexcept;

  const std::string& resource() const noexcept;

  // The random value stored in the lock key on each node (40 hex digits); empty if never held.
  const std::string& token() const noexcept;

  // Until when (steady_clock) the lock is guaranteed to be ours, given the TTL, the time the
  // acquire or the last extension took, and the drift allowance. Meaningless unless held().
  std::chrono::steady_clock::time_point valid_until() const noexcept;

  // True while the lock is ours: acquired, not released, not lost, and valid_until() not passed.
  bool held() const noexcept;

  // Why the last operation on this lease (or the acquire that returned it) failed, naming the
  // nodes and what each answered; empty after a success. For logs and error messages.
  const std::string& diagnostics() const noexcept;

  // Deletes the lock on every node, but only where it still holds our token (compare-and-DEL in
  // Lua). Renewal stops before the release is sent.
  //
  // Completion: void(error_code). Success: no quorum of nodes contradicted us. error::not_held: a
  // quorum said the key was gone or foreign (the lock had been lost). error::no_quorum: too few
  // nodes answered; keys left behind expire with their TTL. operation_aborted: cancelled or the
  // client was destroyed. Releasing a lease that is not held completes with error::not_held.
  //
  // Cancellation (terminal, partial, total): the operation completes at once, but the writes to the
  // nodes always go out; cancelling never leaves the lock behind.
  template <class CompletionToken BOOST_ASIO_DEFAULT_COMPLETION_TOKEN_TYPE(executor_type)>
  auto async_release(CompletionToken&& token BOOST_ASIO_DEFAULT_COMPLETION_TOKEN(executor_type)) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        [](auto handler, std::shared_ptr<detail::lease_state> state) {
          detail::initiate_release(state,
                                   detail::erase_handler<void(boost::system::error_code)>(
                                       std::move(handler), detail::executor_of(state.get())));
        },
        token, state_);
  }

  // Extends the lock to `ttl` from now on every node where it still holds our token
  // (compare-and-PEXPIRE in Lua; a missing key is never re-created). Succeeds only if a quorum
  // confirms within the current validity; valid_until() is then recomputed from the extension's
  // start.
  //
  // Completion: void(error_code). error::not_held: the lease is not held, or a quorum said the key
  // is gone or foreign (the lease is then lost). error::no_quorum: too few nodes confirmed in time
  // (the lease stays held until valid_until()). error::invalid_argument: ttl not greater than the
  // drift allowance. operation_aborted: cancelled or the client was destroyed.
  //
  // Cancellation (terminal, partial): completes at once; the extension may still take effect on
  // some nodes, which only lengthens a lock we hold.
  template <class CompletionToken BOOST_ASIO_DEFAULT_COMPLETION_TOKEN_TYPE(executor_type)>
  auto async_extend(std::chrono::milliseconds ttl,
                    CompletionToken&& token BOOST_ASIO_DEFAULT_COMPLETION_TOKEN(executor_type)) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        [](auto handler, std::shared_ptr<detail::lease_state> state,
           std::chrono::milliseconds ttl) {
          detail::initiate_extend(state, ttl,
                                  detail::erase_handler<void(boost::system::error_code)>(
                                      std::move(handler), detail::executor_of(state.get())));
        },
        token, state_, ttl);
  }

  // Waits until the lease is lost.
  //
  // Completion: void(error_code). error::lock_lost: the lock could not be kept. operation_aborted:
  // the lease was released or destroyed, the client was destroyed, or the wait was cancelled.
  // error::not_held: the lease was never held. Completes at once if the lease is already lost.
  //
  // Cancellation (terminal, partial, total): completes with operation_aborted; nothing else
  // changes.
  template <class CompletionToken BOOST_ASIO_DEFAULT_COMPLETION_TOKEN_TYPE(executor_type)>
  auto async_wait_lost(CompletionToken&& token BOOST_ASIO_DEFAULT_COMPLETION_TOKEN(executor_type)) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        [](auto handler, std::shared_ptr<detail::lease_state> state) {
          detail::initiate_wait_lost(state,
                                     detail::erase_handler<void(boost::system::error_code)>(
                                         std::move(handler), detail::executor_of(state.get())));
        },
        token, state_);
  }

 private:
  friend class detail::client_impl;
  lease(std::shared_ptr<detail::lease_state> state, bool acquired) noexcept
      : state_(std::move(state)), acquired_(acquired) {}

  std::shared_ptr<detail::lease_state> state_;
  // Whether the acquire that made this lease succeeded: only then may the destructor have a lock
  // to release. Known without reading the state, which belongs to the client's executor.
  bool acquired_ = false;
};

}  // namespace redlock

#endif
