#ifndef REDLOCK_CLIENT_HPP
#define REDLOCK_CLIENT_HPP

#include "redlock/config.hpp"
#include "redlock/detail/acquire_initiation.hpp"
#include "redlock/detail/default_token.hpp"
#include "redlock/detail/initiate.hpp"
#include "redlock/error.hpp"
#include "redlock/lease.hpp"
#include "redlock/node_config.hpp"
#include "redlock/options.hpp"
#include "redlock/resource_list.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace redlock {

/// A Redlock client over N independent Redis masters (N = 1: the single-instance lock). It keeps
/// one pipelined connection per node, opened lazily and reopened by itself after failures.
///
/// Acquiring sends `SET resource token NX PX ttl` to every node at once and decides as soon as the
/// outcome is certain: a majority (quorum()) granted it with validity left, or a majority can no
/// longer be reached. A round that fails is undone with a token-checked release on the nodes that
/// may hold the key; a node whose link is broken gets it right after its reconnect (see
/// lease::async_release). Within one client, waiters for the same resource queue locally in FIFO
/// order: only the first contends over the network, and it tries again at once when a local holder
/// releases.
///
/// Completion handlers of every operation are posted through their associated executor, never run
/// inside the library's own machinery: a handler that throws unwinds into io_context::run(), and
/// the client keeps working when run() is called again. The same holds for the logger.
///
/// @par Completion tokens
/// Every async_ function of the library (client, lease, mutex, semaphore) takes any Asio completion
/// token as its last argument: use_awaitable, deferred, use_future, as_tuple(...), a callback.
/// Called without one, it returns a deferred operation: nothing is sent until it is co_awaited
/// (`co_await c.async_ping();`) or launched with a token or a handler
/// (`auto op = c.async_ping(); std::move(op)(handler);`). The default token is Asio's default for
/// the executor where Asio has one (deferred, in later Boost releases), and boost::asio::deferred
/// where it has none (any_io_executor in Boost 1.81). An acquire co_awaited that way throws on
/// failure a system_error with the code only; pass use_awaitable to get the lease's diagnostics()
/// as its what().
///
/// @par Thread safety
/// A client, its leases and its operations belong to the executor given to the constructor; with a
/// multi-threaded io_context pass a strand, and call members through it.
///
/// @par Lifetime
/// The connections (and their reconnect and health-check timers) keep the executor's io_context
/// busy until the client is destroyed, so io_context::run() returns only after that.
///
/// @par Destruction
/// Outstanding operations complete with operation_aborted; held leases and the rounds in flight are
/// released, and the connections close once those releases are out: after at most 2 x
/// node_timeout + connect_timeout, which leaves a connection whose link just broke the time to
/// reconnect and deliver them. The io_context must keep running meanwhile. Never blocks.
///
/// @see The guide: @ref md_docs_getting_started, @ref md_docs_configuration, @ref
/// md_docs_several_resources.
class REDLOCK_API client {
 public:
  /// The type of the executor the client belongs to: boost::asio::any_io_executor.
  using executor_type = boost::asio::any_io_executor;

  /// Throws boost::system::system_error with error::invalid_argument, and a message naming the
  /// problem, for an empty node list, duplicate nodes, a node without host or port, with a negative
  /// database or an ACL user without password, or options out of range (node_timeout or
  /// connect_timeout not positive, drift_factor outside [0, 0.5), replies.max_reply_memory below
  /// 1024, replies.max_depth 0).
  ///
  /// Without `options`, the client uses client_options{}. That is a separate constructor rather
  /// than a default argument: g++ 12 miscompiles an aggregate-initialised temporary (such as a
  /// `= {}` default argument) in a statement that also contains co_await, as in
  /// `redlock::client c(co_await asio::this_coro::executor, nodes);`. It copies the temporary
  /// bitwise into the argument and later destroys both copies, which frees the strings the client
  /// has just taken over (a use-after-free, then a double free). Here the defaults are made inside
  /// the constructor, out of the caller's reach. Options written out in such a statement
  /// (`client_options{...}` next to a co_await) meet the same bug: with g++ 12, put them in a
  /// variable first.
  client(executor_type executor, std::vector<node_config> nodes)
      : client(detail::asio_configuration{}, std::move(executor), std::move(nodes),
               client_options{}) {}
  /// A client of `nodes` on `executor`, with `options`; throws as the constructor without
  /// `options`.
  client(executor_type executor, std::vector<node_config> nodes, client_options options)
      : client(detail::asio_configuration{}, std::move(executor), std::move(nodes),
               std::move(options)) {}
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// The executor given to the constructor.
  executor_type get_executor() const noexcept;

  /// Number of nodes.
  std::size_t size() const noexcept;

