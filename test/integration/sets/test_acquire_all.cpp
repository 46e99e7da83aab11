// Several resources in one lease (client::async_acquire_all) on real servers: the whole set or
// nothing on every node, a set and a single lock of one of its resources exclude each other, a
// refused set leaves no key behind, sets taken in opposite orders never deadlock nor overlap,
// local waiters keep their order per resource, fencing counts per resource, loss cancels a
// with_lock body, and bad sets are refused with the reason.
#include "integration/prelude.hpp"
#include "lock/scripts.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/history.hpp"
#include "support/inspector.hpp"
#include "support/lock_checks.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/strand_clients.hpp"
#include "support/sync_client.hpp"
#include "support/text_contains.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace rt = redlock::test;
using redlock::lease;
using redlock::test::tuple_awaitable;
using strings = std::vector<std::string>;

using redlock::test::contains;

// Every key of `set` holds `token` on every node of `fleet`.
bool held_everywhere(rt::inspector& nodes, const strings& set, const std::string& token) {
  for (const auto& key : set) {
    if (nodes.holding(key, token) != 3u) return false;
  }
  return true;
}

std::size_t keys_present(rt::inspector& nodes, const strings& set) {
  std::size_t present = 0;
  for (const auto& key : set)
    present += nodes.present(key);
  return present;
}

// Records a set's lease in `log` as one hold per resource, for check_mutual_exclusion.
class set_recorder {
 public:
  set_recorder(rt::history& log, std::string process) : log_(log), process_(std::move(process)) {}

  asio::awaitable<lease> acquire(redlock::client& locks, strings set,
                                 const redlock::lock_options& options) {
    const auto invoke = rt::mono_now();
    auto [ec, held] = co_await locks.async_acquire_all(std::move(set), options, tuple_awaitable);
    last_error = ec;
    if (ec) co_return std::move(held);
    for (const auto& resource : held.resources()) {
      log_.record({process_, resource, held.token(), rt::op_kind::acquire, rt::op_result::ok,
                   invoke, rt::mono_now(), rt::to_mono_ns(held.valid_until()),
                   std::chrono::nanoseconds(options.ttl).count()});
    }
    co_return std::move(held);
  }

  asio::awaitable<void> release(lease& held) {
    const auto invoke = rt::mono_now();
    const strings set(held.resources().begin(), held.resources().end());
    auto [ec] = co_await held.async_release(tuple_awaitable);
    for (const auto& resource : set) {
      log_.record({process_, resource, held.token(), rt::op_kind::release,
                   ec ? rt::op_result::failed : rt::op_result::ok, invoke, rt::mono_now(), 0, 0});
    }
  }

  error_code last_error;

 private:
  rt::history& log_;
  std::string process_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(acquire_all)

BOOST_AUTO_TEST_CASE(a_set_holds_every_key_on_every_node_and_its_release_frees_them) {
  redis_fleet fleet(3);
  rt::inspector nodes(fleet);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    const strings asked = {"acct:2", "acct:1", "acct:2"};
    auto [ec, held] = co_await locks.async_acquire_all(asked, lock_for(10s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << held.diagnostics());
    BOOST_TEST(held.held());
    const strings set(held.resources().begin(), held.resources().end());
    BOOST_TEST((set == strings{"acct:1", "acct:2"}));
    BOOST_TEST(held.resource() == "acct:1");
    BOOST_TEST(co_await eventually([&] { return held_everywhere(nodes, set, held.token()); }));

    auto [extended] = co_await held.async_extend(30s, tuple_awaitable);
    BOOST_TEST(!extended, extended.message());
    BOOST_TEST(nodes.pttl(0, "acct:1") > 20000);
    BOOST_TEST(nodes.pttl(0, "acct:2") > 20000);

    auto [released] = co_await held.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message());
    BOOST_TEST(co_await eventually([&] { return keys_present(nodes, set) == 0; }));
  });
}

