// redlock::semaphore on real servers: at most `permits` holders, judged by the generalised checker
// (support/history.hpp: check_at_most) over what the clients saw. The split that breaks a
// majority-quorum counter ({A,B}, {B,C}, {A,C} on three nodes with two permits) is forced with
// per-client proxies, on the library and on that unsafe counter, which the same checker must
// catch: a checker that cannot fail proves nothing. Then the permits themselves: distinct slots,
// contended when all are held, a dead holder's slot free after its TTL, renewal and release that
// never touch a rival's key, and the arguments refused.

#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/client_options.hpp"
#include "support/five_nodes.hpp"
#include "support/history.hpp"
#include "support/holder_process.hpp"
#include "support/inspector.hpp"
#include "support/printing.hpp"
#include "support/reach.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace rt = redlock::test;
using redlock::test::mono_now;
using redlock::test::to_mono_ns;

redlock::lock_options permit_for(milliseconds ttl, rt::renewal renew = rt::renewal::on) {
  return lock_for(ttl, renew);
}

std::string slot_key(std::string_view name, std::size_t slot) {
  return redlock::detail::semaphore_slot_key(name, slot);
}

// One holder of a history: acquires permits, extends and releases them through the library and
// records what it saw. A permit's hold is on its slot key (lease::resource()); check_at_most with
// semaphore_of_slot groups the slots of one semaphore.
class permit_recorder {
 public:
  permit_recorder(rt::history& log, std::string process)
      : log_(log), process_(std::move(process)) {}

  asio::awaitable<redlock::lease> acquire(redlock::semaphore& permits, bool one_round = false) {
    const auto invoke = mono_now();
    error_code ec;
    redlock::lease held;
    if (one_round) {
      std::tie(ec, held) = co_await permits.async_try_acquire(tuple_awaitable);
    } else {
      std::tie(ec, held) = co_await permits.async_acquire(tuple_awaitable);
    }
    rt::event e{
        process_,
        ec ? permits.name() : held.resource(),
        held.token(),
        rt::op_kind::acquire,
        rt::op_result::ok,
        invoke,
        mono_now(),
        0,
        std::chrono::duration_cast<std::chrono::nanoseconds>(permits.options().ttl).count()};
    if (ec) {
      // A failed acquire cleans up the rounds it gave up on; only an abort leaves it open.
      e.result =
          ec == asio::error::operation_aborted ? rt::op_result::unknown : rt::op_result::failed;
    } else {
      e.valid_until = to_mono_ns(held.valid_until());
    }
    log_.record(e);
    last_error_ = ec;
    co_return std::move(held);
  }

  asio::awaitable<redlock::lease> try_acquire(redlock::semaphore& permits) {
    return acquire(permits, true);
  }

  // Records the validity the lease reports afterwards, whatever the outcome.
  asio::awaitable<error_code> extend(redlock::lease& held, milliseconds ttl) {
    const auto invoke = mono_now();
    auto [ec] = co_await held.async_extend(ttl, tuple_awaitable);
    log_.record({process_, held.resource(), held.token(), rt::op_kind::extend,
                 ec ? rt::op_result::failed : rt::op_result::ok, invoke, mono_now(),
                 to_mono_ns(held.valid_until()), 0});
    co_return ec;
  }

  asio::awaitable<error_code> release(redlock::lease& held) {
    const auto invoke = mono_now();
    const std::string resource = held.resource();
    const std::string token = held.token();
    auto [ec] = co_await held.async_release(tuple_awaitable);
    log_.record({process_, resource, token, rt::op_kind::release,
                 ec ? rt::op_result::failed : rt::op_result::ok, invoke, mono_now(), 0, 0});
    co_return ec;
  }

  // What a client that does not use the library believed (the unsafe counter below).
  void record_acquired(const std::string& resource, const std::string& token, rt::mono_ns invoke,
                       rt::mono_ns believed_until) {
    log_.record({process_, resource, token, rt::op_kind::acquire, rt::op_result::ok, invoke,
                 mono_now(), believed_until, 0});
  }
  void record_released(const std::string& resource, const std::string& token, rt::mono_ns invoke) {
    log_.record({process_, resource, token, rt::op_kind::release, rt::op_result::ok, invoke,
                 mono_now(), 0, 0});
  }

  error_code last_error() const noexcept { return last_error_; }

 private:
  rt::history& log_;
  std::string process_;
  error_code last_error_;
};

// Both verdicts on a semaphore history, logged whatever they are: no slot has two holders (each is
// a Redlock), and no semaphore has more than `permits`.
struct semaphore_verdict {
  rt::check_result per_slot;
  rt::check_result per_semaphore;
};

