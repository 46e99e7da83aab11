// The public async functions against what Asio's own adapters expect of an operation: a named
// initiation that reports its executor (Asio's cancel_after, Boost >= 1.86, asks for it before it
// launches the operation), completion_token_for parameters, and lazy tokens. Boost 1.81 has no
// cancel_after, so `cancel_after_ms` below is a token adapter written the same way: it arms a
// timer on the initiation's executor and cancels the operation when the timer fires.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/lock_recorder.hpp"
#include "support/printing.hpp"
#include "support/reach.hpp"
#include "support/redis_fleet.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace {

using redlock::test::gone_everywhere;
using redlock::test::plain_lock;

// How many initiations the adapter asked for their executor, and whether each was the client's.
std::atomic<int> executors_asked{0};
std::atomic<int> foreign_executors{0};
asio::any_io_executor expected_executor;

// A completion token: `inner` completes the operation, which is cancelled (terminal) once `after`
// has passed.
template <class Token>
struct cancel_after_ms {
  milliseconds after;
  Token inner;
};

// The initiation the adapter hands on: it needs the wrapped initiation's executor for its timer.
template <class Initiation>
struct expiring_initiation {
  Initiation initiation;
  milliseconds after;

  template <class Handler, class... Args>
  void operator()(Handler&& handler, Args&&... args) {
    const auto executor = initiation.get_executor();
    ++executors_asked;
    if (executor != expected_executor) ++foreign_executors;
    auto timer = std::make_shared<asio::steady_timer>(executor, after);
    auto signal = std::make_shared<asio::cancellation_signal>();
    timer->async_wait([signal](error_code ec) {
      if (!ec) signal->emit(asio::cancellation_type::terminal);
    });
    // Completes on the handler's own executor; stops the timer first. The signal stays alive
    // with the handler, as long as the operation may use its slot.
    const auto handler_executor = asio::get_associated_executor(handler, executor);
    auto done = [inner = std::forward<Handler>(handler), timer, signal](auto&&... results) mutable {
      timer->cancel();
      std::move(inner)(std::forward<decltype(results)>(results)...);
    };
    std::move(initiation)(
        asio::bind_cancellation_slot(signal->slot(),
                                     asio::bind_executor(handler_executor, std::move(done))),
        std::forward<Args>(args)...);
  }
};

}  // namespace

template <class Token, class... Signatures>
struct boost::asio::async_result<cancel_after_ms<Token>, Signatures...> {
  template <class Initiation, class RawToken, class... Args>
  static auto initiate(Initiation&& initiation, RawToken&& token, Args&&... args)
      -> decltype(boost::asio::async_initiate<Token, Signatures...>(
          expiring_initiation<std::decay_t<Initiation>>{std::forward<Initiation>(initiation),
                                                        token.after},
          token.inner, std::forward<Args>(args)...)) {
    return boost::asio::async_initiate<Token, Signatures...>(
        expiring_initiation<std::decay_t<Initiation>>{std::forward<Initiation>(initiation),
                                                      token.after},
        token.inner, std::forward<Args>(args)...);
  }
};

namespace {

template <class Token>
cancel_after_ms<Token> cancel_after(milliseconds after, Token inner) {
  return {after, std::move(inner)};
}

// The token parameters are constrained with completion_token_for: a token that cannot complete
// the operation's signature is rejected at the call, not deep inside Asio.
template <class Client, class Token>
concept can_acquire_with = requires(Client& c, Token token) {
  c.async_try_acquire(std::string(), redlock::lock_options(), token);
};
static_assert(can_acquire_with<redlock::client, decltype(asio::use_awaitable)>);
static_assert(can_acquire_with<redlock::client, cancel_after_ms<decltype(tuple_awaitable)>>);
static_assert(!can_acquire_with<redlock::client, int>);

}  // namespace

BOOST_AUTO_TEST_SUITE(asio_conformance)