BOOST_AUTO_TEST_CASE(one_resource_held_elsewhere_refuses_the_set_and_leaves_no_key) {
  redis_fleet fleet(3);
  rt::inspector nodes(fleet);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client rival(io.get_executor(), fleet.configs(), fast_client_options());
    auto [held_ec, b] = co_await rival.async_acquire("b", lock_for(10s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!held_ec, held_ec.message());
    // The acquire completes at a quorum; on a loaded machine the third node's reply may come past
    // node_timeout and leave `b` on two nodes only. What matters is that the refused set leaves
    // `b` where it was.
    co_await settled_everywhere(nodes, "b", b.token());
    const std::size_t b_holders = nodes.holding("b", b.token());
    BOOST_TEST_REQUIRE(b_holders >= 2u);
    const strings abc = {"a", "b", "c"};
    auto [ec, none] = co_await locks.async_try_acquire_all(abc, lock_for(10s), tuple_awaitable);
    BOOST_TEST(ec == error::contended, ec.message() << ": " << none.diagnostics());
    BOOST_TEST(!none.held());
    BOOST_TEST(contains(none.diagnostics(), "\"a\", \"b\", \"c\""), none.diagnostics());
    BOOST_TEST(co_await eventually([&] { return keys_present(nodes, {"a", "c"}) == 0; }));
    BOOST_TEST(nodes.holding("b", b.token()) == b_holders);

    // And a set held keeps single locks of its resources out.
    const strings cd = {"c", "d"};
    auto [set_ec, set] = co_await locks.async_try_acquire_all(cd, lock_for(10s), tuple_awaitable);
    BOOST_TEST_REQUIRE(!set_ec, set_ec.message() << ": " << set.diagnostics());
    auto [single_ec, single] =
        co_await rival.async_try_acquire("d", lock_for(10s), tuple_awaitable);
    BOOST_TEST(single_ec == error::contended, single_ec.message());
    co_await set.async_release(tuple_awaitable);
    std::tie(single_ec, single) =
        co_await rival.async_try_acquire("d", lock_for(10s), tuple_awaitable);
    BOOST_TEST(!single_ec, single_ec.message() << ": " << single.diagnostics());
  });
}

BOOST_AUTO_TEST_CASE(a_waiting_set_gets_in_when_the_last_holder_leaves) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client rival(io.get_executor(), fleet.configs(), fast_client_options());
    auto [a_ec, a] = co_await rival.async_acquire("a", lock_for(10s), tuple_awaitable);
    auto [b_ec, b] = co_await rival.async_acquire("b", lock_for(10s), tuple_awaitable);
    BOOST_TEST_REQUIRE((!a_ec && !b_ec));
    auto options = lock_for(10s);
    options.wait = 8s;
    std::optional<error_code> got;
    lease set;
    const strings ab = {"a", "b"};
    locks.async_acquire_all(ab, options, [&](error_code ec, lease l) {
      set = std::move(l);
      got = ec;
    });
    co_await sleep_for(200ms);
    co_await a.async_release(tuple_awaitable);
    co_await sleep_for(200ms);
    BOOST_TEST(!got.has_value(), "the set was granted while b was held");
    const auto left = steady_clock::now();
    co_await b.async_release(tuple_awaitable);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return got.has_value(); }, 5s));
    BOOST_TEST(!*got, got->message() << ": " << set.diagnostics());
    // Woken by the release's announcement, not by the keys' 10 s TTL.
    BOOST_TEST((steady_clock::now() - left < 3s));
  });
}