semaphore_verdict judge(const rt::history& log, std::size_t permits) {
  const auto events = log.events();
  semaphore_verdict verdict{rt::check_mutual_exclusion(events),
                            rt::check_at_most(events, rt::semaphore_of_slot, permits)};
  BOOST_TEST_MESSAGE("per slot: " << verdict.per_slot.describe());
  BOOST_TEST_MESSAGE("at most " << permits << ": " << verdict.per_semaphore.describe());
  return verdict;
}

// Three servers A, B, C and three clients, each with proxies of its own to every server, so that
// a node can be hidden from one client only: client c does not see node (c + 2) % 3. Client 0
// sees {A, B}, client 1 {B, C}, client 2 {A, C}: any two of them share one node, and each has a
// majority of its own.
struct three_way_split {
  static constexpr std::size_t nodes = 3;
  redis_fleet fleet{nodes};
  std::array<std::array<std::unique_ptr<rt::chaos_proxy>, nodes>, nodes> proxies;  // [client][node]

  three_way_split() {
    for (auto& mine : proxies)
      for (std::size_t n = 0; n < nodes; ++n)
        mine[n] = std::make_unique<rt::chaos_proxy>(fleet[n].port());
  }

  static std::size_t hidden_from(std::size_t client) { return (client + 2) % nodes; }

  std::vector<redlock::node_config> configs(std::size_t client) const {
    std::vector<redlock::node_config> out;
    for (const auto& proxy : proxies[client])
      out.push_back(proxy->config());
    return out;
  }

  // Every byte between client c and its hidden node is dropped, both ways, from now on.
  void split() {
    for (std::size_t c = 0; c < nodes; ++c)
      proxies[c][hidden_from(c)]->set_blackhole(true);
  }

  // Connects a client to all three nodes through its proxies before the split, so that the hidden
  // node is one that stops answering (and is then skipped), not one never reached.
  asio::awaitable<bool> connect(redlock::client& locks, std::size_t client) {
    std::array<std::uint64_t, nodes> before{};
    for (std::size_t n = 0; n < nodes; ++n)
      before[n] = proxies[client][n]->connections_accepted();
    if (co_await redlock::test::ping_until_answered(locks)) co_return false;
    const bool all = co_await eventually(
        [&] {
          for (std::size_t n = 0; n < nodes; ++n)
            if (proxies[client][n]->connections_accepted() == before[n]) return false;
          return true;
        },
        2s);
    co_await sleep_for(50ms);  // the handshakes behind the accepts
    co_return all;
  }
};

// The unsafe semaphore: one sorted set per node, members scored by their expiry. A node admits a
// member when, after dropping the expired ones, fewer than `permits` are left; a client holds a
// permit when a majority of nodes admitted it. Every node counts correctly, and still disjoint
// majorities admit more than `permits` holders.
const std::string zset_acquire =
    "local now = redis.call('TIME') "
    "local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) "
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms) "
    "if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then "
    "redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[3]) return 1 end "
    "return 0";

// One client of the unsafe semaphore, talking to the nodes through its own proxies (so that it
// meets the same split as the library's client c). A hidden node times out: no vote.
class zset_semaphore {
 public:
  zset_semaphore(three_way_split& split, std::size_t client, std::string key, std::size_t permits)
      : split_(split), client_(client), key_(std::move(key)), permits_(permits) {}

  // True when a majority admitted `member` for `ttl`.
  bool acquire(const std::string& member, milliseconds ttl) {
    std::size_t admitted = 0;
    const std::string permits = std::to_string(permits_);
    const std::string ttl_ms = std::to_string(ttl.count());
    for (std::size_t n = 0; n < three_way_split::nodes; ++n) {
      try {
        sync_client node(split_.proxies[client_][n]->port(), {}, {}, 300ms);
        admitted +=
            node.command({"EVAL", zset_acquire, "1", key_, permits, ttl_ms, member}).integer == 1
                ? 1
                : 0;
      } catch (const std::runtime_error&) {
        // Hidden from this client: no answer, no vote.
      }
    }
    if (admitted * 2 > three_way_split::nodes) return true;
    release(member);
    return false;
  }

  void release(const std::string& member) {
    for (std::size_t n = 0; n < three_way_split::nodes; ++n) {
      try {
        sync_client node(split_.proxies[client_][n]->port(), {}, {}, 300ms);
        node.command({"ZREM", key_, member});
      } catch (const std::runtime_error&) {
      }
    }
  }

 private:
  three_way_split& split_;
  std::size_t client_;
  std::string key_;
  std::size_t permits_;
};

// How many of `leases` are held right now.
std::size_t held_count(const std::vector<redlock::lease>& leases) {
  return static_cast<std::size_t>(
      std::count_if(leases.begin(), leases.end(), [](const auto& l) { return l.held(); }));
}

