#ifndef REDLOCK_LEASE_HPP
#define REDLOCK_LEASE_HPP

#include "redlock/config.hpp"
#include "redlock/detail/default_token.hpp"
#include "redlock/detail/initiate.hpp"
#include "redlock/error.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace redlock {

/// A lock held (or once held) on a resource: the result of client::async_acquire and
/// client::async_try_acquire. Move-only.
///
/// While held and lock_options::auto_renew is on, a renewal task on the client's executor extends
/// the lock once less than half of its TTL is left of the validity (at half of the TTL after an
/// acquire). It extends by the TTL, or by more when the validity claimed is longer (after a long
/// async_extend), so that renewal never shortens the lock. If the lock cannot be kept (a quorum of
/// nodes says the key is gone or owned by someone else, or validity runs out before a quorum
/// confirms an extension) the lease is *lost*: held() turns false and async_wait_lost completes
/// with error::lock_lost.
///
/// An extension that was sent may run on the nodes whatever its reply says (a late reply is not a
/// refusal). So from the moment any extension is sent, valid_until() is at most its start plus its
/// TTL minus the drift allowance; only a quorum that confirms it while the lease is still valid
/// lets valid_until() grow again.
///
/// Destroying a lease that is still held stops the renewal and starts a best-effort release on
/// every node (see async_release for a node that is down); the destructor never blocks and never
/// throws, and may run on any thread: it reads whether the lease is still held (an atomic) and does
/// everything else on the client's executor.
///
/// @par Completion tokens
/// As client's; without one, an async_ function returns a deferred operation.
///
/// @par Lifetime
/// A lease may outlive its client (destroying the client releases it; held() is then false), but
/// not the execution context of its executor: like any Asio I/O object it owns timers of that
/// context, so destroy it before the io_context.
///
/// @par Thread safety
/// A lease belongs to its client's executor. Call its members there (with a multi-threaded
/// io_context, through the strand the client was given). A default-constructed lease has no
/// executor; its operations complete through the handler's associated executor.
///
/// @see The guide: @ref md_docs_cancellation_and_shutdown, @ref md_docs_fencing.
class REDLOCK_API lease {
 public:
  /// The type of the client's executor: boost::asio::any_io_executor.
  using executor_type = boost::asio::any_io_executor;

  lease() noexcept = default;
  /// Takes over the lease moved from, which is left as a default-constructed lease.
  lease(lease&&) noexcept = default;
  /// Releases (best effort, as the destructor) what this lease held before taking `other`'s lock.
  lease& operator=(lease&& other) noexcept;
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  // Inline: an empty lease (moved along, released) goes at no cost.
  ~lease() {
    if (state_) abandon_if_held();
  }

  /// The client's executor; a default-constructed lease has none (empty executor).
  executor_type get_executor() const noexcept;

  /// The lock's resource: for a semaphore's permit, its slot's key; for a read-write lock's lease,
  /// the key it set; for a set of locks (client::async_acquire_all), the set's first resource.
  /// Empty for a default-constructed lease.
  const std::string& resource() const noexcept;

  /// Every resource the lease holds: a set's, sorted and without duplicates, else resource() alone.
  /// Empty for a default-constructed lease. Valid as long as the lease is not destroyed or moved
  /// from.
  std::span<const std::string> resources() const noexcept;

  /// The random value stored in the lock key on each node (40 hex digits); empty if never held.
  const std::string& token() const noexcept;

  /// The fencing token of this lease, when it was acquired with lock_options::fencing: greater
  /// than that of every lease of the resource acquired before it with fencing, on any client
  /// (given counters that survive restarts). Extensions keep it. Unset without fencing or if never
  /// held. Pass it to the storage the lock guards, which keeps the highest token it has seen and
  /// rejects writes that carry a lower one.
  /// A set of more than one resource has one token per resource, and none here: see below.
  std::optional<std::uint64_t> fencing_token() const noexcept;

  /// The fencing token of `resource`, one of resources(), with the guarantee above for that
  /// resource: greater than that of every earlier lease that held it with fencing, sets and single
  /// locks alike. Unset without fencing, if never held, or for a resource the lease does not hold.
  std::optional<std::uint64_t> fencing_token(std::string_view resource) const noexcept;

  /// Until when (steady_clock) the lock is guaranteed to be ours, given the TTL, the time the
  /// acquire or the last confirmed extension took, the drift allowance, and every extension sent
  /// since (each may have shortened the key). Meaningless unless held().
  std::chrono::steady_clock::time_point valid_until() const noexcept;

  /// True while the lock is ours: acquired, not released, not lost, and valid_until() not passed.
  bool held() const noexcept;

  /// Why the last operation on this lease (or the acquire that returned it) failed, naming the
  /// nodes and what each answered; empty after a success, except that an acquire granted by fewer
  /// than all nodes says so here ("acquired on 3 of 5 nodes: ...") once every node has answered
  /// (also logged as a warning). For logs and error messages.
  const std::string& diagnostics() const noexcept;

  /// How many nodes granted the acquire that returned this lease: at least client::quorum() when
  /// it succeeded (0 if it failed). The acquire completes as soon as a quorum has granted, so
  /// grants that arrive later are added as they come (within node_timeout). Not changed by
  /// extensions or the release.
  std::size_t granted_nodes() const noexcept;