// Two clients take {x, y} and {y, x} in a loop, and single locks of x and of y besides, for
// 3 s: every acquire succeeds within its wait (no deadlock), and no two holds of one resource
// overlap (the history checker, one hold per resource of a set).
BOOST_AUTO_TEST_CASE(sets_in_opposite_orders_never_deadlock_nor_overlap) {
  redis_fleet fleet(3);
  rt::history log;
  std::size_t acquired = 0;
  std::vector<std::string> failures;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    std::vector<std::unique_ptr<redlock::client>> clients;
    for (int c = 0; c < 2; ++c) {
      clients.push_back(std::make_unique<redlock::client>(io.get_executor(), fleet.configs(),
                                                          fast_client_options()));
    }
    const auto until = steady_clock::now() + 3s;
    const std::vector<strings> shapes = {{"x", "y"}, {"y", "x"}, {"x"}, {"y"}};
    co_await rt::run_all(8, [&](std::size_t k) -> asio::awaitable<void> {
      redlock::client& locks = *clients[k % 2];
      set_recorder me(log, "c" + std::to_string(k % 2) + "/k" + std::to_string(k));
      auto options = lock_for(5s);
      options.wait = 10s;
      while (steady_clock::now() < until) {
        lease held = co_await me.acquire(locks, shapes[k % shapes.size()], options);
        if (me.last_error) {
          failures.push_back(me.last_error.message() + ": " + held.diagnostics());
          continue;
        }
        ++acquired;
        co_await sleep_for(1ms);
        co_await me.release(held);
      }
    });
  });
  const auto verdict = rt::check_mutual_exclusion(log.events());
  BOOST_TEST_MESSAGE("sets in opposite orders: " << acquired << " acquisitions; "
                                                 << verdict.describe());
  BOOST_TEST(verdict.ok(), verdict.describe());
  BOOST_TEST(failures.empty(), failures.size() << " acquires failed; the first: "
                                               << (failures.empty() ? "" : failures.front()));
  BOOST_TEST(acquired >= 40u);
}

// The deadlock a waiting set caused: task T1 holds "a" and then takes "b"; task T2 asks for the set
// {a, b} in between. The set cannot start while "a" is held here, so T1's acquire of the free "b"
// goes ahead of it (and so does a try of "b"); the set gets both once T1 has released them. The set
// used to hold its place first in line for "b": with `wait` unset, as the set's here, T1 and T2
// waited for each other for ever, and T1's diagnostics said "b" was held by another lease.
BOOST_AUTO_TEST_CASE(a_waiting_set_does_not_keep_a_holder_from_its_other_resource) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    const auto options = lock_for(10s);  // no wait: until the lock is held
    auto [a_ec, a] = co_await locks.async_acquire("a", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!a_ec);
    std::optional<error_code> set_ec;
    lease set;
    const strings ab = {"a", "b"};
    locks.async_acquire_all(ab, options, [&](error_code ec, lease l) {
      set_ec = ec;
      set = std::move(l);
    });
    co_await sleep_for(100ms);

    auto b_options = options;
    b_options.wait = 5s;
    auto [b_ec, b] = co_await locks.async_acquire("b", b_options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!b_ec, b_ec.message() << ": " << b.diagnostics());
    BOOST_TEST(!set_ec.has_value(), "the set was granted while a and b were held");
    auto [try_ec, none] = co_await locks.async_try_acquire("c", b_options, tuple_awaitable);
    BOOST_TEST(!try_ec, try_ec.message() << ": " << none.diagnostics());
    co_await none.async_release(tuple_awaitable);

    co_await b.async_release(tuple_awaitable);
    co_await a.async_release(tuple_awaitable);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return set_ec.has_value(); }, 5s));
    BOOST_TEST(!*set_ec, set_ec->message() << ": " << set.diagnostics());
    co_await set.async_release(tuple_awaitable);
  });
}