// The slot keys of `name` still present on any running node.
std::size_t slot_keys_left(rt::inspector& nodes, std::string_view name, std::size_t permits) {
  std::size_t left = 0;
  for (std::size_t s = 0; s < permits; ++s)
    left += nodes.present(slot_key(name, s));
  return left;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(semaphore_safety)

// Two permits on three nodes, three clients each seeing another pair of nodes: client 0 {A,B},
// client 1 {B,C}, client 2 {A,C}. Each permit is a Redlock of its slot, so a holder of slot s has
// s on a majority, and any two majorities share a node: a third holder would need a slot that two
// others do not hold on the node it shares with each of them, and there is none. One after another
// (each keeps its permit, TTL 10 s): the first two get distinct slots, the third is refused. All
// at once: whoever wins, at most two hold. The checker over the recorded history agrees.
BOOST_AUTO_TEST_CASE(two_permits_split_three_ways_never_have_three_holders) {
  three_way_split split;
  rt::history log;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    std::vector<std::unique_ptr<redlock::client>> clients;
    for (std::size_t c = 0; c < 3; ++c) {
      clients.push_back(std::make_unique<redlock::client>(io.get_executor(), split.configs(c),
                                                          fast_client_options()));
      BOOST_TEST_REQUIRE(co_await split.connect(*clients[c], c), "client " << c);
    }
    split.split();

    // One after another: client 0 tries once; client 1 waits up to 3 s (its first round may try
    // client 0's slot, which B refuses); client 2 tries once, then waits 1 s, in vain.
    {
      std::vector<redlock::lease> leases;
      std::vector<error_code> errors;
      for (std::size_t c = 0; c < 3; ++c) {
        auto options = permit_for(10s);
        options.wait = c == 1 ? 3s : 1s;
        redlock::semaphore permits(*clients[c], "split-one-by-one", 2, options);
        permit_recorder holder(log, fmt::format("one-by-one/c{}", c));
        leases.push_back(co_await holder.acquire(permits, c != 1));
        errors.push_back(holder.last_error());
        BOOST_TEST_MESSAGE("one by one, client "
                           << c << ": "
                           << (errors.back() ? errors.back().message() : leases.back().resource())
                           << " " << leases.back().diagnostics());
      }
      BOOST_TEST(!errors[0], errors[0].message() << ": " << leases[0].diagnostics());
      BOOST_TEST(!errors[1], errors[1].message() << ": " << leases[1].diagnostics());
      if (!errors[0] && !errors[1]) BOOST_TEST(leases[0].resource() != leases[1].resource());
      BOOST_TEST((errors[2] == redlock::condition::not_acquired),
                 errors[2].message() << ": " << leases[2].diagnostics());
      {
        auto options = permit_for(10s);
        options.wait = 1s;
        redlock::semaphore permits(*clients[2], "split-one-by-one", 2, options);
        permit_recorder holder(log, "one-by-one/c2");
        auto waited = co_await holder.acquire(permits);
        BOOST_TEST(holder.last_error() == error::wait_timeout, holder.last_error().message()
                                                                   << ": " << waited.diagnostics());
        leases.push_back(std::move(waited));
      }
      co_await sleep_for(100ms);  // all of them "work" now, if they believe they hold
      BOOST_TEST(held_count(leases) <= 2u);
      for (std::size_t c = 0; c < leases.size(); ++c) {
        if (!leases[c].held()) continue;
        permit_recorder holder(log, fmt::format("one-by-one/c{}", c));
        const auto ec = co_await holder.release(leases[c]);
        BOOST_TEST(!ec, ec.message());
      }
    }

    // All at once, several times: rounds of async_acquire racing on the three views. Rivals that
    // split the votes all back off; 5 s is ample for one of them to get through.
    for (int race = 0; race < 5; ++race) {
      const std::string name = fmt::format("split-race-{}", race);
      std::vector<redlock::lease> leases(3);
      co_await rt::run_all(3, [&](std::size_t c) -> asio::awaitable<void> {
        auto options = permit_for(10s);
        options.wait = 5s;
        redlock::semaphore permits(*clients[c], name, 2, options);
        permit_recorder holder(log, fmt::format("race{}/c{}", race, c));
        leases[c] = co_await holder.acquire(permits);
      });
      co_await sleep_for(50ms);
      const std::size_t holding = held_count(leases);
      BOOST_TEST_MESSAGE("race " << race << ": " << holding << " of 3 hold");
      BOOST_TEST(holding <= 2u, "race " << race);
      BOOST_TEST(holding >= 1u, "race " << race << ": nobody got a permit in 5 s");
      for (std::size_t c = 0; c < 3; ++c) {
        if (!leases[c].held()) continue;
        permit_recorder holder(log, fmt::format("race{}/c{}", race, c));
        const auto ec = co_await holder.release(leases[c]);
        BOOST_TEST(!ec, ec.message());
      }
    }
    for (auto& locks : clients)
      co_await locks->async_shutdown(tuple_awaitable);
  });
  const auto verdict = judge(log, 2);
  BOOST_TEST(verdict.per_slot.ok(), verdict.per_slot.describe());
  BOOST_TEST(verdict.per_semaphore.ok(), verdict.per_semaphore.describe());
}

