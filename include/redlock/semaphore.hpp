#ifndef REDLOCK_SEMAPHORE_HPP
#define REDLOCK_SEMAPHORE_HPP

#include "redlock/client.hpp"
#include "redlock/detail/default_token.hpp"
#include "redlock/detail/run_holding.hpp"
#include "redlock/error.hpp"
#include "redlock/lease.hpp"
#include "redlock/options.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace redlock {

namespace detail {
REDLOCK_API void initiate_acquire_permit(const std::shared_ptr<client_impl>& client,
                                         std::string name, std::size_t permits,
                                         const lock_options& options, bool single_round,
                                         caller_handler<acquire_signature> caller);

// semaphore::async_acquire and async_try_acquire; With Throws as acquire_initiation.
template <bool Throws>
struct permit_initiation : client_initiation {
  using client_initiation::client_initiation;
  template <class Handler>
  void operator()(Handler&& handler, std::string name, std::size_t permits,
                  const lock_options& options, bool single_round) const {
    if constexpr (Throws) {
      initiate_acquire_permit(
          client_, std::move(name), permits, options, single_round,
          erase_handler<acquire_signature>(
              throw_with_diagnostics<std::decay_t<Handler>>{std::forward<Handler>(handler)},
              executor_of(*client_)));
    } else {
      initiate_acquire_permit(
          client_, std::move(name), permits, options, single_round,
          erase_handler<acquire_signature>(std::forward<Handler>(handler), executor_of(*client_)));
    }
  }
};
}  // namespace detail

/// At most permits() holders at once across the client's nodes: a counting semaphore for work that
/// may run N times in parallel over a fleet (N workers of a queue, N connections to a service).
///
/// A permit is one of `permits` slot locks, `{name}:slot:0` .. `{name}:slot:N-1` (all in the hash
/// slot of `name`), each a full Redlock: a permit is held when a quorum of nodes granted that slot
/// to us within its validity, exactly as a lock. So at most `permits` leases hold a permit at any
/// time, under the same assumptions as the mutex (bounded clock drift, no failover that loses
/// keys). A single counter per node with a majority quorum would not be safe beyond one permit:
/// with 3 nodes and 2 permits, three holders can win {A,B}, {B,C} and {A,C} while every node
/// counts 2.
///
/// An acquire round tries one slot on every node, pipelined. A node that refuses it answers with
/// the remaining TTL of every slot there, so a refused round learns which slots are free on a
/// quorum, and when held ones expire at the latest, and tries a free one next, drawn at random
/// among them so that contenders spread out. Slots held by leases of this client are skipped.
/// Within one client the acquires of one semaphore (by name) queue in FIFO order: only the first
/// contends over the network; it is woken at once when a lease of this client releases its permit,
/// and by release announcements (client_options::release_channel) when one elsewhere does.
///
/// The returned lease is a lock lease of the slot's key (lease::resource() is that key): it renews,
/// reports loss (async_wait_lost), extends, releases, fences (lock_options::fencing: one counter
/// per slot) and is released by its destructor, like any other.
///
/// @par Completion tokens
/// As client's; without one, an async_ function returns a deferred operation.
///
/// @par Thread safety
/// As client; use a semaphore on the client's executor. The client must outlive it. The object
/// itself is a small value (name, permits, options): copies refer to the same semaphore.
///
/// @see The guide: @ref md_docs_semaphores.
class semaphore {
 public:
  /// The client's executor type.
  using executor_type = client::executor_type;

  /// The largest number of permits: every refused round reads each slot's TTL on every node.
  static constexpr std::size_t max_permits = 1024;

  /// Never throws for bad arguments: `name` empty or `permits` outside [1, max_permits] make every
  /// acquire complete with error::invalid_argument, naming the problem. Without `options`,
  /// lock_options{}: made here rather than as a default argument, for the g++ 12 bug described at
  /// client's constructors.
  semaphore(client& owner, std::string name, std::size_t permits)
      : semaphore(owner, std::move(name), permits, lock_options{}) {}
  /// A semaphore of `permits` permits named `name`, acquired through `owner` with `options`; bad
  /// arguments as for the constructor without `options`.
  semaphore(client& owner, std::string name, std::size_t permits, lock_options options)
      : client_(&owner), name_(std::move(name)), permits_(permits), options_(options) {}

  /// The client's executor, on which the semaphore is to be used.
  executor_type get_executor() const noexcept { return client_->get_executor(); }
  /// The semaphore's name, as given to the constructor.
  const std::string& name() const noexcept { return name_; }
  /// The number of permits, as given to the constructor.
  std::size_t permits() const noexcept { return permits_; }
  /// The lock options of every acquire, as given to the constructor.
  const lock_options& options() const noexcept { return options_; }