// A set that can start goes first and keeps its place while it waits for another process: a later
// acquire of one of its resources waits behind it, and a try of one is contended here.
BOOST_AUTO_TEST_CASE(a_set_waiting_for_another_process_keeps_its_place) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client elsewhere(io.get_executor(), fleet.configs(), fast_client_options());
    auto options = lock_for(10s);
    options.wait = 8s;
    auto [a_ec, a] = co_await elsewhere.async_acquire("a", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!a_ec);
    std::vector<std::string> order;
    lease set;
    lease single;
    const strings ab = {"a", "b"};
    locks.async_acquire_all(ab, options, [&](error_code ec, lease l) {
      BOOST_TEST(!ec, ec.message() << ": " << l.diagnostics());
      order.push_back("set");
      set = std::move(l);
    });
    co_await sleep_for(100ms);
    locks.async_acquire("b", options, [&](error_code ec, lease l) {
      BOOST_TEST(!ec, ec.message() << ": " << l.diagnostics());
      order.push_back("b");
      single = std::move(l);
    });
    co_await sleep_for(200ms);
    BOOST_TEST(order.empty(), "an acquire passed the set, or the set passed the holder of a");
    auto [try_ec, none] = co_await locks.async_try_acquire("b", options, tuple_awaitable);
    BOOST_TEST(try_ec == error::contended, try_ec.message());
    BOOST_TEST(none.diagnostics().find("awaited by another lease") != std::string::npos,
               none.diagnostics());

    co_await a.async_release(tuple_awaitable);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return order.size() == 1; }, 5s));
    BOOST_TEST(order.front() == "set");
    co_await sleep_for(100ms);
    BOOST_TEST(order.size() == 1u, "b was taken beside the set");
    co_await set.async_release(tuple_awaitable);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return order.size() == 2; }, 5s));
    BOOST_TEST(order.back() == "b");
    co_await single.async_release(tuple_awaitable);
  });
}

// A release handed to a waiting set of this client is announced: the set may lose its round (here
// "y" is held by a third client), and another process waiting for the released resource must not
// sleep until the key's TTL although it is free. It gets "x" within a few seconds; the key's TTL
// is 30 s, which an unannounced hand-off would have made it wait for (past its `wait`).
BOOST_AUTO_TEST_CASE(a_release_handed_to_a_waiting_set_is_announced) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client other(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client third(io.get_executor(), fleet.configs(), fast_client_options());
    auto options = lock_for(30s);
    options.wait = 10s;
    auto [y_ec, y] = co_await third.async_acquire("y", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!y_ec);
    auto [x_ec, x] = co_await locks.async_acquire("x", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!x_ec);
    const strings xy = {"x", "y"};
    locks.async_acquire_all(xy, options, [](error_code, lease) {});
    std::optional<error_code> other_ec;
    lease other_x;
    auto other_options = options;
    other_options.wait = 8s;
    other.async_acquire("x", other_options, [&](error_code ec, lease l) {
      other_ec = ec;
      other_x = std::move(l);
    });
    co_await sleep_for(300ms);  // both wait: the set here, the other client on the nodes
    BOOST_TEST(!other_ec.has_value());

    const auto released = steady_clock::now();
    co_await x.async_release(tuple_awaitable);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return other_ec.has_value(); }, 9s));
    BOOST_TEST(!*other_ec, other_ec->message() << ": " << other_x.diagnostics());
    BOOST_TEST(ms_since(released) < 5000, "the free resource took " << ms_since(released) << " ms");
    co_await other_x.async_release(tuple_awaitable);
    co_await y.async_release(tuple_awaitable);
    co_await locks.async_shutdown(tuple_awaitable);
  });
}

