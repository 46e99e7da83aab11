// The semaphore's acquire on real servers: how a round learns which slots are free and tries one
// of them next, the local queue and its wake-ups, announcements across clients, the cleanup of a
// refused round's grants on the slot it tried, fencing per slot, with_permit, cancellation. The
// "at most N holders" property under faults is in test_semaphore_safety.cpp.
#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/inspector.hpp"
#include "support/printing.hpp"
#include "support/reach.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace {

using redlock::detail::semaphore_slot_key;
using clock = std::chrono::steady_clock;

// Sets slot `slot` of semaphore `name` on `server` for a holder that is not a client of the test.
void hold_slot_elsewhere(redlock::test::redis_server& server, const std::string& name,
                         std::size_t slot, std::chrono::milliseconds ttl = 30s) {
  sync_client c(server.port());
  c.command(
      {"SET", semaphore_slot_key(name, slot), "someone-else", "PX", std::to_string(ttl.count())});
}

bool exists_on(redlock::test::redis_server& server, const std::string& key) {
  sync_client c(server.port());
  return c.command({"EXISTS", key}).integer == 1;
}

// How many EVALSHA calls `server` ran since its statistics were reset.
long long evalsha_calls(redlock::test::redis_server& server) {
  return redlock::test::info_counter(server.port(), "commandstats", "cmdstat_evalsha:calls=");
}

// The ids of the client's lock connections to `server` (CLIENT LIST: named redlock-asio, and not
// a subscriber, whose flags have P).
std::vector<long long> lock_connection_ids(redlock::test::redis_server& server) {
  sync_client admin(server.port());
  const auto list = admin.command({"CLIENT", "LIST"}).text;
  std::vector<long long> ids;
  std::size_t start = 0;
  while (start < list.size()) {
    auto end = list.find('\n', start);
    if (end == std::string::npos) end = list.size();
    const std::string_view line(list.data() + start, end - start);
    start = end + 1;
    const auto flags = line.find(" flags=");
    if (line.find(" name=redlock-asio ") == std::string_view::npos ||
        flags == std::string_view::npos ||
        line.substr(flags + 7, line.find(' ', flags + 7) - flags - 7).find('P') !=
            std::string_view::npos) {
      continue;
    }
    ids.push_back(std::stoll(std::string(line.substr(line.find("id=") + 3))));
  }
  return ids;
}

void reset_stats(redis_fleet& fleet) {
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    sync_client c(fleet[i].port());
    c.command({"CONFIG", "RESETSTAT"});
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(semaphore)

// One refusal tells where the free slot is: with 15 of 16 slots held elsewhere, a try needs at
// most two rounds (a random first slot, then the one the refusals showed free), not sixteen.
BOOST_AUTO_TEST_CASE(a_refusal_points_the_next_round_at_the_free_slot) {
  redis_fleet fleet(3);
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    for (std::size_t slot = 0; slot < 16; ++slot) {
      if (slot != 11) hold_slot_elsewhere(fleet[i], "pool", slot);
    }
  }
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    const auto ping_ec = co_await redlock::test::ping_until_answered(locks);  // past handshakes
    BOOST_TEST_REQUIRE(!ping_ec, ping_ec.message());
    reset_stats(fleet);
    redlock::semaphore pool(locks, "pool", 16, lock_for(10s));
    redlock::test::inspector servers(fleet);
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto [ec, permit] = co_await pool.async_try_acquire(tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << permit.diagnostics());
      BOOST_TEST(permit.resource() == semaphore_slot_key("pool", 11));
      co_await permit.async_release(tuple_awaitable);
      // The release completes at a quorum; the count of rounds below assumes that each try
      // starts with slot 11 free on every node, so the next one waits for the last release.
      BOOST_TEST_REQUIRE(co_await eventually(
          [&] { return servers.present(semaphore_slot_key("pool", 11)) == 0u; }, 3s));
    }
  });
  // Five tries and five releases: each try at most two rounds.
  for (std::size_t i = 0; i < fleet.size(); ++i)
    BOOST_TEST(evalsha_calls(fleet[i]) <= 5 * 2 + 5, "node " << i);
}

