#ifndef REDLOCK_RW_LOCK_HPP
#define REDLOCK_RW_LOCK_HPP

#include "redlock/client.hpp"
#include "redlock/detail/default_token.hpp"
#include "redlock/detail/run_holding.hpp"
#include "redlock/error.hpp"
#include "redlock/lease.hpp"
#include "redlock/options.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace redlock {

namespace detail {
REDLOCK_API void initiate_acquire_rw(const std::shared_ptr<client_impl>& client, std::string name,
                                     bool write, const lock_options& options, bool single_round,
                                     caller_handler<acquire_signature> caller);

// rw_lock's acquires; With Throws as acquire_initiation.
template <bool Throws>
struct rw_initiation : client_initiation {
  using client_initiation::client_initiation;
  template <class Handler>
  void operator()(Handler&& handler, std::string name, bool write, const lock_options& options,
                  bool single_round) const {
    if constexpr (Throws) {
      initiate_acquire_rw(
          client_, std::move(name), write, options, single_round,
          erase_handler<acquire_signature>(
              throw_with_diagnostics<std::decay_t<Handler>>{std::forward<Handler>(handler)},
              executor_of(*client_)));
    } else {
      initiate_acquire_rw(
          client_, std::move(name), write, options, single_round,
          erase_handler<acquire_signature>(std::forward<Handler>(handler), executor_of(*client_)));
    }
  }
};
}  // namespace detail

/// Any number of readers or one writer, never both, across the client's nodes: for work that may
/// run side by side but not beside a change (readers of a cache or a configuration, and its
/// rebuild or reload; queries, and a schema migration).
///
/// On every node one script decides atomically, as SET NX does for the mutex:
///  - A reader is granted when no writer holds the lock and no writer waits there. Each reader is
///    an entry of a sorted set (`{name}:read`), scored by its own deadline on the node's clock, so
///    a reader that crashed stops counting at its own TTL without anyone's help, and extending one
///    reader never keeps another alive.
///  - A writer (`{name}:write`) is granted when there is neither a writer nor a live reader. One
///    refused by live readers marks the lock there (`{name}:write-waiting`, with the writer's TTL)
///    and new readers are refused while the mark lives.
///
/// A lease is held when a quorum granted it within its validity, exactly as a lock; so a reader
/// and a writer, or two writers, never hold at once under the mutex's assumptions: their two
/// quorums share a node, whose script refused one of them.
///
/// @par Fairness
/// A waiting writer keeps its marks while they stand on a quorum of nodes, and renews them with a
/// round at least every third of its TTL, so readers that arrive after its marks cannot win a
/// quorum and a stream of readers does not starve it: it gets the lock once the readers that held
/// before it leave or expire. Marks that stand on fewer nodes (two writers waiting at once split
/// them) are deleted on every node, and those writers back off as after a split vote. A writer that
/// gives up deletes its marks. Within one client, acquires of one rw_lock queue in FIFO order,
/// readers holding together; a writer first in line contends at once, also while this client's
/// readers hold.
///
/// Keys of one lock share the hash slot of `name` (a name without a hash tag is made one), as a
/// Redis Cluster node needs; a name with a '}' and no tag is refused on a cluster node.
///
/// The returned lease renews, reports loss (async_wait_lost), extends, releases and is released by
/// its destructor like a lock's; lease::resource() is the key it holds: `{name}:read` for a reader,
/// `{name}:write` for a writer. Releases announce themselves on the release channel when a writer
/// may now win (the last live reader gone) or readers may (a writer's key or mark deleted), and
/// wake waiters in every client.
///
/// @par Fencing (lock_options::fencing)
/// Writers take strictly increasing tokens, as a lock's leases do (`{name}:fence`). A reader takes
/// none of its own: its fencing_token() is the highest token the nodes that granted it had given,
/// i.e. the token of the last writer before it (0 before the first). A storage that records the
/// highest writer token it has accepted can refuse a reader whose token is lower: that reader's
/// lease ended (it paused past its TTL) and a newer writer has written since.
///
/// @par Completion tokens
/// As client's; without one, an async_ function returns a deferred operation.
///
/// @par Thread safety
/// As client; use an rw_lock on the client's executor. The client must outlive it. The object
/// itself is a small value (name, options): copies refer to the same lock.
///
/// @see The guide: @ref md_docs_rw_lock.
class rw_lock {
 public:
  /// The client's executor type.
  using executor_type = client::executor_type;

  /// Never throws for bad arguments: an empty `name` or invalid `options` make every acquire
  /// complete with error::invalid_argument, naming the problem. Without `options`, lock_options{}:
  /// made here rather than as a default argument, for the g++ 12 bug described at client's
  /// constructors.
  rw_lock(client& owner, std::string name) : rw_lock(owner, std::move(name), lock_options{}) {}
  /// A read-write lock named `name`, acquired through `owner` with `options`; bad arguments as for
  /// the constructor without `options`.
  rw_lock(client& owner, std::string name, lock_options options)
      : client_(&owner), name_(std::move(name)), options_(options) {}

