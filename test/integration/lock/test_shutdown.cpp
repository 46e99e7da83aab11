// client::async_shutdown: operations end with operation_aborted, held leases are released and the
// nodes' answers awaited, the connections close and io_context::run() returns, with the client
// still alive. A release that no quorum confirmed is reported, and cancelling the wait does not
// stop the shutdown. A destroyed client keeps its connections as long as its releases need them,
// at most 2 x node_timeout + connect_timeout.

#include "integration/prelude.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/background_thread.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/inspector.hpp"
#include "support/printing.hpp"
#include "support/proxied_fleet.hpp"
#include "support/redis_fleet.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using redlock::test::renewal;

// How many connections the server has accepted since it started, this question's own included.
long long connections_accepted_so_far(redlock::test::redis_server& server) {
  return redlock::test::info_counter(server.port(), "stats", "total_connections_received:");
}

// The two ways a destroyed client's release may wait for a stopped node: with the link kept (the
// release in flight), or with the health check dropping it (the release kept for a reconnect,
// which hangs in the handshake of the stopped server). The health check drops a link whose
// written request has had no reply for health_check_timeout.
struct link_variant {
  std::chrono::milliseconds health_check_timeout;
  bool link_dropped;
  const char* name;
};
constexpr link_variant link_variants[] = {
    {std::chrono::milliseconds{5000}, false, "the link stays up"},
    {std::chrono::milliseconds{100}, true, "the link is dropped"}};

// What a destroyed client left behind, seen from outside.
struct destroyed_client_run {
  bool lease_held_after = true;  // what the lease, which outlived the client, said at the end
  std::optional<boost::system::error_code> lost;
  long long accepted_before = 0;  // node 0's connections before it was stopped
  std::optional<std::chrono::steady_clock::time_point> destroyed_at;
  std::chrono::steady_clock::time_point returned_at;  // when io_context::run() returned
  bool stopped = false;                               // whether it returned on its own
};