// A refused round of a semaphore frees what it was granted on the slot it tried; once every slot
// is held on a quorum the try says `contended`, naming the semaphore. The 3-node, 2-permit
// layout is the one where a majority counter would admit a third holder.
BOOST_AUTO_TEST_CASE(a_try_releases_its_grants_and_reports_contended_when_all_slots_are_held) {
  redis_fleet fleet(3);
  hold_slot_elsewhere(fleet[0], "split", 0);
  hold_slot_elsewhere(fleet[1], "split", 0);
  hold_slot_elsewhere(fleet[1], "split", 1);
  hold_slot_elsewhere(fleet[2], "split", 1);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::semaphore split(locks, "split", 2, lock_for(10s));
    for (int attempt = 0; attempt < 4; ++attempt) {
      auto [ec, permit] = co_await split.async_try_acquire(tuple_awaitable);
      BOOST_TEST(ec == error::contended, ec.message());
      BOOST_TEST(!permit.held());
      BOOST_TEST(permit.diagnostics().find("semaphore \"split\"") != std::string::npos,
                 permit.diagnostics());
    }
    // The grants (slot 0 on node 2, slot 1 on node 0) were released.
    BOOST_TEST(co_await eventually(
        [&] {
          return !exists_on(fleet[2], semaphore_slot_key("split", 0)) &&
                 !exists_on(fleet[0], semaphore_slot_key("split", 1));
        },
        2s));
  });
}

// Acquires of one client queue; the first waiter is woken by a local release at once and gets
// the slot that was freed, the others follow as permits come back.
BOOST_AUTO_TEST_CASE(local_waiters_get_released_permits_in_order) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto options = lock_for(10s);
    options.wait = 20s;
    redlock::semaphore two(locks, "two", 2, options);
    auto [ec1, a] = co_await two.async_acquire(tuple_awaitable);
    auto [ec2, b] = co_await two.async_acquire(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec1, ec1.message());
    BOOST_TEST_REQUIRE(!ec2, ec2.message());
    BOOST_TEST(a.resource() != b.resource());

    std::vector<int> order;
    std::vector<std::string> slots(2);
    std::vector<redlock::lease> waiting(2);
    int done = 0;
    for (int i = 0; i < 2; ++i) {
      asio::co_spawn(
          io,
          [&, i]() -> asio::awaitable<void> {
            auto [ec, permit] = co_await two.async_acquire(tuple_awaitable);
            BOOST_TEST(!ec, ec.message() << ": " << permit.diagnostics());
            order.push_back(i);
            slots[static_cast<std::size_t>(i)] = permit.resource();
            waiting[static_cast<std::size_t>(i)] = std::move(permit);
            ++done;
          },
          asio::detached);
      co_await sleep_for(20ms);  // queued in this order
    }
    co_await sleep_for(100ms);
    BOOST_TEST(done == 0);
    const auto released_at = clock::now();
    const std::string freed = b.resource();
    co_await b.async_release(tuple_awaitable);
    BOOST_TEST(co_await eventually([&] { return done == 1; }, 5s));
    // Woken by the release itself, not by a backoff or the TTL (10 s).
    BOOST_TEST((clock::now() - released_at) < 3s);
    BOOST_TEST(order.front() == 0);
    BOOST_TEST(slots[0] == freed);
    co_await a.async_release(tuple_awaitable);
    BOOST_TEST(co_await eventually([&] { return done == 2; }, 5s));
    BOOST_TEST(slots[1] != slots[0]);
    for (auto& permit : waiting)
      co_await permit.async_release(tuple_awaitable);
  });
}

