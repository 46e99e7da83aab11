// The read-write lock on real servers: readers together, writers alone, a waiting writer's marks
// keeping new readers out, its marks deleted when it gives up, local queueing, a crashed reader
// bounded by its own TTL, renewal and loss, fencing, and with_read_lock / with_write_lock. The
// scripts alone are in test_rw_scripts.cpp; the safety property under node faults in
// test_rw_safety.cpp.
#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "lock/scripts.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/fleet_commands.hpp"
#include "support/holder_process.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/strand_clients.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

namespace d = redlock::detail;
using redlock::lease;
using redlock::rw_lock;
using redlock::test::tuple_awaitable;
using clock = std::chrono::steady_clock;

// On how many of the fleet's nodes `key` exists.
std::size_t nodes_with(redis_fleet& fleet, const std::string& key) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    sync_client c(fleet[i].port());
    if (c.command({"EXISTS", key}).integer == 1) ++count;
  }
  return count;
}

// The live readers of lock `name` on node `i`.
long long readers_on(redis_fleet& fleet, std::size_t i, const std::string& name) {
  sync_client c(fleet[i].port());
  return c.command({"ZCOUNT", d::rw_readers_key(name), "-inf", "+inf"}).integer;
}

// A reader that is no client of the test and never comes back: its entry on every node, with
// `ttl`, as rw_read_acquire_script writes it.
void foreign_reader(redis_fleet& fleet, const std::string& name, std::chrono::milliseconds ttl) {
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    sync_client c(fleet[i].port());
    const auto reply =
        c.command({"EVAL", d::rw_read_acquire_script().source(), "3", d::rw_writer_key(name),
                   d::rw_readers_key(name), d::rw_mark_key(name), "crashed-reader",
                   std::to_string(ttl.count()), "0"});
    BOOST_TEST_REQUIRE((reply.kind == redlock::resp::type::simple_string));
  }
}

// Whether every node of `fleet` has `count` live readers of lock `name`.
bool all_nodes(redis_fleet& fleet, const std::string& name, long long count) {
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    if (readers_on(fleet, i, name) != count) return false;
  }
  return true;
}

redlock::lock_options rw_options(std::chrono::milliseconds ttl = 5000ms,
                                 std::optional<std::chrono::milliseconds> wait = std::nullopt) {
  auto options = lock_for(ttl);
  options.wait = wait;
  return options;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rwlock)

BOOST_AUTO_TEST_CASE(readers_of_several_clients_hold_at_once) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client first(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client second(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock a(first, "catalog", rw_options());
    rw_lock b(second, "catalog", rw_options());
    auto [ec1, r1] = co_await a.async_try_acquire_read(tuple_awaitable);
    auto [ec2, r2] = co_await a.async_try_acquire_read(tuple_awaitable);
    auto [ec3, r3] = co_await b.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec1, ec1.message() << ": " << r1.diagnostics());
    BOOST_TEST_REQUIRE(!ec2, ec2.message() << ": " << r2.diagnostics());
    BOOST_TEST_REQUIRE(!ec3, ec3.message() << ": " << r3.diagnostics());
    BOOST_TEST(r1.held());
    BOOST_TEST(r2.held());
    BOOST_TEST(r3.held());
    BOOST_TEST(r1.resource() == d::rw_readers_key("catalog"));
    // Each acquire completes on a quorum's grants; the others land a moment later.
    const bool three_everywhere =
        co_await eventually([&] { return all_nodes(fleet, "catalog", 3); });
    BOOST_TEST(three_everywhere);

    // Releasing one reader removes only its own entry.
    auto [released] = co_await r2.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
    const bool two_everywhere = co_await eventually([&] { return all_nodes(fleet, "catalog", 2); });
    BOOST_TEST(two_everywhere);
    BOOST_TEST(r1.held());
    BOOST_TEST(r3.held());
  });
}

