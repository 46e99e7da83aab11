// client_options::observer against real redis-server processes: every acquire, extension, loss and
// release is reported once with its outcome, a node's link going down and up is reported on the
// change, and an observer that throws disturbs nothing.

#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "redlock/observer.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/inspector.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstddef>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using redlock::test::redis_server;

struct seen_acquire {
  std::string resource;
  error_code error;
  steady_clock::duration took;
  unsigned rounds;
  std::size_t granted_nodes;
};

struct seen_lease {
  std::string resource;
  error_code error;
  steady_clock::duration held;
};

struct seen_node {
  std::size_t node;
  std::string address;
  bool up;
  error_code error;
};

// Keeps a copy of every event; called on the client's (single-threaded) executor.
class recording_observer : public redlock::observer {
 public:
  void on_acquire(const redlock::acquire_event& e) override {
    acquires.push_back({std::string(e.resource), e.error, e.took, e.rounds, e.granted_nodes});
  }
  void on_extend(const redlock::lease_event& e) override {
    extends.push_back({std::string(e.resource), e.error, e.held});
  }
  void on_lost(const redlock::lease_event& e) override {
    losses.push_back({std::string(e.resource), e.error, e.held});
  }
  void on_release(const redlock::lease_event& e) override {
    releases.push_back({std::string(e.resource), e.error, e.held});
  }
  void on_node(const redlock::node_event& e) override {
    nodes.push_back({e.node, std::string(e.address), e.up, e.error});
  }

  std::size_t node_events(std::size_t node, bool up) const {
    return static_cast<std::size_t>(
        std::count_if(nodes.begin(), nodes.end(),
                      [&](const seen_node& n) { return n.node == node && n.up == up; }));
  }

  std::vector<seen_acquire> acquires;
  std::vector<seen_lease> extends;
  std::vector<seen_lease> losses;
  std::vector<seen_lease> releases;
  std::vector<seen_node> nodes;
};

redlock::client_options observed(const std::shared_ptr<recording_observer>& watcher) {
  auto options = fast_client_options();
  options.observer = watcher;
  return options;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(observer)

BOOST_AUTO_TEST_CASE(acquires_extensions_and_releases_are_reported_once_each) {
  redis_fleet fleet(3);
  redlock::test::inspector servers(fleet);
  auto watcher = std::make_shared<recording_observer>();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), observed(watcher));
    redlock::client rival(io.get_executor(), fleet.configs(), observed(watcher));

    auto [ec, lease] = co_await locks.async_acquire("observed", lock_for(5s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    BOOST_TEST_REQUIRE(watcher->acquires.size() == 1u);
    const auto& won = watcher->acquires[0];
    BOOST_TEST(won.resource == "observed");
    BOOST_TEST(!won.error);
    BOOST_TEST(won.rounds == 1u);
    // The acquire completes at the quorum's grant; the third may come later.
    BOOST_TEST(won.granted_nodes >= 2u);
    BOOST_TEST(won.granted_nodes <= 3u);
    BOOST_TEST((won.took > steady_clock::duration::zero()));

    // Refused elsewhere: a try is not_acquired after one round with no node granting, once the
    // holder's key is on every node (its third SET may still be on its way, and a rival's that
    // overtook it would be granted there).
    BOOST_TEST_REQUIRE(co_await eventually(
        [&] { return servers.holding("observed", lease.token()) == fleet.size(); }, 3s));
    auto [refused, none] =
        co_await rival.async_try_acquire("observed", lock_for(5s), tuple_awaitable);
    BOOST_TEST((refused == redlock::condition::not_acquired), refused.message());
    BOOST_TEST_REQUIRE(watcher->acquires.size() == 2u);
    BOOST_TEST(watcher->acquires[1].error == refused);
    BOOST_TEST(watcher->acquires[1].rounds == 1u);
    BOOST_TEST(watcher->acquires[1].granted_nodes == 0u);

    // A waiting acquire that times out.
    auto [timed_out, none2] =
        co_await rival.async_acquire("observed", {.ttl = 5s, .wait = 150ms}, tuple_awaitable);
    BOOST_TEST(timed_out == error::wait_timeout, timed_out.message());
    BOOST_TEST_REQUIRE(watcher->acquires.size() == 3u);
    BOOST_TEST(watcher->acquires[2].error == error::wait_timeout);
    BOOST_TEST(watcher->acquires[2].rounds >= 1u);
    BOOST_TEST((watcher->acquires[2].took >= 150ms));

    auto [extended] = co_await lease.async_extend(5s, tuple_awaitable);
    BOOST_TEST(!extended, extended.message());
    BOOST_TEST_REQUIRE(watcher->extends.size() == 1u);
    BOOST_TEST(watcher->extends[0].resource == "observed");
    BOOST_TEST(!watcher->extends[0].error);

    co_await sleep_for(20ms);
    auto [released] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
    BOOST_TEST_REQUIRE(watcher->releases.size() == 1u);
    BOOST_TEST(!watcher->releases[0].error);
    BOOST_TEST((watcher->releases[0].held >= 20ms));

    // Refusals are outcomes too.
    auto [again] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(again == error::not_held);
    BOOST_TEST_REQUIRE(watcher->releases.size() == 2u);
    BOOST_TEST(watcher->releases[1].error == error::not_held);
    auto [late] = co_await lease.async_extend(5s, tuple_awaitable);
    BOOST_TEST(late == error::not_held);
    BOOST_TEST_REQUIRE(watcher->extends.size() == 2u);
    BOOST_TEST(watcher->extends[1].error == error::not_held);

    // A lease destroyed while held is released best effort, and reported.
    {
      auto [ec2, dropped] = co_await locks.async_acquire("dropped", lock_for(5s), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec2, ec2.message());
    }
    const bool released_dropped =
        co_await eventually([&] { return watcher->releases.size() == 3; }, 3000ms);
    BOOST_TEST_REQUIRE(released_dropped);
    BOOST_TEST(watcher->releases[2].resource == "dropped");
    BOOST_TEST(!watcher->releases[2].error);

    // Every node came up once for each client, nothing went down.
    for (std::size_t node = 0; node < 3; ++node) {
      BOOST_TEST(watcher->node_events(node, true) == 2u, "node " << node);
      BOOST_TEST(watcher->node_events(node, false) == 0u, "node " << node);
    }
    BOOST_TEST(watcher->losses.empty());
    BOOST_TEST(watcher->acquires.size() == 4u);
  });
}