  /// The client's executor, on which the rw_lock is to be used.
  executor_type get_executor() const noexcept { return client_->get_executor(); }
  /// The lock's name, as given to the constructor.
  const std::string& name() const noexcept { return name_; }
  /// The lock options of every acquire, as given to the constructor.
  const lock_options& options() const noexcept { return options_; }

  /// Acquires the lock for reading: rounds with jittered exponential backoff (lock_options::retry),
  /// woken early by release announcements, until held, lock_options::wait elapses
  /// (error::wait_timeout), or the operation is cancelled.
  ///
  /// @par Completion
  /// void(error_code, lease). On success the lease is held() as a reader.
  ///
  /// @par Errors
  /// error::wait_timeout, error::invalid_argument (an empty name, bad options, two nodes found to
  /// be one server, keys that would not share a cluster node's hash slot), operation_aborted
  /// (cancelled, or the client was destroyed), and the codes of condition::node_failure when
  /// misconfigured nodes leave no quorum possible. On failure the lease is not held and its
  /// diagnostics() names the lock and each node's answer. With use_awaitable or use_future the
  /// error is thrown as boost::system::system_error with that text.
  ///
  /// @par Cancellation
  /// As client::async_acquire.
  ///
  /// @par Handler and executor
  /// As client::async_try_acquire.
  ///
  /// @par Lifetimes
  /// The name and options are copied, so the rw_lock object may go away once the operation is
  /// launched; the client may be destroyed while it runs, which completes it with
  /// operation_aborted.
  template <boost::asio::completion_token_for<void(boost::system::error_code, lease)>
                CompletionToken = detail::default_token_t<executor_type>>
  auto async_acquire_read(CompletionToken&& token = CompletionToken()) {
    return initiate(false, false, std::forward<CompletionToken>(token));
  }

  /// Acquires the lock for writing: as async_acquire_read, and on success the lease is held() as
  /// the only writer. While it waits for readers it marks the lock (see the class comment); the
  /// marks are deleted when it ends without the lock (wait_timeout, cancellation, errors).
  template <boost::asio::completion_token_for<void(boost::system::error_code, lease)>
                CompletionToken = detail::default_token_t<executor_type>>
  auto async_acquire_write(CompletionToken&& token = CompletionToken()) {
    return initiate(true, false, std::forward<CompletionToken>(token));
  }

  /// One round, without waiting: completion and errors as async_acquire_read, plus
  /// error::contended when a writer holds or waits (as far as this round saw), or a writing lease
  /// or an earlier acquire of this client holds or waits, and error::no_quorum when too few nodes
  /// answered. Cancellation: terminal and partial, as a round of async_acquire_read.
  template <boost::asio::completion_token_for<void(boost::system::error_code, lease)>
                CompletionToken = detail::default_token_t<executor_type>>
  auto async_try_acquire_read(CompletionToken&& token = CompletionToken()) {
    return initiate(false, true, std::forward<CompletionToken>(token));
  }

  /// One round for writing, without waiting: as async_try_acquire_read, error::contended also when
  /// readers hold (a refused try deletes any mark it set).
  template <boost::asio::completion_token_for<void(boost::system::error_code, lease)>
                CompletionToken = detail::default_token_t<executor_type>>
  auto async_try_acquire_write(CompletionToken&& token = CompletionToken()) {
    return initiate(true, true, std::forward<CompletionToken>(token));
  }

 private:
  template <class CompletionToken>
  auto initiate(bool write, bool single_round, CompletionToken&& token) {
    if constexpr (detail::throws_on_error<std::decay_t<CompletionToken>>::value) {
      return boost::asio::async_initiate<CompletionToken, void(std::exception_ptr, lease)>(
          detail::rw_initiation<true>(client_->impl_), token, name_, write, options_, single_round);
    } else {
      return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, lease)>(
          detail::rw_initiation<false>(client_->impl_), token, name_, write, options_,
          single_round);
    }
  }

  client* client_;
  std::string name_;
  lock_options options_;
};

/// Acquires `lock` for reading (rw_lock::async_acquire_read), runs `body(lease&)`, and always
/// releases; everything else (loss cancelling the body, errors thrown as system_error) as
/// with_lock.
///
/// @par F
/// As with_lock's.
template <class F>
auto with_read_lock(rw_lock& lock, F body) -> typename detail::with_read_lock_body<F>::type {
  lease held = co_await lock.async_acquire_read(boost::asio::use_awaitable);
  if constexpr (detail::with_read_lock_body<F>::valid) {
    co_return co_await detail::run_holding(held, body);
  } else {
    co_return;  // only after the static_assert has failed
  }
}

/// Acquires `lock` for writing (rw_lock::async_acquire_write), runs `body(lease&)`, and always
/// releases; as with_read_lock otherwise.
template <class F>
auto with_write_lock(rw_lock& lock, F body) -> typename detail::with_write_lock_body<F>::type {
  lease held = co_await lock.async_acquire_write(boost::asio::use_awaitable);
  if constexpr (detail::with_write_lock_body<F>::valid) {
    co_return co_await detail::run_holding(held, body);
  } else {
    co_return;  // only after the static_assert has failed
  }
}

}  // namespace redlock

#endif