BOOST_AUTO_TEST_CASE(a_writer_is_refused_while_readers_hold_and_leaves_no_mark) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client readers(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client writers(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock for_reading(readers, "config", rw_options());
    rw_lock for_writing(writers, "config", rw_options());
    auto [ec, reader] = co_await for_reading.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());

    auto [refused, none] = co_await for_writing.async_try_acquire_write(tuple_awaitable);
    BOOST_TEST((refused == redlock::condition::not_acquired), refused.message());
    BOOST_TEST(!none.held());
    BOOST_TEST(none.diagnostics().find("\"config\" (to write)") != std::string::npos,
               none.diagnostics());
    // The try marked the nodes when the readers refused it, and deleted the marks when it ended.
    const bool unmarked =
        co_await eventually([&] { return nodes_with(fleet, d::rw_mark_key("config")) == 0; });
    BOOST_TEST(unmarked);
    BOOST_TEST(nodes_with(fleet, d::rw_writer_key("config")) == 0u);

    // Readers still come in.
    auto [ec2, reader2] = co_await for_reading.async_try_acquire_read(tuple_awaitable);
    BOOST_TEST(!ec2, ec2.message());

    // A writer that waits and gives up deletes its marks too.
    auto options = rw_options(5000ms, 300ms);
    rw_lock impatient(writers, "config", options);
    auto [timed_out, none2] = co_await impatient.async_acquire_write(tuple_awaitable);
    BOOST_TEST(timed_out == error::wait_timeout, timed_out.message());
    const bool unmarked2 =
        co_await eventually([&] { return nodes_with(fleet, d::rw_mark_key("config")) == 0; });
    BOOST_TEST(unmarked2);
    auto [ec3, reader3] = co_await for_reading.async_try_acquire_read(tuple_awaitable);
    BOOST_TEST(!ec3, ec3.message());
  });
}

BOOST_AUTO_TEST_CASE(a_waiting_writer_keeps_new_readers_out_and_wins_when_readers_leave) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client first(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client second(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client third(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock old_readers(first, "schema", rw_options(10s));
    rw_lock writer(second, "schema", rw_options(10s, 20s));
    rw_lock new_readers(third, "schema", rw_options(10s, 20s));

    auto [ec, held] = co_await old_readers.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());

    std::optional<error_code> wrote;
    lease written;
    writer.async_acquire_write([&](error_code e, lease l) {
      wrote = e;
      written = std::move(l);
    });
    // The writer waits with its marks on a quorum (renewed while it waits).
    const bool marked = co_await eventually(
        [&] { return nodes_with(fleet, d::rw_mark_key("schema")) >= 2; }, 5000ms);
    BOOST_TEST_REQUIRE(marked);

    // New readers are refused, and wait.
    auto [refused, none] = co_await new_readers.async_try_acquire_read(tuple_awaitable);
    BOOST_TEST((refused == redlock::condition::not_acquired), refused.message());
    std::optional<error_code> read;
    lease reading;
    new_readers.async_acquire_read([&](error_code e, lease l) {
      read = e;
      reading = std::move(l);
    });
    co_await sleep_for(300ms);
    BOOST_TEST(!wrote.has_value());
    BOOST_TEST(!read.has_value());

    // The old reader leaves: the writer gets the lock at once (announced), long before any TTL.
    const auto left = clock::now();
    auto [released] = co_await held.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
    const bool got_it = co_await eventually([&] { return wrote.has_value(); }, 5000ms);
    BOOST_TEST_REQUIRE(got_it);
    BOOST_TEST(!*wrote, wrote->message() << ": " << written.diagnostics());
    BOOST_TEST(ms_since(left) < 5000);
    BOOST_TEST(written.held());
    const bool unmarked =
        co_await eventually([&] { return nodes_with(fleet, d::rw_mark_key("schema")) == 0; });
    BOOST_TEST(unmarked);
    BOOST_TEST(!read.has_value(), "a reader got in beside the writer");

    // The writer leaves: the waiting reader gets in.
    auto [released2] = co_await written.async_release(tuple_awaitable);
    BOOST_TEST(!released2, released2.message());
    const bool reader_in = co_await eventually([&] { return read.has_value(); }, 5000ms);
    BOOST_TEST_REQUIRE(reader_in);
    BOOST_TEST(!*read, read->message() << ": " << reading.diagnostics());
    BOOST_TEST(reading.held());
  });
}