BOOST_AUTO_TEST_CASE(renewals_and_a_cancelled_acquire_are_reported) {
  redis_fleet fleet(3);
  auto watcher = std::make_shared<recording_observer>();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), observed(watcher));
    auto [ec, lease] = co_await locks.async_acquire("renewed", lock_for(300ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    // Renewal at half-life: two or more in 500 ms.
    const bool renewed = co_await eventually([&] { return watcher->extends.size() >= 2; }, 2000ms);
    BOOST_TEST(renewed);
    for (const auto& e : watcher->extends)
      BOOST_TEST(!e.error, e.error.message());

    // Cancelled while waiting behind the held lease.
    asio::cancellation_signal stop;
    std::optional<error_code> cancelled;
    locks.async_acquire("renewed", lock_for(5s),
                        asio::bind_cancellation_slot(
                            stop.slot(), [&](error_code e, redlock::lease) { cancelled = e; }));
    co_await sleep_for(30ms);
    stop.emit(asio::cancellation_type::terminal);
    const bool ended = co_await eventually([&] { return cancelled.has_value(); }, 1000ms);
    BOOST_TEST_REQUIRE(ended);
    BOOST_TEST(*cancelled == asio::error::operation_aborted);
    BOOST_TEST_REQUIRE(watcher->acquires.size() == 2u);
    BOOST_TEST(watcher->acquires[1].error == asio::error::operation_aborted);
    BOOST_TEST(watcher->acquires[1].rounds == 0u, "it waited in the local queue");
    auto [released] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!released);
  });
}

BOOST_AUTO_TEST_CASE(a_failed_extension_and_a_loss_are_reported) {
  redis_fleet fleet(3);
  auto watcher = std::make_shared<recording_observer>();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), observed(watcher));
    auto [ec, lease] = co_await locks.async_acquire(
        "stolen", lock_for(5s, redlock::test::renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    // Someone else's key on two of three nodes: the next extension finds the lock not ours.
    for (std::size_t node = 0; node < 2; ++node) {
      sync_client(fleet[node].port()).command({"SET", "stolen", "someone-else", "PX", "5000"});
    }
    auto [extended] = co_await lease.async_extend(5s, tuple_awaitable);
    BOOST_TEST(extended == error::not_held, extended.message());
    BOOST_TEST_REQUIRE(watcher->extends.size() == 1u);
    BOOST_TEST(watcher->extends[0].error == error::not_held);
    BOOST_TEST_REQUIRE(watcher->losses.size() == 1u);
    BOOST_TEST(watcher->losses[0].resource == "stolen");
    BOOST_TEST(watcher->losses[0].error == error::lock_lost);
    BOOST_TEST((watcher->losses[0].held > steady_clock::duration::zero()));
    BOOST_TEST(watcher->releases.empty());

    // A loss by expiry, without renewal: the TTL runs out.
    auto [ec2, short_lease] = co_await locks.async_acquire(
        "expires", lock_for(200ms, redlock::test::renewal::off), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec2, ec2.message());
    const bool lost = co_await eventually([&] { return watcher->losses.size() == 2; }, 2000ms);
    BOOST_TEST_REQUIRE(lost);
    BOOST_TEST(watcher->losses[1].resource == "expires");
  });
}