BOOST_AUTO_TEST_CASE(fencing_tokens_increase_per_resource_across_sets_and_single_locks) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto fenced = lock_for(10s);
    fenced.fencing = true;
    // "b" alone three times: its counter is ahead of "a"'s.
    std::uint64_t last_b = 0;
    for (int i = 0; i < 3; ++i) {
      auto [ec, b] = co_await locks.async_acquire("b", fenced, tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec, ec.message());
      last_b = b.fencing_token().value_or(0);
      co_await b.async_release(tuple_awaitable);
    }
    const strings ab = {"a", "b"};
    auto [ec, set] = co_await locks.async_acquire_all(ab, fenced, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << set.diagnostics());
    BOOST_TEST(!set.fencing_token().has_value(), "a set of two has a token per resource");
    BOOST_TEST_REQUIRE(set.fencing_token("a").has_value());
    BOOST_TEST_REQUIRE(set.fencing_token("b").has_value());
    BOOST_TEST(*set.fencing_token("a") >= 1u);
    BOOST_TEST(*set.fencing_token("b") > last_b);
    BOOST_TEST(!set.fencing_token("c").has_value());
    const auto set_a = *set.fencing_token("a");
    const auto set_b = *set.fencing_token("b");
    co_await set.async_release(tuple_awaitable);

    auto [a_ec, a] = co_await locks.async_acquire("a", fenced, tuple_awaitable);
    BOOST_TEST_REQUIRE(!a_ec);
    BOOST_TEST(a.fencing_token().value_or(0) > set_a);
    BOOST_TEST((a.fencing_token("a") == a.fencing_token()));
    co_await a.async_release(tuple_awaitable);
    const strings just_b = {"b"};
    auto [again_ec, again] = co_await locks.async_acquire_all(just_b, fenced, tuple_awaitable);
    BOOST_TEST_REQUIRE(!again_ec);
    BOOST_TEST(again.fencing_token().value_or(0) > set_b, "a set of one has the one token");
    BOOST_TEST((again.fencing_token("b") == again.fencing_token()));
    co_await again.async_release(tuple_awaitable);
  });
}

BOOST_AUTO_TEST_CASE(with_lock_holds_a_set_for_its_body_and_a_loss_cancels_it) {
  redis_fleet fleet(3);
  rt::inspector nodes(fleet);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    const strings pq = {"p", "q"};
    const int result = co_await redlock::with_lock(
        locks, pq, lock_for(10s), [&](lease& held) -> asio::awaitable<int> {
          BOOST_TEST(held.resources().size() == 2u);
          // The acquire completed on a quorum's grants; the third lands a moment later.
          BOOST_TEST(co_await eventually([&] { return held_everywhere(nodes, pq, held.token()); }));
          co_return 7;
        });
    BOOST_TEST(result == 7);
    BOOST_TEST(co_await eventually([&] { return keys_present(nodes, {"p", "q"}) == 0; }));

    // One key of the set taken over on two nodes: the next extension finds the set not ours, the
    // lease is lost and the body cancelled.
    error_code thrown;
    try {
      co_await redlock::with_lock(locks, pq, lock_for(600ms), [&](lease&) -> asio::awaitable<void> {
        for (std::size_t node = 0; node < 2; ++node)
          nodes.set(node, "q", "someone-else", 10s);
        co_await sleep_for(10s);
      });
    } catch (const boost::system::system_error& e) {
      thrown = e.code();
    }
    BOOST_TEST(thrown == error::lock_lost, thrown.message());
    // The set's own key of "p" is gone too: its loss released it.
    BOOST_TEST(co_await eventually([&] { return nodes.present("p") == 0; }));
  });
}

BOOST_AUTO_TEST_CASE(bad_sets_are_invalid_arguments_that_say_why) {
  redis_fleet fleet(3);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    const strings no_resources = {};
    auto [empty_ec, empty] =
        co_await locks.async_acquire_all(no_resources, lock_for(5s), tuple_awaitable);
    BOOST_TEST(empty_ec == error::invalid_argument, empty_ec.message());
    BOOST_TEST(contains(empty.diagnostics(), "the set of resources is empty"), empty.diagnostics());
    const strings with_blank = {"a", ""};
    auto [blank_ec, blank] =
        co_await locks.async_try_acquire_all(with_blank, lock_for(5s), tuple_awaitable);
    BOOST_TEST(blank_ec == error::invalid_argument, blank_ec.message());
    BOOST_TEST(contains(blank.diagnostics(), "a resource of the set is empty"),
               blank.diagnostics());
    strings many;
    for (int i = 0; i < 65; ++i)
      many.push_back("r" + std::to_string(i));
    auto [many_ec, too_many] =
        co_await locks.async_acquire_all(many, lock_for(5s), tuple_awaitable);
    BOOST_TEST(many_ec == error::invalid_argument, many_ec.message());
    BOOST_TEST(contains(too_many.diagnostics(), "65 resources, more than the 64"),
               too_many.diagnostics());
    many.pop_back();
    auto [most_ec, most] = co_await locks.async_acquire_all(many, lock_for(5s), tuple_awaitable);
    BOOST_TEST(!most_ec, most_ec.message() << ": " << most.diagnostics());
    co_await most.async_release(tuple_awaitable);
  });
}