// Two writers of two clients wait behind a reader: the first one's marks stand on every node, so
// the second is refused by them and cannot mark. When the reader leaves, the writer whose marks
// stand gets the lock first, and the other only after it released (rw-lock.md, "Fairness").
BOOST_AUTO_TEST_CASE(among_waiting_writers_the_one_whose_marks_stand_goes_first) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client reader_client(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client first_client(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client second_client(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock reader(reader_client, "ordered", rw_options(10s));
    rw_lock first(first_client, "ordered", rw_options(10s, 20s));
    rw_lock second(second_client, "ordered", rw_options(10s, 20s));

    auto [ec, reading] = co_await reader.async_try_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());

    // Who got the write lock, in order, and when the first writer let it go.
    std::vector<int> order;
    std::optional<clock::time_point> first_released;
    std::optional<clock::time_point> second_acquired;
    int done = 0;
    const auto write = [&](rw_lock& lock, int who) -> asio::awaitable<void> {
      auto [write_ec, written] = co_await lock.async_acquire_write(tuple_awaitable);
      BOOST_TEST(!write_ec,
                 "writer " << who << ": " << write_ec.message() << ": " << written.diagnostics());
      if (!write_ec) {
        order.push_back(who);
        if (who == 2) second_acquired = clock::now();
        co_await sleep_for(300ms);
        if (who == 1) first_released = clock::now();
        co_await written.async_release(tuple_awaitable);
      }
      ++done;
    };
    asio::co_spawn(io, write(first, 1), asio::detached);
    BOOST_TEST_REQUIRE(co_await eventually(
        [&] { return nodes_with(fleet, d::rw_mark_key("ordered")) == fleet.size(); }, 5000ms));
    asio::co_spawn(io, write(second, 2), asio::detached);
    co_await sleep_for(300ms);  // the second writer's rounds meet the first one's marks
    BOOST_TEST(order.empty());

    auto [released] = co_await reading.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
    BOOST_TEST_REQUIRE(co_await eventually([&] { return done == 2; }, 10s));
    BOOST_TEST(order == (std::vector<int>{1, 2}), boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(first_released.has_value());
    BOOST_TEST_REQUIRE(second_acquired.has_value());
    BOOST_TEST((*second_acquired >= *first_released), "the second writer overlapped the first");
  });
}

BOOST_AUTO_TEST_CASE(a_crashed_reader_blocks_a_writer_no_longer_than_its_ttl) {
  redis_fleet fleet(3);
  foreign_reader(fleet, "report", 1500ms);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock report(locks, "report", rw_options(5000ms, 10s));
    const auto started = clock::now();
    auto [ec, written] = co_await report.async_acquire_write(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << written.diagnostics());
    const auto waited = ms_since(started);
    // Its entry counted until its own deadline, and no longer (generous bounds: a busy machine).
    BOOST_TEST(waited >= 1000, waited);
    BOOST_TEST(waited < 6000, waited);
  });
}