// async_try_acquire in the same split: client 0 holds one of two slots, client 1 (which sees B
// and C) tries once. When its first round draws client 0's slot, A says nothing (hidden), B
// refuses and reports the other slot free, C grants: the other slot is free on B and C, a
// quorum, and held nowhere. The header promises rounds "while some slot may be free on a quorum"
// and contended only "when every slot is held on a quorum", so the try must go on to it. Eight
// semaphores: the first draw hits the held slot in all but 1/256 of runs.
BOOST_AUTO_TEST_CASE(a_try_goes_on_to_the_slot_a_refusal_showed_free) {
  three_way_split split;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    std::vector<std::unique_ptr<redlock::client>> clients;
    for (std::size_t c = 0; c < 2; ++c) {
      clients.push_back(std::make_unique<redlock::client>(io.get_executor(), split.configs(c),
                                                          fast_client_options()));
      BOOST_TEST_REQUIRE(co_await split.connect(*clients[c], c), "client " << c);
    }
    split.split();
    for (int attempt = 0; attempt < 8; ++attempt) {
      BOOST_TEST_CONTEXT("semaphore " << attempt) {
        const std::string name = fmt::format("split-try-{}", attempt);
        redlock::semaphore first(*clients[0], name, 2, permit_for(10s));
        redlock::semaphore second(*clients[1], name, 2, permit_for(10s));
        auto [ec0, held0] = co_await first.async_try_acquire(tuple_awaitable);
        BOOST_TEST_REQUIRE(!ec0, ec0.message() << ": " << held0.diagnostics());
        auto [ec1, held1] = co_await second.async_try_acquire(tuple_awaitable);
        BOOST_TEST(!ec1, ec1.message() << ": " << held1.diagnostics());
        if (!ec1) BOOST_TEST(held1.resource() != held0.resource());
        co_await held0.async_release(tuple_awaitable);
        if (held1.held()) co_await held1.async_release(tuple_awaitable);
      }
    }
  });
}

// The negative of two_permits_split_three_ways_never_have_three_holders: a majority-quorum counter
// (one sorted set per node, see zset_acquire) under the same split admits all three clients while
// every node counts two, and the same checker reports three holders at once.
BOOST_AUTO_TEST_CASE(a_majority_counter_under_the_same_split_admits_three_and_is_caught) {
  three_way_split split;
  split.split();
  rt::history log;
  const std::string key = "{split-zset}:holders";
  const milliseconds ttl = 10s;
  std::vector<std::string> held;
  for (std::size_t c = 0; c < 3; ++c) {
    zset_semaphore permits(split, c, key, 2);
    permit_recorder holder(log, fmt::format("zset/c{}", c));
    const std::string member = fmt::format("member-{}", c);
    const auto invoke = mono_now();
    if (permits.acquire(member, ttl)) {
      // Believed as long as the library would: the TTL less the time it took and the drift.
      const auto drift = std::chrono::nanoseconds(ttl / 100 + 2ms).count();
      holder.record_acquired(key, member, invoke,
                             invoke + std::chrono::nanoseconds(ttl).count() - drift);
      held.push_back(member);
    }
  }
  std::this_thread::sleep_for(100ms);  // all of them "work" now
  BOOST_TEST(held.size() == 3u, "the unsafe counter admitted " << held.size());
  for (std::size_t n = 0; n < 3; ++n) {
    sync_client node(split.fleet[n].port());
    BOOST_TEST(node.command({"ZCARD", key}).integer == 2, "node " << n << " counts two");
  }
  for (std::size_t c = 0; c < 3; ++c) {
    zset_semaphore permits(split, c, key, 2);
    const auto invoke = mono_now();
    permits.release(fmt::format("member-{}", c));
    permit_recorder(log, fmt::format("zset/c{}", c))
        .record_released(key, fmt::format("member-{}", c), invoke);
  }
  const auto verdict = judge(log, 2);
  BOOST_TEST(!verdict.per_semaphore.ok(), "the checker missed three holders of two permits");
  BOOST_REQUIRE(verdict.per_semaphore.violations.size() == 1u);
  BOOST_TEST(verdict.per_semaphore.violations[0].holders.size() == 3u);
  BOOST_TEST(verdict.per_semaphore.describe().find("at once (at most 2)") != std::string::npos,
             verdict.per_semaphore.describe());
}