// Holds `resource` on every node of `fleet` with a wait for its loss outstanding, stops node 0,
// calls `just_destroyed_at` with the instant and destroys the client; then runs the io_context
// until it stops on its own (or 20 s pass).
template <class Hook>
destroyed_client_run destroy_with_node_0_stopped(redlock::test::redis_fleet& fleet,
                                                 const std::string& resource,
                                                 const redlock::client_options& options,
                                                 Hook just_destroyed_at) {
  using namespace std::chrono_literals;
  destroyed_client_run run;
  redlock::test::inspector servers(fleet);
  boost::asio::io_context io;
  // Declared after the io_context: a lease's timers must go before the context they belong to.
  redlock::lease lease;
  std::optional<redlock::client> locks;
  locks.emplace(io.get_executor(), fleet.configs(), options);
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        auto [ec, acquired] = co_await locks->async_try_acquire(
            resource, redlock::test::lock_for(30s, renewal::off), redlock::test::tuple_awaitable);
        BOOST_TEST_REQUIRE(!ec, acquired.diagnostics());
        lease = std::move(acquired);
        BOOST_TEST_REQUIRE(co_await redlock::test::eventually(
            [&] { return servers.holding(resource, lease.token()) == fleet.size(); }, 3s));
        lease.async_wait_lost([&](boost::system::error_code e) { run.lost = e; });
        run.accepted_before = connections_accepted_so_far(fleet[0]);
        fleet[0].pause();
        run.destroyed_at = std::chrono::steady_clock::now();
        just_destroyed_at(*run.destroyed_at);
        locks.reset();
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run_for(20s);
  run.returned_at = std::chrono::steady_clock::now();
  run.stopped = io.stopped();
  run.lease_held_after = lease.held();
  return run;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(client_shutdown)

// Three held leases (one renewing), a local waiter behind one of them and a lost-waiter: the
// shutdown releases all three on every node and says so, the waiters end with operation_aborted,
// later operations fail with it, and io_context::run() returns on its own while the client lives.
BOOST_FIXTURE_TEST_CASE(releases_held_leases_and_lets_run_return, redlock::test::five_nodes) {
  asio::io_context io;
  redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());

  std::vector<redlock::lease> held;
  std::vector<std::string> tokens;
  std::optional<error_code> waiter_result, lost_result, shutdown_result, acquire_after, ping_after;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (const char* resource : {"a", "b", "c"}) {
          auto [ec, lease] = co_await locks.async_try_acquire(
              resource, lock_for(10s, resource == std::string("c") ? renewal::on : renewal::off),
              tuple_awaitable);
          BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
          tokens.push_back(lease.token());
          held.push_back(std::move(lease));
        }
        // Waits behind "a", held by this client.
        locks.async_acquire("a", lock_for(10s, renewal::off),
                            [&](error_code ec, redlock::lease) { waiter_result = ec; });
        held[2].async_wait_lost([&](error_code ec) { lost_result = ec; });
        co_await sleep_for(50ms);  // the waiter is queued, the lost-waiter registered

        auto [ec] = co_await locks.async_shutdown(tuple_awaitable);
        shutdown_result = ec;
        for (const auto& lease : held)
          BOOST_TEST(!lease.held());
        std::tie(ec, std::ignore) =
            co_await locks.async_try_acquire("d", lock_for(10s, renewal::off), tuple_awaitable);
        acquire_after = ec;
        std::tie(ec) = co_await locks.async_ping(tuple_awaitable);
        ping_after = ec;
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });

  const auto started = steady_clock::now();
  io.run_for(20s);
  // Out of work, not out of time: the connections closed and nothing else was left to run.
  BOOST_TEST(io.stopped());
  BOOST_TEST((steady_clock::now() - started < 15s));

  BOOST_TEST_REQUIRE(shutdown_result.has_value());
  BOOST_TEST(!*shutdown_result, shutdown_result->message());
  BOOST_TEST_REQUIRE(waiter_result.has_value());
  BOOST_TEST((*waiter_result == asio::error::operation_aborted), waiter_result->message());
  BOOST_TEST_REQUIRE(lost_result.has_value());
  BOOST_TEST((*lost_result == asio::error::operation_aborted), lost_result->message());
  BOOST_TEST_REQUIRE(acquire_after.has_value());
  BOOST_TEST((*acquire_after == asio::error::operation_aborted), acquire_after->message());
  BOOST_TEST_REQUIRE(ping_after.has_value());
  BOOST_TEST((*ping_after == asio::error::operation_aborted), ping_after->message());
  // Released, not left to expire.
  const char* resources[] = {"a", "b", "c"};
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    BOOST_TEST(nodes.present(resources[i]) == 0u, resources[i]);
  }
  BOOST_TEST(nodes.present("d") == 0u);
}

// An acquire in flight when the shutdown starts completes with operation_aborted, and the keys its
// round took are released: nothing is left on any node.
BOOST_AUTO_TEST_CASE(aborts_an_acquire_in_flight_and_frees_its_keys) {
  redlock::test::proxied_fleet nodes;
  inspector servers(nodes.fleet);
  run_async([&](asio::io_context&) -> asio::awaitable<void> {
    const auto executor = co_await asio::this_coro::executor;
    redlock::client locks(executor, nodes.configs(), fast_client_options(1s));
    BOOST_TEST_REQUIRE(co_await nodes.connect(locks));
    // Replies take 300 ms: the SETs run, the round is still waiting when the shutdown comes.
    for (auto& proxy : nodes.proxies)
      proxy->set_latency(redlock::test::chaos_proxy::direction::downstream, 300ms);
    std::optional<error_code> acquired;
    locks.async_try_acquire("r", lock_for(10s, renewal::off),
                            [&](error_code ec, redlock::lease) { acquired = ec; });
    BOOST_TEST(co_await eventually([&] { return servers.present("r") == 5u; }, 2s));

    auto [ec] = co_await locks.async_shutdown(tuple_awaitable);
    BOOST_TEST(!ec, ec.message());  // no lease was held
    BOOST_TEST_REQUIRE(acquired.has_value());
    BOOST_TEST((*acquired == asio::error::operation_aborted), acquired->message());
    BOOST_TEST(co_await eventually([&] { return servers.present("r") == 0u; }, 3s),
               "the aborted round's keys were left on " << servers.present("r") << " nodes");
  });
}