// A reader process killed with SIGKILL while it holds (and renews) its entry: a writer is refused
// until a majority of nodes let that entry expire (the readers' set expires with its last entry,
// so its PTTLs, read right after the kill, say when), and a waiting writer gets in then, within
// two seconds.
BOOST_AUTO_TEST_CASE(a_killed_reader_process_blocks_a_writer_until_its_entry_expires) {
  redis_fleet fleet(3);
  const std::chrono::milliseconds ttl = 3000ms;
  const std::string name = "killed";
  const pid_t reader = redlock::test::start_holder_process(
      [&](asio::io_context& io, auto took) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
        rw_lock doc(locks, name, rw_options(ttl));
        auto [ec, held] = co_await doc.async_try_acquire_read(tuple_awaitable);
        took(!ec);
        co_await sleep_for(1h);  // killed about here, holding and renewing its entry
      });
  // Let the renewal at half-life happen first, so that the entry the writer waits out is a
  // renewed one; killed a third of a TTL before the first deadline, so that a renewal delayed on
  // a busy machine still leaves the entry alive to be measured.
  std::this_thread::sleep_for(ttl * 2 / 3);
  redlock::test::kill_process(reader);

  const auto entries = redlock::test::read_key_lifetimes(fleet, d::rw_readers_key(name));
  BOOST_TEST_REQUIRE(entries.on_a_majority(), "the reader is not held on a majority");
  const auto free_from = entries.majority_gone_at();

  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock doc(locks, name, rw_options(5000ms, ttl + 5s));
    auto [refused, none] = co_await doc.async_try_acquire_write(tuple_awaitable);
    BOOST_TEST((refused == redlock::condition::not_acquired), refused.message());
    auto [ec, written] = co_await doc.async_acquire_write(tuple_awaitable);
    const auto at = clock::now();
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << written.diagnostics());
    const auto after = std::chrono::duration_cast<std::chrono::milliseconds>(at - free_from);
    // Not before a majority let the dead reader's entry expire (1 ms: PTTL's rounding), and
    // soon after.
    BOOST_TEST(after.count() >= -1, "taken " << -after.count() << " ms before the entry expired");
    BOOST_TEST(after.count() < 2000, "taken " << after.count() << " ms after the entry expired");
    auto [released] = co_await written.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
  });
}

BOOST_AUTO_TEST_CASE(writers_exclude_each_other_and_readers) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client first(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client second(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock mine(first, "ledger", rw_options());
    rw_lock theirs(second, "ledger", rw_options());
    auto [ec, written] = co_await mine.async_try_acquire_write(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    BOOST_TEST(written.resource() == d::rw_writer_key("ledger"));
    auto [refused, none] = co_await theirs.async_try_acquire_write(tuple_awaitable);
    BOOST_TEST((refused == redlock::condition::not_acquired), refused.message());
    auto [refused2, none2] = co_await theirs.async_try_acquire_read(tuple_awaitable);
    BOOST_TEST((refused2 == redlock::condition::not_acquired), refused2.message());
    // Within the client: the writer's own lease keeps its readers and writers out too.
    auto [refused3, none3] = co_await mine.async_try_acquire_read(tuple_awaitable);
    BOOST_TEST(refused3 == error::contended, refused3.message());
    auto [released] = co_await written.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
    const bool released_everywhere =
        co_await eventually([&] { return nodes_with(fleet, d::rw_writer_key("ledger")) == 0; });
    BOOST_TEST(released_everywhere);
    auto [ec2, reading] = co_await theirs.async_try_acquire_read(tuple_awaitable);
    BOOST_TEST(!ec2, ec2.message());
  });
}