// A waiter in another client is woken by the release's announcement, well before the holders'
// TTL would have freed a slot.
BOOST_AUTO_TEST_CASE(a_waiter_elsewhere_is_woken_by_the_release) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter(io.get_executor(), fleet.configs(), fast_client_options());
    auto options = lock_for(20s);
    options.wait = 15s;
    redlock::semaphore held(holder, "remote", 2, options);
    redlock::semaphore wanted(waiter, "remote", 2, options);
    auto [ec1, a] = co_await held.async_acquire(tuple_awaitable);
    auto [ec2, b] = co_await held.async_acquire(tuple_awaitable);
    BOOST_TEST_REQUIRE((!ec1 && !ec2));

    std::optional<clock::time_point> got_at;
    std::string got;
    redlock::lease permit;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto [ec, p] = co_await wanted.async_acquire(tuple_awaitable);
          BOOST_TEST(!ec, ec.message() << ": " << p.diagnostics());
          got_at = clock::now();
          got = p.resource();
          permit = std::move(p);
        },
        asio::detached);
    co_await sleep_for(500ms);  // refused, subscribed, sleeping on the holders' 20 s TTL
    BOOST_TEST(!got_at.has_value());
    const std::string freed = a.resource();
    const auto released_at = clock::now();
    co_await a.async_release(tuple_awaitable);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return got_at.has_value(); }, 10s));
    BOOST_TEST((*got_at - released_at) < 5s);
    BOOST_TEST(got == freed);
    co_await permit.async_release(tuple_awaitable);
    co_await b.async_release(tuple_awaitable);
  });
}

// With fencing, each slot has its own counter beside its key, and a slot's next lease gets a
// greater token.
BOOST_AUTO_TEST_CASE(a_fenced_permit_has_its_slots_token) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto options = lock_for(10s);
    options.fencing = true;
    redlock::semaphore one(locks, "fenced", 1, options);
    std::optional<std::uint64_t> last;
    for (int i = 0; i < 3; ++i) {
      auto [ec, permit] = co_await one.async_acquire(tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << permit.diagnostics());
      BOOST_TEST_REQUIRE(permit.fencing_token().has_value());
      if (last) BOOST_TEST(*permit.fencing_token() == *last + 1);
      last = permit.fencing_token();
      co_await permit.async_release(tuple_awaitable);
    }
  });
  // Every lease reached its token on a quorum; a node that missed a grant (a slow connect) is
  // behind, never ahead.
  const auto counter = redlock::detail::fencing_counter_key(semaphore_slot_key("fenced", 0));
  std::size_t at_last_token = 0;
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    sync_client c(fleet[i].port());
    const auto value = c.command({"GET", counter});
    const std::uint64_t on_node = value.is_null() ? 0 : std::stoull(value.text);
    BOOST_TEST(on_node <= 3u, "node " << i);
    if (on_node == 3) ++at_last_token;
  }
  BOOST_TEST(at_last_token >= 2u);
}

// with_permit runs the body holding a permit and releases it; a name that cannot be used is
// invalid_argument, thrown with a message naming the problem.
BOOST_AUTO_TEST_CASE(with_permit_holds_a_permit_around_the_body) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::semaphore workers(locks, "workers", 3, lock_for(10s));
    std::string inside;
    const int result =
        co_await redlock::with_permit(workers, [&](redlock::lease& permit) -> asio::awaitable<int> {
          BOOST_TEST(permit.held());
          inside = permit.resource();
          co_return 42;
        });
    BOOST_TEST(result == 42);
    BOOST_TEST(!inside.empty());
    for (std::size_t i = 0; i < fleet.size(); ++i)
      BOOST_TEST(!exists_on(fleet[i], inside), "node " << i);

    redlock::semaphore nameless(locks, "", 3, lock_for(10s));
    try {
      co_await nameless.async_acquire(asio::use_awaitable);
      BOOST_FAIL("an empty name was accepted");
    } catch (const boost::system::system_error& e) {
      BOOST_TEST(e.code() == error::invalid_argument);
      BOOST_TEST(std::string(e.what()).find("name is empty") != std::string::npos, e.what());
    }
  });
}