// The adapter cancels a waiting acquire after 300 ms: the acquire completes with
// operation_aborted, leaves no key of its own, and the adapter ran its timer on the client's
// executor. A ping with the same adapter completes normally before its timer.
BOOST_AUTO_TEST_CASE(an_adapter_that_needs_the_initiations_executor_cancels_an_acquire) {
  redis_fleet fleet(3);
  inspector nodes(fleet);
  for (std::size_t i = 0; i < fleet.size(); ++i)
    nodes.set(i, "busy", "rival", 60s);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    expected_executor = locks.get_executor();
    executors_asked = 0;
    foreign_executors = 0;

    BOOST_TEST_REQUIRE(!co_await redlock::test::ping_until_answered(locks));  // connected
    auto [pinged] = co_await locks.async_ping(cancel_after(5s, tuple_awaitable));
    BOOST_TEST(!pinged, pinged.message());

    const auto start = steady_clock::now();
    auto [ec, lease] =
        co_await locks.async_acquire("busy", plain_lock(10s), cancel_after(300ms, tuple_awaitable));
    BOOST_TEST(ec == asio::error::operation_aborted, ec.message());
    BOOST_TEST(!lease.held());
    BOOST_TEST(ms_since(start) >= 250);
    BOOST_TEST(ms_since(start) < 5000);
    BOOST_TEST(executors_asked == 2);
    BOOST_TEST(foreign_executors == 0);
  });
  BOOST_TEST(nodes.holding("busy", "rival") == fleet.size());  // the rival's keys untouched
}

// The lease's and the mutex's operations with the same adapter: a wait for loss is cancelled by
// it, a release and a lock complete before it fires; deferred operations start when awaited.
BOOST_AUTO_TEST_CASE(lease_and_mutex_operations_work_with_the_adapter_and_lazy_tokens) {
  redis_fleet fleet(3);
  inspector nodes(fleet);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    expected_executor = locks.get_executor();
    executors_asked = 0;
    foreign_executors = 0;

    auto [ec, lease] = co_await locks.async_try_acquire("adapted", plain_lock(10s),
                                                        cancel_after(5s, tuple_awaitable));
    BOOST_TEST_REQUIRE(!ec, ec.message());
    auto [waited] = co_await lease.async_wait_lost(cancel_after(100ms, tuple_awaitable));
    BOOST_TEST(waited == asio::error::operation_aborted, waited.message());
    BOOST_TEST(lease.held());
    auto [extended] = co_await lease.async_extend(5s, cancel_after(5s, tuple_awaitable));
    BOOST_TEST(!extended, extended.message());
    auto [released] = co_await lease.async_release(cancel_after(5s, tuple_awaitable));
    BOOST_TEST(!released, released.message());
    BOOST_TEST(co_await gone_everywhere(nodes, "adapted"));

    redlock::mutex m(locks, "adapted-mutex", plain_lock(10s));
    auto [locked] = co_await m.async_lock(cancel_after(5s, tuple_awaitable));
    BOOST_TEST(!locked, locked.message());
    BOOST_TEST(m.owns_lock());
    // The lock completed on a quorum's grants; the last SET may land a moment later.
    BOOST_TEST(co_await eventually([&] { return nodes.present("adapted-mutex") == fleet.size(); }));
    // A lazy unlock does nothing until it is awaited.
    auto unlock = m.async_unlock(asio::deferred);
    co_await sleep_for(50ms);
    BOOST_TEST(nodes.present("adapted-mutex") == fleet.size());
    auto [unlocked] = co_await std::move(unlock)(tuple_awaitable);
    BOOST_TEST(!unlocked, unlocked.message());
    BOOST_TEST(co_await gone_everywhere(nodes, "adapted-mutex"));
    BOOST_TEST(executors_asked == 5);
    BOOST_TEST(foreign_executors == 0);
  });
}

BOOST_AUTO_TEST_SUITE_END()