// Permits of one client are distinct slots; with all of them held, another try is refused with
// contended, by this client and by another; a released permit goes to the next try.
BOOST_FIXTURE_TEST_CASE(permits_are_distinct_and_the_one_past_the_last_is_contended,
                        rt::five_nodes) {
  rt::history log;
  constexpr std::size_t count = 3;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client rival_locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::semaphore permits(locks, "pool", count, permit_for(10s));
    redlock::semaphore rival_permits(rival_locks, "pool", count, permit_for(10s));
    BOOST_TEST(permits.permits() == count);
    BOOST_TEST(permits.name() == "pool");
    permit_recorder mine(log, "mine");
    permit_recorder rival(log, "rival");

    std::vector<redlock::lease> leases;
    std::set<std::string> slots;
    for (std::size_t i = 0; i < count; ++i) {
      auto held = co_await mine.try_acquire(permits);
      BOOST_TEST_REQUIRE(!mine.last_error(), "permit " << i << ": " << mine.last_error().message()
                                                       << ": " << held.diagnostics());
      BOOST_TEST(held.held());
      slots.insert(held.resource());
      leases.push_back(std::move(held));
    }
    BOOST_TEST(slots.size() == count, "the permits share a slot");
    for (std::size_t s = 0; s < count; ++s)
      BOOST_TEST(slots.count(slot_key("pool", s)) == 1u, slot_key("pool", s) << " not held");
    for (const auto& held : leases) {
      const bool everywhere =
          co_await eventually([&] { return nodes.holding(held.resource(), held.token()) == 5; });
      BOOST_TEST(everywhere, held.resource());
    }

    auto extra = co_await mine.try_acquire(permits);
    BOOST_TEST(mine.last_error() == error::contended, mine.last_error().message()
                                                          << ": " << extra.diagnostics());
    BOOST_TEST(!extra.held());
    auto other = co_await rival.try_acquire(rival_permits);
    BOOST_TEST(rival.last_error() == error::contended, rival.last_error().message()
                                                           << ": " << other.diagnostics());
    BOOST_TEST(!other.held());
    BOOST_TEST(!other.diagnostics().empty());
    for (const auto& held : leases) {
      BOOST_TEST(held.held());
      BOOST_TEST(nodes.holding(held.resource(), held.token()) == 5u, "a refused try touched it");
    }

    // One released: the next try gets exactly that slot, the only free one.
    const std::string freed = leases[1].resource();
    BOOST_TEST(!co_await mine.release(leases[1]));
    BOOST_TEST(co_await eventually([&] { return nodes.present(freed) == 0; }, 2s));
    other = co_await rival.try_acquire(rival_permits);
    BOOST_TEST_REQUIRE(!rival.last_error(), rival.last_error().message()
                                                << ": " << other.diagnostics());
    BOOST_TEST(other.resource() == freed);
    extra = co_await mine.try_acquire(permits);
    BOOST_TEST(mine.last_error() == error::contended, mine.last_error().message());

    BOOST_TEST(!co_await rival.release(other));
    for (auto& held : leases) {
      if (held.held()) BOOST_TEST(!co_await mine.release(held));
    }
    BOOST_TEST(co_await eventually([&] { return slot_keys_left(nodes, "pool", count) == 0; }, 2s));
  });
  const auto verdict = judge(log, count);
  BOOST_TEST(verdict.per_slot.ok(), verdict.per_slot.describe());
  BOOST_TEST(verdict.per_semaphore.ok(), verdict.per_semaphore.describe());
}