  /// Nodes that must agree: size() / 2 + 1.
  std::size_t quorum() const noexcept;

  /// One acquire round: SET NX PX on every node, decided at the earliest certain moment.
  ///
  /// @par Completion
  /// void(error_code, lease). On success the lease is held().
  ///
  /// @par Errors
  /// error::contended (another owner holds it, on enough nodes, or in this very client),
  /// error::no_quorum (too few nodes answered), error::validity_expired (a quorum granted it too
  /// late to be of use), error::invalid_argument (empty resource, ttl not positive or not above the
  /// drift allowance, max_hold not positive; or two nodes found at connect to be one server),
  /// operation_aborted (cancelled, or the client was destroyed), and, when nodes that cannot work
  /// with this configuration leave no quorum possible, the most common of their codes
  /// (error::auth_failed, select_failed, permission_denied, protocol_error: all equal to
  /// condition::node_failure). On failure the returned lease is not held; its diagnostics() names
  /// the resource and each node's answer. With use_awaitable or use_future the error is thrown as
  /// boost::system::system_error whose what() is that text.
  ///
  /// @par Cancellation
  /// Cancellation (terminal, partial) at any moment completes with operation_aborted and starts a
  /// token-checked release on every node that may hold the key, so nothing is left behind.
  ///
  /// @par Handler and executor
  /// The handler is invoked through its associated executor (by default the client's), always
  /// posted, never from inside this call.
  ///
  /// @par Lifetimes
  /// `resource` and `options` are copied; the client may be destroyed while the operation runs,
  /// which completes it with operation_aborted.
  template <boost::asio::completion_token_for<void(boost::system::error_code, lease)>
                CompletionToken = detail::default_token_t<executor_type>>
  auto async_try_acquire(std::string resource, lock_options options,
                         CompletionToken&& token = CompletionToken()) {
    return async_initiate_acquire(std::move(resource), options, true,
                                  std::forward<CompletionToken>(token));
  }

  /// Acquire rounds with jittered exponential backoff (lock_options::retry) until the lock is held,
  /// lock_options::wait elapses (error::wait_timeout), or the operation is cancelled. Completion as
  /// async_try_acquire, minus error::contended and error::no_quorum, which are retried; the codes
  /// of condition::node_failure and invalid_argument end it at once, never retried.
  ///
  /// @par Cancellation
  /// Terminal and partial at any moment (as async_try_acquire); total while waiting between rounds
  /// or behind a local waiter, where nothing has been sent.
  ///
  /// @par Handler and executor
  /// The handler is invoked through its associated executor (by default the client's), always
  /// posted, never from inside this call.
  ///
  /// @par Lifetimes
  /// `resource` and `options` are copied; the client may be destroyed while the operation runs,
  /// which completes it with operation_aborted.
  template <boost::asio::completion_token_for<void(boost::system::error_code, lease)>
                CompletionToken = detail::default_token_t<executor_type>>
  auto async_acquire(std::string resource, lock_options options,
                     CompletionToken&& token = CompletionToken()) {
    return async_initiate_acquire(std::move(resource), options, false,
                                  std::forward<CompletionToken>(token));
  }

  /// One lease for a set of locks: on each node one script sets the lock key of every resource in
  /// `resources` (each to the same token, with lock_options::ttl) only when none of them exists
  /// there, so a round holds the whole set on a quorum or nothing; one round, as async_try_acquire.
  /// The keys are the resources' own: the set and an async_acquire of one of its resources exclude
  /// each other. Duplicates are merged and the set sorted (lease::resources()); the lease renews,
  /// extends, releases and is lost as a whole, and lease::resource() is its first resource. With
  /// lock_options::fencing each resource has its own token (lease::fencing_token(resource)),
  /// increasing per resource over every lease that held it, sets and single locks alike. A set of
  /// one resource (after merging) is taken as async_try_acquire takes that lock, and its lease is
  /// that lock's.
  ///
  /// @par Completion
  /// void(error_code, lease), with the errors of async_try_acquire; also error::invalid_argument
  /// for an empty set, an empty resource, more than 64 resources (each round's script runs on all
  /// of them while its server waits), or, when a node is a Redis Cluster, resources that are not in
  /// one hash slot (give them one hash tag: "{acct}:1", "{acct}:2").
  ///
  /// @par Resources
  /// A std::vector<std::string>, or a braced list written at the call, also inside a co_await
  /// with g++ 12 (resource_list): `async_try_acquire_all({"{acct}:17", "{acct}:42"}, ...)`.
  ///
  /// @par Cancellation, handler, executor and lifetimes
  /// As async_try_acquire; `resources` is moved.
  template <boost::asio::completion_token_for<void(boost::system::error_code, lease)>
                CompletionToken = detail::default_token_t<executor_type>>
  auto async_try_acquire_all(resource_list resources, lock_options options,
                             CompletionToken&& token = CompletionToken()) {
    return async_initiate_acquire(std::move(resources).names(), options, true,
                                  std::forward<CompletionToken>(token));
  }