  /// Rounds with jittered exponential backoff (lock_options::retry), woken early by releases, until
  /// a permit is held, lock_options::wait elapses (error::wait_timeout), or the operation is
  /// cancelled.
  ///
  /// @par Completion
  /// void(error_code, lease). On success the lease is held() and holds one slot.
  ///
  /// @par Errors
  /// error::wait_timeout, error::invalid_argument (bad name, permits or options; two nodes found to
  /// be one server), operation_aborted (cancelled, or the client was destroyed), and the codes of
  /// condition::node_failure when misconfigured nodes leave no quorum possible. On failure the
  /// lease is not held and its diagnostics() names the semaphore and each node's answer. With
  /// use_awaitable or use_future the error is thrown as boost::system::system_error with that text.
  ///
  /// @par Cancellation
  /// As client::async_acquire.
  ///
  /// @par Handler and executor
  /// As client::async_try_acquire.
  ///
  /// @par Lifetimes
  /// The name and options are copied, so the semaphore object may go away once the operation is
  /// launched; the client may be destroyed while it runs, which completes it with
  /// operation_aborted.
  template <boost::asio::completion_token_for<void(boost::system::error_code, lease)>
                CompletionToken = detail::default_token_t<executor_type>>
  auto async_acquire(CompletionToken&& token = CompletionToken()) {
    return initiate(false, std::forward<CompletionToken>(token));
  }

  /// Without waiting: rounds while some slot may be free on a quorum, each on a different slot, at
  /// most permits() of them (the first round tries a random slot; its refusals tell which others to
  /// try: a slot is skipped once a quorum of nodes has reported it held). Completion as
  /// async_acquire, plus error::contended when every slot was refused or reported held by a
  /// quorum, held by this client, or another acquire of this client waits for one (the semaphore
  /// is full, as far as one look can tell: rounds that run at the same time can split the votes,
  /// as for a lock), and error::no_quorum when too few nodes answered. Cancellation: terminal and
  /// partial, as async_acquire's rounds.
  template <boost::asio::completion_token_for<void(boost::system::error_code, lease)>
                CompletionToken = detail::default_token_t<executor_type>>
  auto async_try_acquire(CompletionToken&& token = CompletionToken()) {
    return initiate(true, std::forward<CompletionToken>(token));
  }

  /// Reads every slot key on every node in one step per node, as client::async_inspect reads one
  /// lock: completion void(error_code, std::vector<inspection>), one inspection per slot in slot
  /// order (its resource the slot's key), judged each as a lock; the permits held are the slots
  /// whose verdict is held. Errors, cancellation, handler and lifetimes as client::async_inspect;
  /// error::invalid_argument (one inspection whose diagnostics say why) for an empty name or
  /// permits outside [1, max_permits].
  template <boost::asio::completion_token_for<detail::inspect_permits_signature> CompletionToken =
                detail::default_token_t<executor_type>>
  auto async_inspect(CompletionToken&& token = CompletionToken()) {
    return boost::asio::async_initiate<CompletionToken, detail::inspect_permits_signature>(
        detail::inspect_permits_initiation(client_->impl_), token, name_, permits_);
  }

 private:
  template <class CompletionToken>
  auto initiate(bool single_round, CompletionToken&& token) {
    if constexpr (detail::throws_on_error<std::decay_t<CompletionToken>>::value) {
      return boost::asio::async_initiate<CompletionToken, void(std::exception_ptr, lease)>(
          detail::permit_initiation<true>(client_->impl_), token, name_, permits_, options_,
          single_round);
    } else {
      return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, lease)>(
          detail::permit_initiation<false>(client_->impl_), token, name_, permits_, options_,
          single_round);
    }
  }

  client* client_;
  std::string name_;
  std::size_t permits_;
  lock_options options_;
};

/// Acquires a permit of `permits` (semaphore::async_acquire), runs `body(lease&)`, and always
/// releases; everything else (loss cancelling the body, errors thrown as system_error) as
/// with_lock.
///
/// @par F
/// As with_lock's.
template <class F>
auto with_permit(semaphore& permits, F body) -> typename detail::with_permit_body<F>::type {
  lease held = co_await permits.async_acquire(boost::asio::use_awaitable);
  if constexpr (detail::with_permit_body<F>::valid) {
    co_return co_await detail::run_holding(held, body);
  } else {
    co_return;  // only after the static_assert has failed
  }
}

}  // namespace redlock

#endif