  /// Deletes the lock on every node, but only where it still holds our token (compare-and-DEL in
  /// Lua). Renewal stops before the release is sent. A node that is down, or whose link breaks
  /// before it answers, gets the release right after its connection is re-established (it is kept
  /// for at most the longest TTL this lease gave the key, and at most 8192 are kept per node);
  /// until then its key stays.
  ///
  /// @par Completion
  /// void(error_code). Success: no quorum of nodes contradicted us. error::not_held: a quorum said
  /// the key was gone or foreign (the lock had been lost). error::no_quorum: too few nodes answered
  /// in time; what they hold is released when they are back, or expires with its TTL.
  /// operation_aborted: cancelled or the client was destroyed. Releasing a lease that is not held
  /// completes with error::not_held.
  ///
  /// @par Cancellation
  /// Cancellation (terminal, partial, total): the operation completes at once, but the writes to
  /// the nodes always go out; cancelling never leaves the lock behind.
  ///
  /// @par Handler and executor
  /// As client::async_try_acquire.
  ///
  /// @par Lifetimes
  /// The operation keeps what it needs of the lease alive; the lease may be moved from or destroyed
  /// meanwhile, and so may the client (the operation then completes with operation_aborted).
  template <boost::asio::completion_token_for<void(boost::system::error_code)> CompletionToken =
                detail::default_token_t<executor_type>>
  auto async_release(CompletionToken&& token = CompletionToken()) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        detail::release_initiation(state_), token);
  }

  /// Sets the lock's TTL to `ttl` from now on every node where it still holds our token
  /// (compare-and-PEXPIRE in Lua; a missing key is never re-created). A `ttl` shorter than what is
  /// left shortens the lock. From the moment it is sent, valid_until() is at most the extension's
  /// start + ttl - drift allowance (it may run on nodes whose reply never comes); it succeeds only
  /// if a quorum confirms within the validity, and valid_until() is then recomputed from the
  /// extension's start (bounded by any extension sent after it). The next renewal is planned
  /// from the new validity.
  ///
  /// @par Completion
  /// void(error_code). error::not_held: the lease is not held, or a quorum said the key is gone or
  /// foreign (the lease is then lost). error::no_quorum: too few nodes confirmed in time (the lease
  /// stays held until valid_until(), which this extension may have shortened); also once after an
  /// operator's SCRIPT FLUSH on a quorum of nodes (an extension answered NOSCRIPT is not resent, so
  /// that it can never run behind a later one; the script is loaded again at once).
  /// error::invalid_argument: ttl not greater than the drift allowance. operation_aborted:
  /// cancelled or the client was destroyed.
  ///
  /// @par Cancellation
  /// Terminal and partial complete it at once with operation_aborted; the extension may still take
  /// effect on some nodes. Total cancellation is not supported (the extension cannot be undone once
  /// sent) and is ignored.
  ///
  /// @par Handler and executor
  /// As client::async_try_acquire.
  ///
  /// @par Lifetimes
  /// The operation keeps what it needs of the lease alive; the lease may be moved from or destroyed
  /// meanwhile, and so may the client (the operation then completes with operation_aborted).
  template <boost::asio::completion_token_for<void(boost::system::error_code)> CompletionToken =
                detail::default_token_t<executor_type>>
  auto async_extend(std::chrono::milliseconds ttl, CompletionToken&& token = CompletionToken()) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        detail::extend_initiation(state_), token, ttl);
  }

  /// Hands the lock over without releasing it: renewal stops and held() turns false, but the key
  /// stays on the nodes until its TTL runs out, or until whoever has token() extends or releases it
  /// (client::async_extend and client::async_release by token). For a lock that must outlive this
  /// process, such as `redlock acquire`, which prints the token and exits; everywhere else let the
  /// lease release the lock. async_wait_lost waiters complete with operation_aborted; local
  /// acquires waiting for the resource start (and find it held on the nodes). Does nothing for a
  /// lease that is not held. Call it on the client's executor; never blocks, never throws.
  void detach() noexcept;

  /// Waits until the lease is lost.
  ///
  /// @par Completion
  /// void(error_code). error::lock_lost: the lock could not be kept. operation_aborted: the lease
  /// was released or destroyed, the client was destroyed, or the wait was cancelled.
  /// error::not_held: the lease was never held. Completes at once if the lease is already lost.
  ///
  /// @par Cancellation
  /// Cancellation (terminal, partial, total): completes with operation_aborted; nothing else
  /// changes.
  ///
  /// @par Handler and executor
  /// As client::async_try_acquire.
  ///
  /// @par Lifetimes
  /// The operation keeps what it needs of the lease alive; the lease may be moved from or destroyed
  /// meanwhile, and so may the client (the operation then completes with operation_aborted).
  template <boost::asio::completion_token_for<void(boost::system::error_code)> CompletionToken =
                detail::default_token_t<executor_type>>
  auto async_wait_lost(CompletionToken&& token = CompletionToken()) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        detail::wait_lost_initiation(state_), token);
  }

 private:
  friend struct detail::lease_access;
  explicit lease(std::shared_ptr<detail::lease_state> state) noexcept : state_(std::move(state)) {}
  // The destructor's work for a lease that may still hold its lock.
  void abandon_if_held() noexcept;

  std::shared_ptr<detail::lease_state> state_;
};

}  // namespace redlock

#endif