// A waiting acquire that is cancelled ends with operation_aborted and leaves nothing behind;
// the next waiter in the queue goes on.
BOOST_AUTO_TEST_CASE(a_cancelled_waiter_leaves_no_key_and_the_next_one_goes_on) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto options = lock_for(10s);
    options.wait = 20s;
    redlock::semaphore one(locks, "cancelled", 1, options);
    auto [ec, held] = co_await one.async_acquire(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message());

    asio::cancellation_signal cancel;
    std::optional<boost::system::error_code> first_ec;
    std::optional<boost::system::error_code> second_ec;
    redlock::lease second;
    one.async_acquire(asio::bind_cancellation_slot(
        cancel.slot(), [&](boost::system::error_code e, redlock::lease) { first_ec = e; }));
    one.async_acquire([&](boost::system::error_code e, redlock::lease l) {
      second_ec = e;
      second = std::move(l);
    });
    co_await sleep_for(100ms);
    cancel.emit(asio::cancellation_type::terminal);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return first_ec.has_value(); }, 2s));
    BOOST_TEST(*first_ec == asio::error::operation_aborted);
    co_await held.async_release(tuple_awaitable);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return second_ec.has_value(); }, 5s));
    BOOST_TEST(!*second_ec, second_ec->message());
    co_await second.async_release(tuple_awaitable);
  });
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    sync_client c(fleet[i].port());
    BOOST_TEST(c.command({"EXISTS", semaphore_slot_key("cancelled", 0)}).integer == 0);
  }
}

// A semaphore of the most permits, every one held elsewhere: each refusal names all 1024 slots.
// It must read as `contended` on one link: no protocol error, no reconnect, and no failed request
// of anything else on the same connections (a renewing lease of another resource).
BOOST_AUTO_TEST_CASE(a_full_semaphore_of_the_most_permits_is_contended_without_a_reconnect) {
  constexpr std::size_t permits = redlock::semaphore::max_permits;
  redis_fleet fleet(3);
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    sync_client c(fleet[i].port());
    for (std::size_t slot = 0; slot < permits; ++slot)
      c.command({"SET", semaphore_slot_key("full", slot), "someone-else", "PX", "60000"});
  }
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    std::vector<std::string> complaints;
    auto options = fast_client_options();
    options.logger = [&](redlock::log_level level, std::string_view message) {
      if (level >= redlock::log_level::warning) complaints.emplace_back(message);
    };
    redlock::client locks(io.get_executor(), fleet.configs(), options);
    // Renewed every 150 ms on the same connections while the tries run.
    auto [held_ec, other] = co_await locks.async_acquire("other", lock_for(300ms), tuple_awaitable);
    BOOST_TEST_REQUIRE(!held_ec, other.diagnostics());
    std::vector<std::vector<long long>> lock_links_before;
    for (std::size_t i = 0; i < fleet.size(); ++i) {
      // The acquire ends with a quorum: on a busy machine the last node's link may still be
      // connecting, its name not yet set.
      BOOST_TEST_REQUIRE(
          co_await eventually([&] { return lock_connection_ids(fleet[i]).size() == 1u; }, 5s),
          "node " << i << ": lock connections " << lock_connection_ids(fleet[i]).size());
      lock_links_before.push_back(lock_connection_ids(fleet[i]));
    }

    auto waiting = lock_for(10s);
    waiting.wait = 400ms;
    redlock::semaphore full(locks, "full", permits, waiting);
    const auto until = clock::now() + 1500ms;
    int tries = 0;
    while (clock::now() < until) {
      auto [ec, none] = co_await full.async_try_acquire(tuple_awaitable);
      BOOST_TEST_REQUIRE((ec == error::contended), ec.message() << ": " << none.diagnostics());
      ++tries;
    }
    auto [wait_ec, none] = co_await full.async_acquire(tuple_awaitable);
    BOOST_TEST((wait_ec == error::wait_timeout), wait_ec.message() << ": " << none.diagnostics());
    BOOST_TEST(tries > 1);

    BOOST_TEST(other.held(), other.diagnostics());
    BOOST_TEST(complaints.empty(), "logged: " << (complaints.empty() ? "" : complaints.front()));
    for (std::size_t i = 0; i < fleet.size(); ++i) {
      // The lock connection of before, and no other: never reconnected. (The waiting acquire's
      // subscriber is a connection of its own, which may connect again on a busy machine.)
      const auto after = lock_connection_ids(fleet[i]);
      BOOST_TEST((after == lock_links_before[i]), "node " << i << ": lock connections "
                                                          << after.size() << ", first id "
                                                          << (after.empty() ? 0 : after[0]));
    }
    co_await other.async_release(tuple_awaitable);
  });
}