// A waiting acquire gets the permit another client releases, soon after (release announcements
// wake it; the backoff alone would too, within its 50 ms cap).
BOOST_FIXTURE_TEST_CASE(a_waiting_acquire_gets_a_released_permit, rt::five_nodes) {
  rt::history log;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client holder_locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client waiter_locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::semaphore held_permits(holder_locks, "queue", 2, permit_for(10s));
    auto options = permit_for(10s);
    options.wait = 5s;
    redlock::semaphore waited_permits(waiter_locks, "queue", 2, options);
    permit_recorder holder(log, "holder");
    permit_recorder waiter(log, "waiter");
    auto first = co_await holder.try_acquire(held_permits);
    BOOST_TEST_REQUIRE(!holder.last_error(), first.diagnostics());
    auto second = co_await holder.try_acquire(held_permits);
    BOOST_TEST_REQUIRE(!holder.last_error(), second.diagnostics());

    redlock::lease got;
    steady_clock::time_point got_at{};
    steady_clock::time_point released_at{};
    co_await rt::run_all(2, [&](std::size_t i) -> asio::awaitable<void> {
      if (i == 0) {
        got = co_await waiter.acquire(waited_permits);
        got_at = steady_clock::now();
      } else {
        co_await sleep_for(300ms);
        released_at = steady_clock::now();
        BOOST_TEST(!co_await holder.release(second));
      }
    });
    BOOST_TEST_REQUIRE(!waiter.last_error(), waiter.last_error().message()
                                                 << ": " << got.diagnostics());
    BOOST_TEST((got_at >= released_at));
    BOOST_TEST(rt::ms_between(released_at, got_at) < 2000,
               "got the permit " << rt::ms_between(released_at, got_at) << " ms after release");
    BOOST_TEST(got.resource() != first.resource());
    BOOST_TEST(!co_await waiter.release(got));
    BOOST_TEST(!co_await holder.release(first));
  });
  const auto verdict = judge(log, 2);
  BOOST_TEST(verdict.per_slot.ok(), verdict.per_slot.describe());
  BOOST_TEST(verdict.per_semaphore.ok(), verdict.per_semaphore.describe());
}

// with_permit: six bodies on two permits over two clients run at most two at a time, each with a
// held slot lease, which is released after the body.
BOOST_FIXTURE_TEST_CASE(with_permit_runs_at_most_permits_bodies_at_once, rt::five_nodes) {
  int inside = 0;
  int most = 0;
  int finished = 0;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client a(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client b(io.get_executor(), fleet.configs(), fast_client_options());
    auto options = permit_for(5s);
    options.wait = 10s;
    redlock::semaphore on_a(a, "bodies", 2, options);
    redlock::semaphore on_b(b, "bodies", 2, options);
    co_await rt::run_all(6, [&](std::size_t i) -> asio::awaitable<void> {
      const std::string slot = co_await redlock::with_permit(
          i % 2 == 0 ? on_a : on_b, [&](redlock::lease& held) -> asio::awaitable<std::string> {
            BOOST_TEST(held.held());
            ++inside;
            most = std::max(most, inside);
            co_await sleep_for(100ms);
            --inside;
            co_return held.resource();
          });
      BOOST_TEST(rt::semaphore_of_slot(slot) == "{bodies}", slot);
      ++finished;
    });
    BOOST_TEST(co_await eventually([&] { return slot_keys_left(nodes, "bodies", 2) == 0; }, 2s));
  });
  BOOST_TEST(finished == 6);
  BOOST_TEST(most <= 2);
  BOOST_TEST(most == 2, "never two bodies at once");
}

// A holder process killed with SIGKILL keeps its slots until their keys expire: until then a try
// is refused, and a waiting acquire gets each slot only once a majority of nodes has let it expire
// (its PTTLs, read right after the kill, say when), and within two seconds after.
BOOST_AUTO_TEST_CASE(a_killed_holders_permits_come_free_after_their_ttl) {
  redis_fleet fleet(3);
  rt::inspector nodes(fleet);
  const milliseconds ttl = 2s;
  const std::string name = "crash";
  const pid_t holder = redlock::test::start_holder_process(
      [&](asio::io_context& io, auto took) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
        redlock::semaphore permits(locks, name, 2, permit_for(ttl));
        auto [ec1, first] = co_await permits.async_try_acquire(tuple_awaitable);
        auto [ec2, second] = co_await permits.async_try_acquire(tuple_awaitable);
        took(!ec1 && !ec2);
        co_await sleep_for(1h);  // killed about here, holding both (and renewing them)
      });
  redlock::test::kill_process(holder);

  // When each slot is free on a majority: the second-shortest of its three PTTLs.
  const auto measured_at = steady_clock::now();
  std::array<steady_clock::time_point, 2> free_from{};
  for (std::size_t s = 0; s < 2; ++s) {
    std::array<long long, 3> left{};
    for (std::size_t n = 0; n < 3; ++n)
      left[n] = nodes.pttl(n, slot_key(name, s));
    std::sort(left.begin(), left.end());
    BOOST_TEST_REQUIRE(left[1] > 0, "slot " << s << " is not held on a majority");
    free_from[s] = measured_at + milliseconds(left[1]);
  }

  rt::history log;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    auto options = permit_for(10s);
    options.wait = ttl + 3s;
    redlock::semaphore permits(locks, name, 2, options);
    permit_recorder parent(log, "parent");
    auto refused = co_await parent.try_acquire(permits);
    BOOST_TEST(parent.last_error() == error::contended, parent.last_error().message()
                                                            << ": " << refused.diagnostics());

    std::array<redlock::lease, 2> leases;
    for (auto& held : leases) {
      held = co_await parent.acquire(permits);
      const auto at = steady_clock::now();
      BOOST_TEST_REQUIRE(!parent.last_error(), parent.last_error().message()
                                                   << ": " << held.diagnostics());
      const std::size_t s = held.resource() == slot_key(name, 0) ? 0 : 1;
      BOOST_TEST(held.resource() == slot_key(name, s));
      // Not before a majority let the dead holder's key expire (1 ms: PTTL's rounding).
      BOOST_TEST((at + 1ms >= free_from[s]), "slot " << s << " taken "
                                                     << rt::ms_between(at, free_from[s])
                                                     << " ms before a majority let it expire");
      BOOST_TEST(rt::ms_between(free_from[s], at) < 2000,
                 "slot " << s << " taken " << rt::ms_between(free_from[s], at)
                         << " ms after it came free");
    }
    for (auto& held : leases)
      BOOST_TEST(!co_await parent.release(held));
  });
  const auto verdict = judge(log, 2);
  BOOST_TEST(verdict.per_semaphore.ok(), verdict.per_semaphore.describe());
}