BOOST_AUTO_TEST_CASE(local_acquires_queue_in_order_and_readers_hold_together) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock lock(locks, "cache", rw_options(5000ms, 10s));
    std::vector<std::string> order;
    std::vector<lease> leases(4);
    auto record = [&](std::string what, std::size_t slot) {
      return [&order, &leases, what, slot](error_code e, lease l) {
        BOOST_TEST(!e, what << ": " << e.message() << ": " << l.diagnostics());
        order.push_back(what);
        leases[slot] = std::move(l);
      };
    };
    lock.async_acquire_read(record("reader 1", 0));
    lock.async_acquire_read(record("reader 2", 1));
    lock.async_acquire_write(record("writer", 2));
    lock.async_acquire_read(record("reader 3", 3));
    const bool readers_in = co_await eventually([&] { return order.size() == 2; });
    BOOST_TEST_REQUIRE(readers_in);
    co_await sleep_for(200ms);
    BOOST_TEST(order.size() == 2u, "the writer waits for the readers, reader 3 behind it");

    auto [r1] = co_await leases[0].async_release(tuple_awaitable);
    BOOST_TEST(!r1);
    co_await sleep_for(100ms);
    BOOST_TEST(order.size() == 2u);
    auto [r2] = co_await leases[1].async_release(tuple_awaitable);
    BOOST_TEST(!r2);
    const bool writer_in = co_await eventually([&] { return order.size() == 3; }, 5000ms);
    BOOST_TEST_REQUIRE(writer_in);
    co_await sleep_for(100ms);
    BOOST_TEST(order.size() == 3u);
    auto [r3] = co_await leases[2].async_release(tuple_awaitable);
    BOOST_TEST(!r3);
    const bool last_in = co_await eventually([&] { return order.size() == 4; }, 5000ms);
    BOOST_TEST_REQUIRE(last_in);
    const std::vector<std::string> expected = {"reader 1", "reader 2", "writer", "reader 3"};
    BOOST_TEST(order == expected, boost::test_tools::per_element());
  });
}

// Proves rw-lock.md, "Fairness", last sentence: a writer first in line contends at once, also
// while this client's readers hold. Two readers of the client hold (renewed: they would hold for
// ever); the client's writer, first in its queue behind them, goes to the nodes at once: every
// node refuses it for the live readers and carries its mark (with the writer's TTL) while both
// local readers still hold there, and a reader of another client arriving now is refused by the
// marks. Once the local readers release, the writer gets the lock at once, and its marks are gone.
BOOST_AUTO_TEST_CASE(a_writer_first_in_line_marks_the_nodes_while_local_readers_hold) {
  redis_fleet fleet(3);
  const std::string name = "inventory";
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client elsewhere(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock local(locks, name, rw_options(3000ms, 20s));
    rw_lock other(elsewhere, name, rw_options(3000ms));
    auto [ec1, first_reader] = co_await local.async_acquire_read(tuple_awaitable);
    auto [ec2, second_reader] = co_await local.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec1, ec1.message() << ": " << first_reader.diagnostics());
    BOOST_TEST_REQUIRE(!ec2, ec2.message() << ": " << second_reader.diagnostics());
    BOOST_TEST_REQUIRE(co_await eventually([&] { return all_nodes(fleet, name, 2); }));
    BOOST_TEST_REQUIRE(nodes_with(fleet, d::rw_mark_key(name)) == 0u);

    std::optional<error_code> wrote;
    lease written;
    local.async_acquire_write([&](error_code e, lease l) {
      wrote = e;
      written = std::move(l);
    });
    const bool marked_everywhere = co_await eventually(
        [&] { return nodes_with(fleet, d::rw_mark_key(name)) == fleet.size(); }, 2000ms);
    BOOST_TEST_REQUIRE(marked_everywhere,
                       "the writer did not mark every node while the local "
                       "readers hold: it waits for them instead of contending");
    // The marks stand beside the local readers' live entries, with the writer's TTL.
    BOOST_TEST(first_reader.held());
    BOOST_TEST(second_reader.held());
    BOOST_TEST(all_nodes(fleet, name, 2));
    BOOST_TEST(nodes_with(fleet, d::rw_writer_key(name)) == 0u);
    for (std::size_t i = 0; i < fleet.size(); ++i) {
      const auto left = sync_client(fleet[i].port()).command({"PTTL", d::rw_mark_key(name)});
      BOOST_TEST((left.integer > 0 && left.integer <= 3000), "node " << i << ": " << left.integer);
    }
    BOOST_TEST(!wrote.has_value());
    // Readers elsewhere arriving after the marks are kept out.
    auto [refused, none] = co_await other.async_try_acquire_read(tuple_awaitable);
    BOOST_TEST((refused == redlock::condition::not_acquired), refused.message());

    auto [r1] = co_await first_reader.async_release(tuple_awaitable);
    BOOST_TEST(!r1, r1.message());
    co_await sleep_for(200ms);
    BOOST_TEST(!wrote.has_value(), "the writer got in beside a local reader");
    const auto last_left = clock::now();
    auto [r2] = co_await second_reader.async_release(tuple_awaitable);
    BOOST_TEST(!r2, r2.message());
    const bool writer_in = co_await eventually([&] { return wrote.has_value(); }, 5000ms);
    BOOST_TEST_REQUIRE(writer_in);
    BOOST_TEST_REQUIRE(!*wrote, wrote->message() << ": " << written.diagnostics());
    BOOST_TEST(ms_since(last_left) < 1000, "acquired " << ms_since(last_left) << " ms after");
    BOOST_TEST(written.held());
    const bool unmarked =
        co_await eventually([&] { return nodes_with(fleet, d::rw_mark_key(name)) == 0; });
    BOOST_TEST(unmarked);
    auto [r3] = co_await written.async_release(tuple_awaitable);
    BOOST_TEST(!r3, r3.message());
  });
}

