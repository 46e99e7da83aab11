#ifndef REDLOCK_MUTEX_HPP
#define REDLOCK_MUTEX_HPP

#include "redlock/client.hpp"
#include "redlock/detail/default_token.hpp"
#include "redlock/error.hpp"
#include "redlock/lease.hpp"
#include "redlock/options.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <string>
#include <type_traits>
#include <utility>

namespace redlock {

/// A lock on one resource with a mutex-like interface, for code that prefers lock/unlock to
/// holding a lease. It owns at most one lease at a time; everything else (renewal, loss, release on
/// destruction) is the lease's.
///
/// @par Completion tokens
/// As client's; without one, an async_ function returns a deferred operation.
///
/// @par Thread safety
/// As client; use a mutex on the client's executor. The client must outlive it.
///
/// @see The guide: @ref md_docs_getting_started.
class mutex {
 public:
  /// The client's executor type.
  using executor_type = client::executor_type;

  /// Without `options`, lock_options{}: made here rather than as a default argument, for the g++ 12
  /// bug described at client's constructors.
  mutex(client& owner, std::string resource) : mutex(owner, std::move(resource), lock_options{}) {}
  /// A mutex on `resource`, acquired through `owner` with `options`.
  mutex(client& owner, std::string resource, lock_options options)
      : client_(&owner), resource_(std::move(resource)), options_(options) {}

  /// The client's executor, on which the mutex is to be used.
  executor_type get_executor() const noexcept { return client_->get_executor(); }
  /// The resource this mutex locks.
  const std::string& resource() const noexcept { return resource_; }

  /// True while this mutex holds the lock (the lease is held and not lost).
  bool owns_lock() const noexcept { return lease_.held(); }

  /// The lease behind a locked mutex, e.g.\ to async_wait_lost on it. After a failed lock, the
  /// failed acquire's lease, whose diagnostics() name each node's answer.
  lease& current_lease() noexcept { return lease_; }

  /// Acquires as client::async_acquire. Completion: void(error_code); errors as async_acquire, and
  /// error::invalid_argument if this mutex already owns the lock. Cancellation as async_acquire.
  /// With use_awaitable or use_future a failure is thrown as boost::system::system_error whose
  /// what() names the resource and each node's answer (current_lease().diagnostics()).
  ///
  /// @par Handler and executor
  /// As client::async_try_acquire.
  ///
  /// @par Lifetimes
  /// The mutex and its client must outlive the operation.
  template <boost::asio::completion_token_for<void(boost::system::error_code)> CompletionToken =
                detail::default_token_t<executor_type>>
  auto async_lock(CompletionToken&& token = CompletionToken()) {
    if constexpr (detail::throws_on_error<std::decay_t<CompletionToken>>::value) {
      return boost::asio::async_compose<CompletionToken, void(std::exception_ptr)>(
          lock_op<false, true>{this}, token, client_->get_executor());
    } else {
      return boost::asio::async_compose<CompletionToken, void(boost::system::error_code)>(
          lock_op<false>{this}, token, client_->get_executor());
    }
  }

  /// One round, as client::async_try_acquire. Completion: void(error_code, bool locked). The lock
  /// being held elsewhere is not an error: (success, false). Other failures: (error, false).
  /// Cancellation as async_try_acquire.
  ///
  /// @par Handler and executor
  /// As client::async_try_acquire.
  ///
  /// @par Lifetimes
  /// The mutex and its client must outlive the operation.
  template <boost::asio::completion_token_for<void(boost::system::error_code, bool)>
                CompletionToken = detail::default_token_t<executor_type>>
  auto async_try_lock(CompletionToken&& token = CompletionToken()) {
    return boost::asio::async_compose<CompletionToken, void(boost::system::error_code, bool)>(
        lock_op<true>{this}, token, client_->get_executor());
  }

  /// Releases as lease::async_release. Completion: void(error_code); error::not_held if this mutex
  /// does not own the lock (any more). The writes always go out, even if cancelled.
  ///
  /// @par Handler and executor
  /// As lease::async_release.
  ///
  /// @par Lifetimes
  /// The mutex may be destroyed once the operation has been launched (the release keeps what it
  /// needs); with a lazy token it must live until then.
  template <boost::asio::completion_token_for<void(boost::system::error_code)> CompletionToken =
                detail::default_token_t<executor_type>>
  auto async_unlock(CompletionToken&& token = CompletionToken()) {
    // The lease stays here (no longer held once the release starts): with a lazy token the release
    // only starts when the operation is launched, and must still find the lock then.
    return lease_.async_release(std::forward<CompletionToken>(token));
  }

 private:
  // Throws: complete a void(std::exception_ptr) handler (see async_lock).
  template <bool TryOnly, bool Throws = false>
  struct lock_op {
    mutex* target;
    bool rejected = false;

    template <class Self>
    void operator()(Self& self) {
      if (rejected) return finish(self, error::invalid_argument);
      if (target->owns_lock()) {
        // An operation never completes inside its initiating function: come back through the
        // executor and fail then.
        rejected = true;
        return boost::asio::post(target->get_executor(), std::move(self));
      }
      if constexpr (TryOnly) {
        target->client_->async_try_acquire(target->resource_, target->options_, std::move(self));
      } else {
        target->client_->async_acquire(target->resource_, target->options_, std::move(self));
      }
    }

    template <class Self>
    void operator()(Self& self, boost::system::error_code ec, lease acquired) {
      // Also a failed one (never held): its diagnostics() say why.
      target->lease_ = std::move(acquired);
      finish(self, ec);
    }

    template <class Self>
    void finish(Self& self, boost::system::error_code ec) {
      if constexpr (Throws) {
        std::exception_ptr failure;
        if (ec) {
          const std::string& why = target->lease_.diagnostics();
          failure = std::make_exception_ptr(boost::system::system_error(
              ec, rejected || why.empty()
                      ? "redlock: mutex on " + detail::quoted_resource(target->resource_)
                      : why));
        }
        self.complete(failure);
      } else if constexpr (TryOnly) {
        if (ec == error::contended) {
          self.complete(boost::system::error_code{}, false);
        } else {
          self.complete(ec, !ec);
        }
      } else {
        self.complete(ec);
      }
    }
  };

  client* client_;
  std::string resource_;
  lock_options options_;
  lease lease_;
};

}  // namespace redlock

#endif
