// A waiting writer's marks never outlive its acquire: not when a node's answer that set one comes
// after the acquire ended (or never, its request timed out), and not when wait_replicas follows
// the writes with WAIT, which must follow only the writes that grant or extend: a refusal that set
// a mark, or that tells the holder's PTTL, is the node's answer as it came.
#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "redlock/redlock.hpp"
#include "support/printing.hpp"
#include "support/proxied_fleet.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace {

namespace d = redlock::detail;
using redlock::lease;
using redlock::rw_lock;

bool has_key(std::uint16_t port, const std::string& key) {
  sync_client c(port);
  return c.command({"EXISTS", key}).integer == 1;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rw_marks)

// Three nodes: on A and B another writer holds, so they refuse without a mark; on C a reader holds,
// and C's replies take a second to come back (its requests time out after 200 ms). The waiting
// writer gives up after 500 ms, before it has heard from C at all; C has marked the lock for it
// all the same. Its marks must go when it
// ends: before, only marks it had heard of were deleted, and C kept readers out for its TTL.
BOOST_AUTO_TEST_CASE(marks_set_by_answers_after_the_end_are_deleted) {
  redlock::test::proxied_fleet nodes(3);
  const std::string name = "doc";
  for (std::size_t i = 0; i < 2; ++i) {
    sync_client c(nodes.fleet[i].port());
    c.command({"SET", d::rw_writer_key(name), "another-writer", "PX", "60000"});
  }
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client only_c(io.get_executor(), {nodes.fleet[2].config()}, fast_client_options());
    rw_lock on_c(only_c, name, lock_for(30s));
    auto [read_ec, reader] = co_await on_c.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!read_ec, read_ec.message() << ": " << reader.diagnostics());

    redlock::client locks(io.get_executor(), nodes.configs(), fast_client_options());
    // Connected first: the writer's rounds reach C at once, only C's replies are late.
    auto [ping_ec] = co_await locks.async_ping(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ping_ec, ping_ec.message());
    nodes.proxies[2]->set_latency(redlock::test::chaos_proxy::direction::downstream, 1000ms);
    auto options = lock_for(20s);
    options.wait = 500ms;
    rw_lock rw(locks, name, options);
    auto [ec, writer] = co_await rw.async_acquire_write(tuple_awaitable);
    BOOST_TEST(ec == error::wait_timeout, ec.message() << ": " << writer.diagnostics());
    // C's replies, and the deletion behind them, have arrived.
    BOOST_TEST(co_await eventually(
                   [&] { return !has_key(nodes.fleet[2].port(), d::rw_mark_key(name)); }, 5s),
               "the writer's mark stays on the slow node after its acquire ended");
    co_await reader.async_release(tuple_awaitable);
  });
}

// wait_replicas=1 on servers without replicas: no write can count. A writer refused by a reader
// on every node has marked every node; its try is contended (not "too few nodes answered"), and
// its marks are gone when it ends, so that the next reader gets in at once. Before, WAIT turned
// each refusal into a NOREPLICAS failure: the marks were never seen, stayed on a majority, and kept
// readers out for the writer's TTL.
//
// Every hold the replicated client meets is on every node before it tries (an acquire ends once
// a quorum granted), and the nodes get a second to answer: each write waits for its WAIT, which
// without replicas takes three quarters of that, and a node that did not answer in time would
// grant what the test means to be refused, and rightly report NOREPLICAS.
BOOST_AUTO_TEST_CASE(with_wait_replicas_a_refusal_is_a_refusal_and_its_marks_go) {
  redis_fleet fleet(3);
  const auto on_every_node = [&fleet](std::string key) {
    return eventually(
        [&fleet, key] {
          for (std::size_t i = 0; i < fleet.size(); ++i) {
            if (!has_key(fleet[i].port(), key)) return false;
          }
          return true;
        },
        5s);
  };
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client plain(io.get_executor(), fleet.configs(), fast_client_options(1s));
    auto nodes = fleet.configs();
    for (auto& node : nodes)
      node.wait_replicas = 1;
    redlock::client replicated(io.get_executor(), nodes, fast_client_options(1s));

    rw_lock readers(plain, "doc", lock_for(30s));
    auto [read_ec, reader] = co_await readers.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!read_ec, read_ec.message());
    BOOST_TEST_REQUIRE(co_await on_every_node(d::rw_readers_key("doc")));
    rw_lock writers(replicated, "doc", lock_for(30s));
    auto [write_ec, writer] = co_await writers.async_try_acquire_write(tuple_awaitable);
    BOOST_TEST(write_ec == error::contended, write_ec.message() << ": " << writer.diagnostics());
    BOOST_TEST(co_await eventually(
                   [&] {
                     for (std::size_t i = 0; i < fleet.size(); ++i) {
                       if (has_key(fleet[i].port(), d::rw_mark_key("doc"))) return false;
                     }
                     return true;
                   },
                   3s),
               "the refused writer's marks stayed");
    auto [again_ec, again] = co_await readers.async_try_acquire_read(tuple_awaitable);
    BOOST_TEST(!again_ec, again_ec.message() << ": " << again.diagnostics());

    // A lock held elsewhere: its refusals carry the holder's PTTL, and the try is contended.
    auto [held_ec, held] = co_await plain.async_acquire("plain", lock_for(30s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!held_ec, held_ec.message());
    BOOST_TEST_REQUIRE(co_await on_every_node("plain"));
    auto [try_ec, none] =
        co_await replicated.async_try_acquire("plain", lock_for(30s), tuple_awaitable);
    BOOST_TEST(try_ec == error::contended, try_ec.message() << ": " << none.diagnostics());
    BOOST_TEST(none.diagnostics().find("NOREPLICAS") == std::string::npos, none.diagnostics());
    co_await held.async_release(tuple_awaitable);
    co_await again.async_release(tuple_awaitable);
    co_await reader.async_release(tuple_awaitable);
  });
}

BOOST_AUTO_TEST_SUITE_END()