// A permit whose key expired and went to a rival: extending it fails with not_held and does not
// re-create or touch the rival's key; releasing it (a release with the wrong token) leaves the
// rival's key; a second release of a released permit is not_held.
BOOST_FIXTURE_TEST_CASE(extend_and_release_of_a_lost_permit_never_touch_the_rivals_key,
                        rt::five_nodes) {
  rt::history log;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client a_locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client b_locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::semaphore a_permits(a_locks, "renew", 1, permit_for(300ms, rt::renewal::off));
    redlock::semaphore b_permits(b_locks, "renew", 1, permit_for(10s));
    permit_recorder a(log, "a");
    permit_recorder b(log, "b");
    const std::string slot = slot_key("renew", 0);

    auto a_lease = co_await a.try_acquire(a_permits);
    BOOST_TEST_REQUIRE(!a.last_error(), a_lease.diagnostics());
    BOOST_TEST(a_lease.resource() == slot);
    co_await sleep_for(400ms);  // a's key expires on every node
    BOOST_TEST(!a_lease.held());
    auto b_lease = co_await b.try_acquire(b_permits);
    BOOST_TEST_REQUIRE(!b.last_error(), b_lease.diagnostics());
    BOOST_TEST(b_lease.resource() == slot);
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return nodes.holding(slot, b_lease.token()) == 5; }, 2s));

    BOOST_TEST(co_await a.extend(a_lease, 5s) == error::not_held);
    BOOST_TEST(nodes.holding(slot, b_lease.token()) == 5u, "the extension touched b's key");
    BOOST_TEST(nodes.holding(slot, a_lease.token()) == 0u);
    for (std::size_t n = 0; n < 5; ++n)
      BOOST_TEST(nodes.pttl(n, slot) > 9000, "node " << n << ": b's TTL was changed");

    BOOST_TEST(co_await a.release(a_lease) == error::not_held);
    BOOST_TEST(nodes.holding(slot, b_lease.token()) == 5u, "a's release deleted b's key");

    BOOST_TEST(!co_await b.release(b_lease));
    BOOST_TEST(co_await eventually([&] { return nodes.present(slot) == 0; }, 2s));
    BOOST_TEST(co_await b.release(b_lease) == error::not_held);
  });
  const auto verdict = judge(log, 1);
  BOOST_TEST(verdict.per_slot.ok(), verdict.per_slot.describe());
  BOOST_TEST(verdict.per_semaphore.ok(), verdict.per_semaphore.describe());
}