BOOST_AUTO_TEST_CASE(a_node_stopped_and_restarted_is_reported_down_then_up) {
  redis_fleet fleet(3);
  auto watcher = std::make_shared<recording_observer>();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), observed(watcher));
    auto [ec, lease] = co_await locks.async_acquire("nodes", lock_for(5s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    // The acquire completes on a majority; the third link may still be connecting.
    const bool all_up = co_await eventually(
        [&] {
          return watcher->node_events(0, true) == 1 && watcher->node_events(1, true) == 1 &&
                 watcher->node_events(2, true) == 1;
        },
        3000ms);
    BOOST_TEST_REQUIRE(all_up);

    fleet[1].kill9();
    const bool down =
        co_await eventually([&] { return watcher->node_events(1, false) == 1; }, 3000ms);
    BOOST_TEST_REQUIRE(down);
    const auto& event = watcher->nodes.back();
    BOOST_TEST(event.node == 1u);
    BOOST_TEST(event.address == fleet.configs()[1].address());
    BOOST_TEST(!event.up);
    // The link broke under it (its reconnects are refused, and not reported again).
    BOOST_TEST(event.error == error::connection_lost, event.error.message());
    // Reconnect attempts keep failing meanwhile: still one event.
    co_await sleep_for(300ms);
    BOOST_TEST(watcher->node_events(1, false) == 1u);

    fleet[1].start();
    const bool up = co_await eventually([&] { return watcher->node_events(1, true) == 2; }, 5000ms);
    BOOST_TEST(up);
    BOOST_TEST(watcher->node_events(0, false) == 0u);
    BOOST_TEST(watcher->node_events(2, false) == 0u);
    auto [released] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
  });
}

BOOST_AUTO_TEST_CASE(a_semaphore_permit_is_reported_under_the_semaphore_name) {
  redis_fleet fleet(3);
  auto watcher = std::make_shared<recording_observer>();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), observed(watcher));
    redlock::semaphore workers(locks, "workers", 2, lock_for(5s));
    auto [ec, permit] = co_await workers.async_acquire(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    BOOST_TEST_REQUIRE(watcher->acquires.size() == 1u);
    BOOST_TEST(watcher->acquires[0].resource == "workers");
    auto [released] = co_await permit.async_release(tuple_awaitable);
    BOOST_TEST(!released);
    BOOST_TEST_REQUIRE(watcher->releases.size() == 1u);
    BOOST_TEST(watcher->releases[0].resource == "workers");
  });
}