BOOST_AUTO_TEST_CASE(renewal_keeps_each_reader_on_its_own) {
  redis_fleet fleet(3);
  foreign_reader(fleet, "feed", 800ms);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock feed(locks, "feed", rw_options(600ms));
    auto [ec, reading] = co_await feed.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    co_await sleep_for(1500ms);
    BOOST_TEST(reading.held(), reading.diagnostics());
    // Our renewals moved our own deadline only: the crashed reader's entry is past its deadline.
    for (std::size_t i = 0; i < fleet.size(); ++i) {
      sync_client c(fleet[i].port());
      const auto now_ms = [&] {
        const auto t = c.command({"TIME"});
        return std::stoll(t.elements[0].text) * 1000 + std::stoll(t.elements[1].text) / 1000;
      }();
      const auto crashed = c.command({"ZSCORE", d::rw_readers_key("feed"), "crashed-reader"});
      BOOST_TEST((crashed.is_null() || std::stoll(crashed.text) <= now_ms), "node " << i);
      const auto ours = c.command({"ZSCORE", d::rw_readers_key("feed"), reading.token()});
      BOOST_TEST_REQUIRE(!ours.is_null());
      BOOST_TEST(std::stoll(ours.text) > now_ms, "node " << i);
    }
  });
}

BOOST_AUTO_TEST_CASE(a_reader_removed_on_a_quorum_is_lost_and_its_body_cancelled) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock feed(locks, "feed", rw_options(600ms));
    std::optional<error_code> ended;
    bool body_cancelled = false;
    try {
      co_await redlock::with_read_lock(feed, [&](lease& held) -> asio::awaitable<void> {
        // The acquire completes on a quorum's grants; the third may still be on its way, and
        // would land after a removal made now.
        const bool everywhere = co_await eventually([&] {
          return readers_on(fleet, 0, "feed") + readers_on(fleet, 1, "feed") +
                     readers_on(fleet, 2, "feed") ==
                 3;
        });
        BOOST_TEST_REQUIRE(everywhere);
        for (std::size_t i = 0; i < 2; ++i) {
          sync_client c(fleet[i].port());
          c.command({"ZREM", d::rw_readers_key("feed"), held.token()});
        }
        try {
          co_await sleep_for(10s);
        } catch (const boost::system::system_error&) {
          body_cancelled = true;
          throw;
        }
      });
    } catch (const boost::system::system_error& e) {
      ended = e.code();
    }
    BOOST_TEST_REQUIRE(ended.has_value());
    BOOST_TEST(*ended == error::lock_lost, ended->message());
    BOOST_TEST(body_cancelled);
    // The lost reader's entry is gone everywhere (its loss released it).
    const bool gone = co_await eventually([&] {
      return readers_on(fleet, 0, "feed") + readers_on(fleet, 1, "feed") +
                 readers_on(fleet, 2, "feed") ==
             0;
    });
    BOOST_TEST(gone);
  });
}