// Three of five nodes stop answering: the release cannot be confirmed by a quorum, and the
// shutdown says so within node_timeout, naming the nodes in the lease's diagnostics.
BOOST_AUTO_TEST_CASE(reports_a_release_no_quorum_confirmed) {
  redlock::test::proxied_fleet nodes;
  run_async([&](asio::io_context&) -> asio::awaitable<void> {
    const auto executor = co_await asio::this_coro::executor;
    redlock::client locks(executor, nodes.configs(), fast_client_options(300ms));
    BOOST_TEST_REQUIRE(co_await nodes.connect(locks));
    auto [ec, lease] =
        co_await locks.async_try_acquire("r", lock_for(10s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
    for (std::size_t i = 0; i < 3; ++i)
      nodes.proxies[i]->set_blackhole(true);

    const auto started = steady_clock::now();
    std::tie(ec) = co_await locks.async_shutdown(tuple_awaitable);
    BOOST_TEST((ec == error::no_quorum), ec.message());
    BOOST_TEST((steady_clock::now() - started < 3s));
    BOOST_TEST(lease.diagnostics().find(nodes.proxies[0]->config().address()) != std::string::npos,
               lease.diagnostics());
    nodes.clear_toxics();
  });
}

// A second async_shutdown while the first waits shares its outcome; one after it finished
// completes at once with success. A lease whose key another owner holds now (it expired and was
// taken) is no longer ours to release, and counts as released.
BOOST_FIXTURE_TEST_CASE(later_calls_share_the_outcome, redlock::test::five_nodes) {
  run_async([&](asio::io_context&) -> asio::awaitable<void> {
    const auto executor = co_await asio::this_coro::executor;
    redlock::client locks(executor, fleet.configs(), fast_client_options());
    auto [ec, taken] =
        co_await locks.async_try_acquire("taken", lock_for(10s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, taken.diagnostics());
    auto [ec2, kept] =
        co_await locks.async_try_acquire("kept", lock_for(10s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec2, kept.diagnostics());
    for (std::size_t i = 0; i < 5; ++i)
      nodes.set(i, "taken", "another-owner", 10s);

    std::optional<error_code> second;
    locks.async_shutdown([&](error_code e) { second = e; });
    std::tie(ec) = co_await locks.async_shutdown(tuple_awaitable);
    BOOST_TEST(!ec, ec.message());
    co_await sleep_for(10ms);  // the second handler is posted
    BOOST_TEST_REQUIRE(second.has_value());
    BOOST_TEST(!*second, second->message());
    BOOST_TEST(nodes.present("kept") == 0u);
    BOOST_TEST(nodes.holding("taken", "another-owner") == 5u);  // never someone else's key

    std::tie(ec) = co_await locks.async_shutdown(tuple_awaitable);
    BOOST_TEST(!ec, ec.message());
  });
}

// Cancelling the wait completes the handler with operation_aborted at once; the releases still go
// out and the keys are gone all the same.
BOOST_AUTO_TEST_CASE(cancelling_the_wait_does_not_stop_the_shutdown) {
  redlock::test::proxied_fleet nodes;
  inspector servers(nodes.fleet);
  run_async([&](asio::io_context&) -> asio::awaitable<void> {
    const auto executor = co_await asio::this_coro::executor;
    redlock::client locks(executor, nodes.configs(), fast_client_options(2s));
    BOOST_TEST_REQUIRE(co_await nodes.connect(locks));
    auto [ec, lease] =
        co_await locks.async_try_acquire("r", lock_for(30s, renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
    for (auto& proxy : nodes.proxies)
      proxy->set_latency(redlock::test::chaos_proxy::direction::downstream, 500ms);

    asio::cancellation_signal stop_waiting;
    std::optional<error_code> result;
    locks.async_shutdown(
        asio::bind_cancellation_slot(stop_waiting.slot(), [&](error_code e) { result = e; }));
    co_await sleep_for(50ms);
    BOOST_TEST(!result.has_value());  // the replies are 500 ms late
    stop_waiting.emit(asio::cancellation_type::terminal);
    co_await sleep_for(10ms);
    BOOST_TEST_REQUIRE(result.has_value());
    BOOST_TEST((*result == asio::error::operation_aborted), result->message());
    BOOST_TEST(co_await eventually([&] { return servers.present("r") == 0u; }, 3s));
    nodes.clear_toxics();
  });
}

// A node that refused every connect was never sent a request: nothing of ours can be there, so
// the end of the client does not wait for it, while a node once connected still gets its bounded
// wait for the releases kept for it. Three nodes, one refusing: a lock taken and released (or
// dropped while held), the client destroyed, and run() returns at once, not after
// 2 x node_timeout + connect_timeout (2.4 s here).
BOOST_AUTO_TEST_CASE(a_node_never_reached_is_not_waited_for) {
  redlock::test::redis_fleet fleet(2);
  for (const bool release_first : {true, false}) {
    BOOST_TEST_CONTEXT((release_first ? "released" : "dropped while held")) {
      asio::io_context io;
      // Bound but not listening: every connect to it is refused.
      asio::ip::tcp::acceptor refusing(io);
      refusing.open(asio::ip::tcp::v4());
      refusing.bind({asio::ip::address_v4::loopback(), 0});
      auto nodes = fleet.configs();
      nodes.push_back(nodes.front());
      nodes.back().port = refusing.local_endpoint().port();

      auto options = fast_client_options(200ms);
      options.connect_timeout = 2s;
      std::optional<redlock::client> locks;
      locks.emplace(io.get_executor(), nodes, options);
      std::optional<steady_clock::time_point> destroyed_at;
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            {
              auto [ec, lease] = co_await locks->async_try_acquire("r", lock_for(10s, renewal::off),
                                                                   tuple_awaitable);
              BOOST_TEST_REQUIRE(!ec, lease.diagnostics());
              BOOST_TEST(lease.granted_nodes() == 2u);
              if (release_first) {
                std::tie(ec) = co_await lease.async_release(tuple_awaitable);
                BOOST_TEST(!ec, lease.diagnostics());
              }
            }
            destroyed_at = steady_clock::now();
            locks.reset();
          },
          [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
          });
      io.run_for(20s);
      BOOST_TEST(io.stopped());
      BOOST_TEST_REQUIRE(destroyed_at.has_value());
      const auto took = redlock::test::ms_since(*destroyed_at);
      BOOST_TEST(took < 1000, "run() returned " << took << " ms after the client went");
      inspector servers(fleet);
      BOOST_TEST(servers.present("r") == 0u);
    }
  }
}

// cancellation-and-shutdown.md, "Cancellation" (the paragraph after the table): a destroyed
// client keeps its connections until its releases are out, at most
// 2 x node_timeout + connect_timeout. Three nodes, a lease held on all of them and a wait for its
// loss outstanding; one node is then stopped and the client destroyed. The release never gets
// out to that node, so run() returns after the whole bound and not much later: once with the link
// kept (the release in flight), once with the health check dropping it (the release kept for a
// reconnect, which hangs in the handshake of the stopped server).
BOOST_AUTO_TEST_CASE(a_silent_node_keeps_a_destroyed_clients_connections_at_most_the_bound) {
  redis_fleet fleet(3);
  inspector servers(fleet);
  constexpr milliseconds node_timeout{300};
  constexpr milliseconds connect_timeout{600};
  constexpr milliseconds drain_bound = 2 * node_timeout + connect_timeout;
  const auto still_running = redlock::test::node_range(1, 3);

  for (const auto& v : link_variants) {
    BOOST_TEST_CONTEXT(v.name) {
      auto options = fast_client_options(node_timeout);
      options.connect_timeout = connect_timeout;
      options.health_check_timeout = v.health_check_timeout;
      const std::string resource = std::string("silent:") + v.name;
      auto run = destroy_with_node_0_stopped(fleet, resource, options, [](auto) {});
      fleet[0].resume();
      // The server now takes the connects it queued while stopped (the reconnects).
      std::this_thread::sleep_for(300ms);
      const auto reconnects = connections_accepted_so_far(fleet[0]) - run.accepted_before - 1;
      BOOST_TEST((reconnects > 0) == v.link_dropped, reconnects << " reconnects");

      BOOST_TEST(run.stopped);
      BOOST_TEST_REQUIRE(run.destroyed_at.has_value());
      const auto took = redlock::test::ms_between(*run.destroyed_at, run.returned_at);
      BOOST_TEST_MESSAGE(v.name << ": run() returned " << took
                                << " ms after the client went (bound " << drain_bound.count()
                                << " ms)");
      BOOST_TEST(took >= drain_bound.count(), "run() returned after " << took << " ms");
      BOOST_TEST(took <= drain_bound.count() + 2000, "run() returned after " << took << " ms");
      BOOST_TEST_REQUIRE(run.lost.has_value());
      BOOST_TEST((*run.lost == asio::error::operation_aborted), run.lost->message());
      BOOST_TEST(!run.lease_held_after);
      BOOST_TEST(servers.present_on(still_running, resource) == 0u);
    }
  }
}

// cancellation-and-shutdown.md, "Cancellation" (the paragraph after the table): a destroyed
// client keeps its connections until its releases are out. As above, but the stopped node comes
// back 1 s after the client went, past the release's node_timeout and well within the bound
// (3 s here): the release reaches it, and only then, still before the bound, does run() return.
BOOST_AUTO_TEST_CASE(a_node_back_within_the_bound_gets_a_destroyed_clients_release) {
  redis_fleet fleet(3);
  inspector servers(fleet);
  constexpr milliseconds node_timeout{500};
  constexpr milliseconds connect_timeout{2000};
  constexpr milliseconds drain_bound = 2 * node_timeout + connect_timeout;
  constexpr milliseconds silent_for{1000};

  for (const auto& v : link_variants) {
    BOOST_TEST_CONTEXT(v.name) {
      auto options = fast_client_options(node_timeout);
      options.connect_timeout = connect_timeout;
      options.health_check_timeout = v.health_check_timeout;
      const std::string resource = std::string("back:") + v.name;
      steady_clock::time_point resumed_at;
      // Resumes the node from outside the io_context, which must then be kept running by the
      // client alone.
      std::optional<redlock::test::background_thread> resumer;
      auto run = destroy_with_node_0_stopped(
          fleet, resource, options, [&](steady_clock::time_point destroyed_at) {
            resumer.emplace([&fleet, &resumed_at, until = destroyed_at + silent_for] {
              std::this_thread::sleep_until(until);
              resumed_at = steady_clock::now();
              fleet[0].resume();
            });
          });
      if (resumer) resumer->join();

      BOOST_TEST(run.stopped);
      BOOST_TEST_REQUIRE(run.destroyed_at.has_value());
      const auto took = redlock::test::ms_between(*run.destroyed_at, run.returned_at);
      BOOST_TEST_MESSAGE(v.name << ": run() returned " << took << " ms after the client went, "
                                << redlock::test::ms_between(resumed_at, run.returned_at)
                                << " ms after the node came back (bound " << drain_bound.count()
                                << " ms)");
      BOOST_TEST((run.returned_at >= resumed_at), "run() returned before the node came back");
      BOOST_TEST(took < drain_bound.count(), "run() returned after " << took << " ms");
      const auto reconnects = connections_accepted_so_far(fleet[0]) - run.accepted_before - 1;
      BOOST_TEST((reconnects > 0) == v.link_dropped, reconnects << " reconnects");
      // Read at once: the connection ended only after the node had run the release.
      BOOST_TEST(servers.present(resource) == 0u);
      BOOST_TEST_REQUIRE(run.lost.has_value());
      BOOST_TEST((*run.lost == asio::error::operation_aborted), run.lost->message());
      BOOST_TEST(!run.lease_held_after);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