// A read-write lock's acquires, extensions, losses and releases are reported under the lock's
// name, readers and writers alike, with the same outcomes as a lock's.
BOOST_AUTO_TEST_CASE(a_read_write_lock_is_reported_under_its_name) {
  redis_fleet fleet(3);
  auto watcher = std::make_shared<recording_observer>();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), observed(watcher));
    redlock::rw_lock catalog(locks, "catalog", lock_for(5s, redlock::test::renewal::off));
    auto [read_ec, reader] = co_await catalog.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!read_ec, read_ec.message());
    BOOST_TEST_REQUIRE(watcher->acquires.size() == 1u);
    BOOST_TEST(watcher->acquires[0].resource == "catalog");
    BOOST_TEST(!watcher->acquires[0].error);
    BOOST_TEST(watcher->acquires[0].granted_nodes >= 2u);

    // Another client's writer refused beside the reader: not_acquired after one round.
    redlock::client rival(io.get_executor(), fleet.configs(), observed(watcher));
    redlock::rw_lock rival_catalog(rival, "catalog", lock_for(5s));
    auto [write_ec, none] = co_await rival_catalog.async_try_acquire_write(tuple_awaitable);
    BOOST_TEST((write_ec == redlock::condition::not_acquired), write_ec.message());
    BOOST_TEST_REQUIRE(watcher->acquires.size() == 2u);
    BOOST_TEST(watcher->acquires[1].resource == "catalog");
    BOOST_TEST(watcher->acquires[1].error == write_ec);
    BOOST_TEST(watcher->acquires[1].rounds == 1u);
    BOOST_TEST(watcher->acquires[1].granted_nodes == 0u);

    auto [extended] = co_await reader.async_extend(5s, tuple_awaitable);
    BOOST_TEST(!extended, extended.message());
    BOOST_TEST_REQUIRE(watcher->extends.size() == 1u);
    BOOST_TEST(watcher->extends[0].resource == "catalog");
    BOOST_TEST(!watcher->extends[0].error);

    // The reader's entry removed on every node: its next extension finds it gone, a loss.
    for (std::size_t node = 0; node < fleet.size(); ++node) {
      sync_client(fleet[node].port())
          .command({"ZREM", redlock::detail::rw_readers_key("catalog"), reader.token()});
    }
    auto [failed] = co_await reader.async_extend(5s, tuple_awaitable);
    BOOST_TEST(failed == error::not_held, failed.message());
    BOOST_TEST_REQUIRE(watcher->extends.size() == 2u);
    BOOST_TEST(watcher->extends[1].error == error::not_held);
    BOOST_TEST_REQUIRE(watcher->losses.size() == 1u);
    BOOST_TEST(watcher->losses[0].resource == "catalog");
    BOOST_TEST(watcher->losses[0].error == error::lock_lost);

    // A writer now gets in; its release is reported under the name too.
    auto [won_ec, writer] = co_await catalog.async_acquire_write(tuple_awaitable);
    BOOST_TEST_REQUIRE(!won_ec, won_ec.message() << ": " << writer.diagnostics());
    BOOST_TEST_REQUIRE(watcher->acquires.size() == 3u);
    BOOST_TEST(watcher->acquires[2].resource == "catalog");
    BOOST_TEST(!watcher->acquires[2].error);
    auto [released] = co_await writer.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
    BOOST_TEST_REQUIRE(watcher->releases.size() == 1u);
    BOOST_TEST(watcher->releases[0].resource == "catalog");
    BOOST_TEST(!watcher->releases[0].error);
  });
}

// A set of locks is reported once per outcome under its resources, sorted and comma-separated.
BOOST_AUTO_TEST_CASE(a_set_of_locks_is_reported_under_its_resources) {
  redis_fleet fleet(3);
  auto watcher = std::make_shared<recording_observer>();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), observed(watcher));
    const std::vector<std::string> accounts = {"to", "from"};
    auto [ec, set] = co_await locks.async_acquire_all(accounts, lock_for(5s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    BOOST_TEST_REQUIRE(watcher->acquires.size() == 1u);
    BOOST_TEST(watcher->acquires[0].resource == "from,to");
    auto [extended] = co_await set.async_extend(5s, tuple_awaitable);
    BOOST_TEST(!extended);
    auto [released] = co_await set.async_release(tuple_awaitable);
    BOOST_TEST(!released);
    BOOST_TEST_REQUIRE(watcher->extends.size() == 1u);
    BOOST_TEST(watcher->extends[0].resource == "from,to");
    BOOST_TEST_REQUIRE(watcher->releases.size() == 1u);
    BOOST_TEST(watcher->releases[0].resource == "from,to");
  });
}

// An observer is user code: one that throws does not disturb the acquire it reports; the
// exception comes out of run().
BOOST_AUTO_TEST_CASE(a_throwing_observer_reaches_run_and_the_acquire_completes) {
  struct throwing_observer : redlock::observer {
    void on_acquire(const redlock::acquire_event&) override {
      throw std::runtime_error("from the observer");
    }
  };
  redis_server server;
  asio::io_context io;
  auto options = fast_client_options();
  options.observer = std::make_shared<throwing_observer>();
  redlock::client locks(io.get_executor(), {server.config()}, options);
  std::future<bool> done = asio::co_spawn(
      io,
      [&]() -> asio::awaitable<bool> {
        auto lease = co_await locks.async_acquire("thrown", lock_for(5s), asio::use_awaitable);
        const bool held = lease.held();
        co_await lease.async_release(asio::use_awaitable);
        co_return held;
      },
      asio::use_future);
  bool thrown = false;
  try {
    io.run_for(5s);
  } catch (const std::runtime_error& e) {
    thrown = std::string(e.what()) == "from the observer";
  }
  BOOST_TEST(thrown);
  io.restart();
  const auto until = steady_clock::now() + 5s;
  while (done.wait_for(0s) != std::future_status::ready && steady_clock::now() < until)
    io.run_one_for(50ms);
  BOOST_TEST_REQUIRE((done.wait_for(0s) == std::future_status::ready));
  BOOST_TEST(done.get());
}

BOOST_AUTO_TEST_SUITE_END()