BOOST_AUTO_TEST_CASE(with_read_lock_and_with_write_lock_release_when_done) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock doc(locks, "doc", rw_options());
    const int read =
        co_await redlock::with_read_lock(doc, [&](lease& held) -> asio::awaitable<int> {
          BOOST_TEST(held.held());
          BOOST_TEST(nodes_with(fleet, d::rw_readers_key("doc")) >= 2u);
          co_return 7;
        });
    BOOST_TEST(read == 7);
    const bool read_released =
        co_await eventually([&] { return nodes_with(fleet, d::rw_readers_key("doc")) == 0; });
    BOOST_TEST(read_released);
    co_await redlock::with_write_lock(doc, [&](lease& held) -> asio::awaitable<void> {
      BOOST_TEST(held.held());
      BOOST_TEST(nodes_with(fleet, d::rw_writer_key("doc")) >= 2u);
      co_return;
    });
    const bool write_released =
        co_await eventually([&] { return nodes_with(fleet, d::rw_writer_key("doc")) == 0; });
    BOOST_TEST(write_released);
  });
}

BOOST_AUTO_TEST_CASE(with_fencing_writers_take_increasing_tokens_and_readers_the_last) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto options = rw_options();
    options.fencing = true;
    rw_lock doc(locks, "fenced-doc", options);
    auto [ec0, early] = co_await doc.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec0, ec0.message());
    BOOST_TEST((early.fencing_token() == std::optional<std::uint64_t>(0)));
    co_await early.async_release(tuple_awaitable);

    auto [ec1, first] = co_await doc.async_acquire_write(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec1, ec1.message());
    const auto t1 = first.fencing_token();
    BOOST_TEST_REQUIRE(t1.has_value());
    co_await first.async_release(tuple_awaitable);

    auto [ec2, reader] = co_await doc.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec2, ec2.message());
    BOOST_TEST((reader.fencing_token() == t1));
    co_await reader.async_release(tuple_awaitable);

    auto [ec3, second] = co_await doc.async_acquire_write(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec3, ec3.message());
    BOOST_TEST_REQUIRE(second.fencing_token().has_value());
    BOOST_TEST(*second.fencing_token() > *t1);
  });
}

BOOST_AUTO_TEST_CASE(a_cancelled_waiting_writer_deletes_its_marks) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client readers(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client writers(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock for_reading(readers, "page", rw_options());
    rw_lock for_writing(writers, "page", rw_options(5000ms, 20s));
    auto [ec, reading] = co_await for_reading.async_acquire_read(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    asio::cancellation_signal stop;
    std::optional<error_code> ended;
    for_writing.async_acquire_write(
        asio::bind_cancellation_slot(stop.slot(), [&](error_code e, lease) { ended = e; }));
    const bool marked =
        co_await eventually([&] { return nodes_with(fleet, d::rw_mark_key("page")) >= 2; }, 5000ms);
    BOOST_TEST_REQUIRE(marked);
    stop.emit(asio::cancellation_type::terminal);
    const bool done = co_await eventually([&] { return ended.has_value(); });
    BOOST_TEST_REQUIRE(done);
    BOOST_TEST(*ended == asio::error::operation_aborted);
    const bool unmarked =
        co_await eventually([&] { return nodes_with(fleet, d::rw_mark_key("page")) == 0; });
    BOOST_TEST(unmarked);
  });
}