// Hosts that give one semaphore different sizes would break its bound without a word: the first
// permit records the size on the nodes, and an acquire that counts another size is refused with
// invalid_argument naming both, for as long as a permit of the recorded size is held (the record
// is extended with the permits), and no longer.
BOOST_AUTO_TEST_CASE(an_acquire_with_another_number_of_permits_is_refused_while_permits_are_held) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client first(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client second(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::semaphore three(first, "sized", 3, lock_for(400ms));
    auto five_options = lock_for(400ms);
    five_options.wait = 2s;
    redlock::semaphore five(second, "sized", 5, five_options);

    auto [ec, held] = co_await three.async_acquire(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, held.diagnostics());
    // Several TTLs later, renewed: the record lives on with the permit.
    co_await sleep_for(1200ms);
    for (const bool waits : {false, true}) {
      // Not `waits ? co_await ... : co_await ...`: g++ 12 miscompiles a co_await in a
      // conditional expression (the result's lease was dropped twice, found by ASan).
      boost::system::error_code refused;
      redlock::lease none;
      if (waits) {
        std::tie(refused, none) = co_await five.async_acquire(tuple_awaitable);
      } else {
        std::tie(refused, none) = co_await five.async_try_acquire(tuple_awaitable);
      }
      BOOST_TEST((refused == error::invalid_argument), refused.message());
      BOOST_TEST(none.diagnostics().find("3 permits") != std::string::npos, none.diagnostics());
      BOOST_TEST(none.diagnostics().find("counts 5") != std::string::npos, none.diagnostics());
      // The refusal names the node that holds the other size (semaphores.md, "Every user must
      // give the same size"): every node of the fleet records 3 here.
      std::size_t nodes_named = 0;
      for (std::size_t i = 0; i < fleet.size(); ++i) {
        const std::string address = "127.0.0.1:" + std::to_string(fleet[i].port());
        if (none.diagnostics().find(address) != std::string::npos) ++nodes_named;
      }
      BOOST_TEST(nodes_named >= 1u, none.diagnostics());
    }
    for (std::size_t slot = 0; slot < 5; ++slot) {
      for (std::size_t i = 0; i < fleet.size(); ++i) {
        if (exists_on(fleet[i], semaphore_slot_key("sized", slot))) {
          sync_client c(fleet[i].port());
          BOOST_TEST(c.command({"GET", semaphore_slot_key("sized", slot)}).text == held.token(),
                     "only the first semaphore's permit is set");
        }
      }
    }
    co_await held.async_release(tuple_awaitable);
    // The record outlives the last permit by at most a TTL; then the other size may be used.
    co_await sleep_for(500ms);
    auto [later, permit] = co_await five.async_acquire(tuple_awaitable);
    BOOST_TEST(!later, later.message() << ": " << permit.diagnostics());
    if (!later) co_await permit.async_release(tuple_awaitable);
  });
}

BOOST_AUTO_TEST_SUITE_END()