// An operator deletes a renewed permit's key everywhere, and a rival takes the slot: the renewal
// finds a foreign key, the loss is signalled, and the rival's key stays as it was. Deleted with no
// rival, an extension fails and the key is not re-created.
BOOST_FIXTURE_TEST_CASE(renewal_of_a_deleted_permit_fails_and_never_re_creates_it, rt::five_nodes) {
  // No history verdict here: the operator's DEL makes a and b both believe they hold the slot
  // until a's renewal finds b's key, which the checker would rightly report.
  rt::history log;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client a_locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::client b_locks(io.get_executor(), fleet.configs(), fast_client_options());
    redlock::semaphore a_permits(a_locks, "deleted", 1, permit_for(1s));
    redlock::semaphore b_permits(b_locks, "deleted", 1, permit_for(10s, rt::renewal::off));
    permit_recorder a(log, "a");
    permit_recorder b(log, "b");
    const std::string slot = slot_key("deleted", 0);
    const auto delete_everywhere = [&] {
      for (std::size_t n = 0; n < 5; ++n) {
        sync_client node(fleet[n].port());
        node.command({"DEL", slot});
      }
    };

    auto a_lease = co_await a.try_acquire(a_permits);
    BOOST_TEST_REQUIRE(!a.last_error(), a_lease.diagnostics());
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return nodes.holding(slot, a_lease.token()) == 5; }, 2s));
    delete_everywhere();
    auto b_lease = co_await b.try_acquire(b_permits);
    BOOST_TEST_REQUIRE(!b.last_error(), b_lease.diagnostics());
    BOOST_TEST(b_lease.resource() == slot);
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return nodes.holding(slot, b_lease.token()) == 5; }, 2s));

    // The renewal at half of the TTL finds b's key: the loss comes before a's validity ends.
    const auto a_valid_until = a_lease.valid_until();
    auto [lost] = co_await a_lease.async_wait_lost(tuple_awaitable);
    BOOST_TEST(lost == error::lock_lost, lost.message());
    BOOST_TEST((steady_clock::now() < a_valid_until),
               "the loss came " << rt::ms_between(a_valid_until, steady_clock::now())
                                << " ms after the validity ended");
    BOOST_TEST(!a_lease.held());
    BOOST_TEST(co_await a.extend(a_lease, 5s) == error::not_held);
    BOOST_TEST(nodes.holding(slot, b_lease.token()) == 5u, "the renewal touched b's key");
    for (std::size_t n = 0; n < 5; ++n)
      BOOST_TEST(nodes.pttl(n, slot) > 8000, "node " << n << ": b's TTL was changed");
    BOOST_TEST(co_await a.release(a_lease) == error::not_held);
    BOOST_TEST(nodes.holding(slot, b_lease.token()) == 5u, "a's release deleted b's key");
    BOOST_TEST(!co_await b.release(b_lease));

    // Deleted, no rival: the extension fails and nothing comes back.
    auto c_lease = co_await a.try_acquire(a_permits);
    BOOST_TEST_REQUIRE(!a.last_error(), c_lease.diagnostics());
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return nodes.holding(slot, c_lease.token()) == 5; }, 2s));
    delete_everywhere();
    BOOST_TEST(co_await a.extend(c_lease, 5s) == error::not_held);
    co_await sleep_for(600ms);  // past the renewal's half-life: it would have run by now
    BOOST_TEST(nodes.present(slot) == 0u, "the key was re-created");
    BOOST_TEST(!c_lease.held());
    BOOST_TEST(co_await a.release(c_lease) == error::not_held);
  });
}

// permits outside [1, max_permits] and an empty name complete every acquire with
// invalid_argument and a message; max_permits itself works.
BOOST_AUTO_TEST_CASE(bad_arguments_are_refused_and_max_permits_works) {
  redis_fleet fleet(1);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
    struct bad {
      std::string name;
      std::size_t permits;
    };
    // A std::array, not a braced list: g++ 12 cannot keep the latter's array across a co_await.
    const std::array<bad, 3> cases = {bad{"zero", 0},
                                      bad{"many", redlock::semaphore::max_permits + 1}, bad{"", 1}};
    for (const auto& [name, count] : cases) {
      BOOST_TEST_CONTEXT("name \"" << name << "\", " << count << " permits") {
        redlock::semaphore permits(locks, name, count, permit_for(1s));
        auto [ec, held] = co_await permits.async_try_acquire(tuple_awaitable);
        BOOST_TEST(ec == error::invalid_argument, ec.message());
        BOOST_TEST(!held.held());
        BOOST_TEST(!held.diagnostics().empty());
        BOOST_TEST_MESSAGE(held.diagnostics());
        auto [ec2, held2] = co_await permits.async_acquire(tuple_awaitable);
        BOOST_TEST(ec2 == error::invalid_argument, ec2.message());
        BOOST_TEST(!held2.diagnostics().empty());
        try {
          co_await permits.async_acquire(asio::use_awaitable);
          BOOST_ERROR("no exception");
        } catch (const boost::system::system_error& e) {
          BOOST_TEST(e.code() == error::invalid_argument, e.code().message());
          BOOST_TEST(std::string(e.what()).find(held.diagnostics()) != std::string::npos, e.what());
        }
      }
    }
    redlock::semaphore widest(locks, "widest", redlock::semaphore::max_permits, permit_for(5s));
    auto [ec, held] = co_await widest.async_try_acquire(tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << held.diagnostics());
    BOOST_TEST(rt::semaphore_of_slot(held.resource()) == "{widest}", held.resource());
    auto [release_ec] = co_await held.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
  });
}

BOOST_AUTO_TEST_SUITE_END()