// The documented multi-threaded setup: two clients, each on its own strand of one io_context that
// four threads run. Sixteen coroutines take the lock three times each, one acquire in four for
// writing; the holders are counted under a std::mutex, since the strands run at once: readers
// share, a writer is alone. Then read leases are destroyed on this thread, which runs neither
// strand: each is released. scripts/test.sh runs this under ThreadSanitizer.
BOOST_AUTO_TEST_CASE(readers_and_writers_on_two_strands_of_four_threads,
                     *boost::unit_test::label("threaded")) {
  redis_fleet fleet(3);
  const std::string name = "threaded";
  redlock::test::strand_clients setup(fleet.configs(), fast_client_options());
  std::vector<std::unique_ptr<rw_lock>> locks;
  for (std::size_t k = 0; k < setup.size(); ++k)
    locks.push_back(std::make_unique<rw_lock>(setup.at(k), name, rw_options(5000ms, 20s)));

  std::mutex counting;
  int readers = 0;
  int writers = 0;
  int most_readers = 0;
  int violations = 0;
  int reads = 0;
  int writes = 0;
  std::vector<std::string> errors;
  constexpr int coroutines = 16;
  setup.spawn(coroutines, [&](int c) -> asio::awaitable<void> {
    rw_lock& lock = *locks[c % 2];
    for (int i = 0; i < 3; ++i) {
      const bool write = (c + i) % 4 == 0;
      error_code ec;
      lease held;
      if (write) {
        std::tie(ec, held) = co_await lock.async_acquire_write(tuple_awaitable);
      } else {
        std::tie(ec, held) = co_await lock.async_acquire_read(tuple_awaitable);
      }
      if (ec) {
        const std::lock_guard<std::mutex> guard(counting);
        errors.push_back(ec.message() + ": " + held.diagnostics());
        continue;
      }
      {
        const std::lock_guard<std::mutex> guard(counting);
        if (writers > 0 || (write && readers > 0)) ++violations;
        if (write) {
          ++writers;
          ++writes;
        } else {
          most_readers = std::max(most_readers, ++readers);
          ++reads;
        }
      }
      co_await sleep_for(2ms);
      {
        const std::lock_guard<std::mutex> guard(counting);
        --(write ? writers : readers);
      }
      co_await held.async_release(tuple_awaitable);
    }
  });
  setup.run();
  const bool all_finished = setup.all_finished(60s);

  // Read leases taken on the strands and dropped here.
  std::vector<lease> dropped;
  for (std::size_t k = 0; k < setup.size(); ++k) {
    dropped.push_back(
        setup.on_strand(k, [&, k] { return locks[k]->async_acquire_read(asio::use_future); })
            .get());
  }
  dropped.clear();
  const bool released = redlock::test::eventually_blocking(
      [&] { return nodes_with(fleet, d::rw_readers_key(name)) == 0; }, 5s);
  setup.stop([&](std::size_t k) { locks[k].reset(); });

  BOOST_TEST(all_finished, setup.finished() << " of " << coroutines << " coroutines finished");
  BOOST_TEST(violations == 0, violations << " acquires held beside a writer");
  BOOST_TEST(errors.empty(), errors.size() << " acquires failed, the first: "
                                           << (errors.empty() ? "" : errors.front()));
  BOOST_TEST(reads + writes == coroutines * 3);
  BOOST_TEST(writes >= 1);
  BOOST_TEST(most_readers >= 2, "the readers never shared the lock");
  BOOST_TEST(released, "a read lease dropped off its strand was not released");
  for (const auto& key : {d::rw_readers_key(name), d::rw_writer_key(name), d::rw_mark_key(name)})
    BOOST_TEST(nodes_with(fleet, key) == 0u, key);
}

BOOST_AUTO_TEST_CASE(an_empty_name_is_an_invalid_argument) {
  redis_fleet fleet(1);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    rw_lock nameless(locks, "", rw_options());
    auto [ec, none] = co_await nameless.async_acquire_read(tuple_awaitable);
    BOOST_TEST(ec == error::invalid_argument, ec.message());
    BOOST_TEST(none.diagnostics().find("name is empty") != std::string::npos, none.diagnostics());
  });
}

BOOST_AUTO_TEST_SUITE_END()