// The documented multi-threaded setup: two clients, each on its own strand of one io_context that
// four threads run. Sixteen coroutines take sets of two of {a, b, c}, or the single lock c, three
// times each; the holders of each resource are counted under a std::mutex, since the strands run
// at once: never two. Then sets are dropped on this thread, which runs neither strand: each is
// released. scripts/test.sh runs this under ThreadSanitizer.
BOOST_AUTO_TEST_CASE(sets_and_single_locks_on_two_strands_of_four_threads,
                     *boost::unit_test::label("threaded")) {
  redis_fleet fleet(3);
  rt::inspector nodes(fleet);
  rt::strand_clients setup(fleet.configs(), fast_client_options());
  const std::vector<strings> shapes = {{"a", "b"}, {"c", "b"}, {"a", "c"}, {"c"}};
  std::mutex counting;
  std::map<std::string, int> holders;
  int violations = 0;
  int acquired = 0;
  std::vector<std::string> errors;
  constexpr int coroutines = 16;
  setup.spawn(coroutines, [&](int c) -> asio::awaitable<void> {
    redlock::client& locks = setup.at(static_cast<std::size_t>(c % 2));
    for (int i = 0; i < 3; ++i) {
      const strings& set = shapes[static_cast<std::size_t>(c + i) % shapes.size()];
      auto options = lock_for(5s);
      options.wait = 20s;
      error_code ec;
      lease held;
      if (set.size() == 1) {
        std::tie(ec, held) = co_await locks.async_acquire(set.front(), options, tuple_awaitable);
      } else {
        std::tie(ec, held) = co_await locks.async_acquire_all(set, options, tuple_awaitable);
      }
      if (ec) {
        const std::lock_guard<std::mutex> guard(counting);
        errors.push_back(ec.message() + ": " + held.diagnostics());
        continue;
      }
      {
        const std::lock_guard<std::mutex> guard(counting);
        ++acquired;
        for (const auto& resource : set) {
          if (++holders[resource] > 1) ++violations;
        }
      }
      co_await sleep_for(2ms);
      {
        const std::lock_guard<std::mutex> guard(counting);
        for (const auto& resource : set)
          --holders[resource];
      }
      co_await held.async_release(tuple_awaitable);
    }
  });
  setup.run();
  const bool all_finished = setup.all_finished(60s);

  // Sets taken on the strands and dropped here.
  std::vector<lease> dropped;
  const std::vector<strings> dropped_sets = {{"a", "b"}, {"c", "d"}};
  for (std::size_t k = 0; k < setup.size(); ++k) {
    dropped.push_back(setup
                          .on_strand(k,
                                     [&, k] {
                                       return setup.at(k).async_acquire_all(
                                           dropped_sets[k], lock_for(5s), asio::use_future);
                                     })
                          .get());
  }
  const strings all = {"a", "b", "c", "d"};
  const bool were_held =
      rt::eventually_blocking([&] { return keys_present(nodes, all) == 3 * all.size(); }, 5s);
  dropped.clear();
  const bool released = rt::eventually_blocking([&] { return keys_present(nodes, all) == 0; }, 5s);
  setup.stop();

  BOOST_TEST(all_finished, setup.finished() << " of " << coroutines << " coroutines finished");
  BOOST_TEST(violations == 0, violations << " resources held by two at once");
  BOOST_TEST(errors.empty(), errors.size() << " acquires failed, the first: "
                                           << (errors.empty() ? "" : errors.front()));
  BOOST_TEST(acquired == coroutines * 3);
  BOOST_TEST(were_held, "the dropped sets were not held on every node");
  BOOST_TEST(released, "a set dropped off its strand was not released");
}

BOOST_AUTO_TEST_SUITE_END()