  /// async_try_acquire_all's set, with the rounds and waits of async_acquire until it is held,
  /// lock_options::wait elapses (error::wait_timeout), or the operation is cancelled. No resource
  /// of the set is held while the acquire waits for another, so two processes taking sets in
  /// different orders cannot deadlock. In this client the acquire waits behind every local lease
  /// and earlier acquire of any of its resources, first come first served per resource: later
  /// acquires of one of them, sets or single locks, wait behind it, so a stream of smaller sets
  /// cannot starve it.
  ///
  /// @par Completion
  /// Completion as async_try_acquire_all, minus error::contended and error::no_quorum, which are
  /// retried.
  ///
  /// @par Resources, cancellation, handler, executor and lifetimes
  /// Resources as async_try_acquire_all; the rest as async_acquire.
  template <boost::asio::completion_token_for<void(boost::system::error_code, lease)>
                CompletionToken = detail::default_token_t<executor_type>>
  auto async_acquire_all(resource_list resources, lock_options options,
                         CompletionToken&& token = CompletionToken()) {
    return async_initiate_acquire(std::move(resources).names(), options, false,
                                  std::forward<CompletionToken>(token));
  }

  /// PINGs every node. Completion: void(error_code): success when a quorum answered, else
  /// error::no_quorum. Each node has node_timeout to answer, like every request, whatever its
  /// connection is doing: a connection that is not open yet (the first request of the client
  /// opens it) must connect, complete its handshake and answer within node_timeout, and a node in
  /// reconnect backoff fails at once. A connect that takes longer goes on (up to connect_timeout)
  /// and serves later requests; until it completes, a ping or a round's SET fails at once on that
  /// node (node_unresponsive). To wait for a slow first connect, ping again after a short pause
  /// until a ping succeeds or a deadline of your own passes.
  ///
  /// @par Cancellation
  /// Cancellation (terminal, partial, total): completes with operation_aborted.
  ///
  /// @par Handler and executor
  /// As async_try_acquire. The client may be destroyed while the ping runs (it then completes with
  /// operation_aborted).
  template <boost::asio::completion_token_for<void(boost::system::error_code)> CompletionToken =
                detail::default_token_t<executor_type>>
  auto async_ping(CompletionToken&& token = CompletionToken()) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        detail::ping_initiation(impl_), token);
  }

  /// The lock `resource` held by `token` (a lease::token(), perhaps of another process, handed over
  /// after lease::detach()): sets its TTL to `ttl` on every node where the key still holds that
  /// token, as lease::async_extend does, but with no lease to keep a validity for. Completion:
  /// void(error_code): success when a quorum extended it; error::not_held when a quorum said the
  /// key is gone or holds another token; error::no_quorum when too few nodes answered in time (the
  /// nodes that did were extended); error::invalid_argument for an empty resource or token, or a
  /// ttl not longer than the drift allowance (logged); operation_aborted after shutdown or when
  /// cancelled (any type; the extension may still apply where it was sent). The time the caller may
  /// count on is ttl minus the time until completion minus the drift allowance, as for an acquire.
  /// A lease of this client holding that token is not told: it finds out at its next extension.
  ///
  /// @par Handler and executor
  /// As async_ping.
  ///
  /// @par Lifetimes
  /// The strings are copied; the client may be destroyed meanwhile (operation_aborted).
  template <boost::asio::completion_token_for<void(boost::system::error_code)> CompletionToken =
                detail::default_token_t<executor_type>>
  auto async_extend(std::string resource, std::string token, std::chrono::milliseconds ttl,
                    CompletionToken&& completion = CompletionToken()) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        detail::extend_by_token_initiation(impl_), completion, std::move(resource),
        std::move(token), ttl);
  }

  /// The lock `resource` held by `token`: deletes it on every node where the key still holds that
  /// token (compare-and-DEL in Lua), announcing it on the release channel, as lease::async_release
  /// does. Completion: void(error_code): success when no quorum contradicted it; error::not_held
  /// when a quorum said the key was gone or held another token; error::no_quorum when too few
  /// answered (a node that is down gets the release if it reconnects within connect_timeout; else
  /// its key expires with its TTL); error::invalid_argument for an empty resource or token;
  /// operation_aborted after shutdown or when cancelled (any type; the release still goes out).
  /// A lease of this client holding that token is not told, as for async_extend above.
  ///
  /// @par Handler and executor
  /// As async_ping.
  ///
  /// @par Lifetimes
  /// As async_extend above.
  template <boost::asio::completion_token_for<void(boost::system::error_code)> CompletionToken =
                detail::default_token_t<executor_type>>
  auto async_release(std::string resource, std::string token,
                     CompletionToken&& completion = CompletionToken()) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        detail::release_by_token_initiation(impl_), completion, std::move(resource),
        std::move(token));
  }

  /// Reads `resource`'s lock key on every node, value and PTTL in one step per node, and judges
  /// what they show: which token (lease::token()) each node holds and for how long, and whether one
  /// holder has a quorum (inspection::verdict), the same facts `redlock status` prints. For
  /// operators, dashboards and tests; a snapshot, which may change as soon as it is read, so never
  /// a reason to skip async_acquire. Completion: void(error_code, inspection), the inspection
  /// filled in either way: success when a quorum of nodes answered; error::no_quorum when fewer did
  /// (the verdict then is mostly unknown; each silent node_holding says why);
  /// error::invalid_argument for an empty name; operation_aborted after shutdown or on
  /// cancellation. inspection::diagnostics says why in words. Each node has node_timeout to answer;
  /// a node that let a request time out recently fails at once (error::node_unresponsive), as for
  /// async_ping.
  ///
  /// @par Cancellation
  /// Cancellation (terminal, partial, total): completes at once with operation_aborted and what was
  /// read so far (nothing is changed on the nodes).
  ///
  /// @par Handler and executor
  /// As async_try_acquire.
  ///
  /// @par Lifetimes
  /// `resource` is copied; the client may be destroyed meanwhile (operation_aborted).
  template <boost::asio::completion_token_for<detail::inspect_signature> CompletionToken =
                detail::default_token_t<executor_type>>
  auto async_inspect(std::string resource, CompletionToken&& token = CompletionToken()) {
    return boost::asio::async_initiate<CompletionToken, detail::inspect_signature>(
        detail::inspect_initiation(impl_), token, std::move(resource));
  }

  /// Shuts the client down gracefully, for a server that stops (SIGTERM) and wants its locks freed
  /// and confirmed before it exits. At once: every operation under way and every acquire waiting
  /// completes with operation_aborted, and every operation started later fails with it; each held
  /// lease is released (the token-checked script on every node) and its renewal stops, its
  /// async_wait_lost waiters completing with operation_aborted. Completion: void(error_code), once
  /// every release has been answered by the nodes or has failed, each within node_timeout:
  /// success when each lease was released on a quorum (or was no longer ours on one); else the
  /// first release's error (error::no_quorum, with the lease's diagnostics() naming the nodes).
  /// The connections close once those releases are out (kept ones delivered after a reconnect, for
  /// at most 2 x node_timeout + connect_timeout; a node that was never sent a request, such as
  /// one never reached, is not waited for), after which io_context::run() returns if nothing
  /// else keeps it busy. A second call completes with the first one's outcome; a call after the
  /// shutdown finished completes at once with success. The destructor does the same without
  /// waiting for the nodes' answers.
  ///
  /// @par Cancellation
  /// Cancellation (terminal, partial): stops waiting, completing with operation_aborted; the
  /// shutdown itself goes on.
  ///
  /// @par Handler and executor
  /// As async_ping.
  ///
  /// @par Lifetimes
  /// The client may be destroyed while the shutdown runs; the releases still complete it.
  template <boost::asio::completion_token_for<void(boost::system::error_code)> CompletionToken =
                detail::default_token_t<executor_type>>
  auto async_shutdown(CompletionToken&& token = CompletionToken()) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        detail::shutdown_initiation(impl_), token);
  }

 private:
  friend class semaphore;  // whose acquires run on impl_ like the client's own
  friend class rw_lock;    // the same

  // The compiled constructor; the tag makes a program built with other Asio settings fail to link
  // (redlock/config.hpp).
  client(detail::asio_configuration library_configuration, executor_type executor,
         std::vector<node_config> nodes, client_options options);

  template <class Resources, class CompletionToken>
  auto async_initiate_acquire(Resources resource, const lock_options& options, bool single_round,
                              CompletionToken&& token) {
    if constexpr (detail::throws_on_error<std::decay_t<CompletionToken>>::value) {
      return boost::asio::async_initiate<CompletionToken, void(std::exception_ptr, lease)>(
          detail::acquire_initiation<true>(impl_), token, std::move(resource), options,
          single_round);
    } else {
      return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, lease)>(
          detail::acquire_initiation<false>(impl_), token, std::move(resource), options,
          single_round);
    }
  }

  std::shared_ptr<detail::client_impl> impl_;
};

}  // namespace redlock

#endif
