// Fencing tokens when consecutive leases are granted by different majorities, for every kind of
// lease that has tokens: a lock, a set of locks, a semaphore's permit, and a read-write lock's
// writers (with readers between them). Three nodes A, B, C; a node is kept out of a round by a
// foreign value on the key the round must set there. W1 and W2 are granted by {A, B}, W3 and W4
// by {B, C}, W5 by {A, C}: only the write-back carries W2's token to C and W4's to A, so a
// write-back that raises another counter than the one the grants increment gives W5 a token
// below W4's (and a reader after W4 one below W4's). Afterwards no key without a TTL is left but
// the counters the grants increment.

#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "redlock/redlock.hpp"
#include "support/printing.hpp"
#include "support/token_order.hpp"

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace {

using redlock::test::fenced_lock;
using redlock::test::token_order;

// The kinds of fenced lease.
enum class kind_of_lease { lock, set, permit, rw_lock };

redlock::lock_options options_for_grant_sets() {
  auto options = fenced_lock(10s);
  options.wait = 5s;
  options.auto_renew = false;
  return options;
}

std::string name_of(kind_of_lease kind) {
  switch (kind) {
    case kind_of_lease::lock:
      return "lock";
    case kind_of_lease::set:
      return "set";
    case kind_of_lease::permit:
      return "semaphore permit";
    case kind_of_lease::rw_lock:
      return "read-write lock";
  }
  return {};
}

// The key a foreign value keeps a node out with: for a set, only "gs-set-b" is kept out anywhere,
// whose counter's order is then at stake.
std::string blocking_key(kind_of_lease kind) {
  switch (kind) {
    case kind_of_lease::lock:
      return "gs-lock";
    case kind_of_lease::set:
      return "gs-set-b";
    case kind_of_lease::permit:
      return redlock::detail::semaphore_slot_key("gs-sem", 0);
    case kind_of_lease::rw_lock:
      return redlock::detail::rw_writer_key("gs-rw");
  }
  return {};
}

// The counters the grants increment: the only keys that may stay without a TTL.
std::set<std::string> counters_of(kind_of_lease kind) {
  using redlock::detail::fencing_counter_key;
  switch (kind) {
    case kind_of_lease::lock:
      return {fencing_counter_key("gs-lock")};
    case kind_of_lease::set:
      return {fencing_counter_key("gs-set-a"), fencing_counter_key("gs-set-b")};
    case kind_of_lease::permit:
      return {fencing_counter_key(redlock::detail::semaphore_slot_key("gs-sem", 0))};
    case kind_of_lease::rw_lock:
      return {fencing_counter_key("gs-rw")};
  }
  return {};
}

// Takes one lease of `kind` (a writer, for a read-write lock; a reader with `read`), releases it,
// and gives its fencing token (of "gs-set-b" for a set).
asio::awaitable<std::uint64_t> take_one(redlock::client& locks, kind_of_lease kind,
                                        bool read = false) {
  const auto options = options_for_grant_sets();
  const std::vector<std::string> set = {"gs-set-a", "gs-set-b"};
  redlock::semaphore permits(locks, "gs-sem", 1, options);
  redlock::rw_lock rw(locks, "gs-rw", options);
  error_code ec;
  redlock::lease lease;
  switch (kind) {
    case kind_of_lease::lock:
      std::tie(ec, lease) = co_await locks.async_acquire("gs-lock", options, tuple_awaitable);
      break;
    case kind_of_lease::set:
      std::tie(ec, lease) = co_await locks.async_acquire_all(set, options, tuple_awaitable);
      break;
    case kind_of_lease::permit:
      std::tie(ec, lease) = co_await permits.async_acquire(tuple_awaitable);
      break;
    case kind_of_lease::rw_lock:
      if (read) {
        std::tie(ec, lease) = co_await rw.async_acquire_read(tuple_awaitable);
      } else {
        std::tie(ec, lease) = co_await rw.async_acquire_write(tuple_awaitable);
      }
      break;
  }
  BOOST_TEST_REQUIRE(!ec, name_of(kind) << ": " << ec.message() << ": " << lease.diagnostics());
  const auto token =
      kind == kind_of_lease::set ? lease.fencing_token("gs-set-b") : lease.fencing_token();
  BOOST_TEST_REQUIRE(token.has_value());
  co_await lease.async_release(tuple_awaitable);
  co_return *token;
}

// Keys on `server` that have no TTL.
std::set<std::string> keys_without_ttl(redlock::test::redis_server& server) {
  sync_client c(server.port());
  std::set<std::string> found;
  for (const auto& key : c.command({"KEYS", "*"}).elements) {
    if (c.command({"PTTL", key.text}).integer == -1) found.insert(key.text);
  }
  return found;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fencing_grant_sets)

BOOST_AUTO_TEST_CASE(tokens_increase_when_each_lease_is_granted_by_another_majority) {
  constexpr std::size_t a = 0, b = 1, c = 2;
  // The node kept out of each round: W1, W2 by {A, B}; W3, W4 by {B, C}; W5 by {A, C}.
  constexpr std::array<std::size_t, 5> kept_out = {c, c, a, a, b};
  for (const auto kind :
       {kind_of_lease::lock, kind_of_lease::set, kind_of_lease::permit, kind_of_lease::rw_lock}) {
    BOOST_TEST_CONTEXT(name_of(kind)) {
      redis_fleet fleet(3);
      token_order order;
      std::string shown;
      const auto keep_out = [&](std::size_t node, bool out) {
        sync_client server(fleet[node].port());
        if (out) {
          server.command({"SET", blocking_key(kind), "someone-else"});
        } else {
          server.command({"DEL", blocking_key(kind)});
        }
      };
      run_async([&](asio::io_context& io) -> asio::awaitable<void> {
        redlock::client locks(io.get_executor(), fleet.configs(), fast_client_options());
        for (std::size_t w = 0; w < kept_out.size(); ++w) {
          keep_out(kept_out[w], true);
          const auto token = co_await take_one(locks, kind);
          keep_out(kept_out[w], false);
          shown += fmt::format(" {}", token);
          order.granted(token);
          if (kind == kind_of_lease::rw_lock && w == 3) {
            // A reader after W4, granted by {A, C} (B kept out): W4 wrote its token back to a
            // majority, which {A, C} meets.
            keep_out(b, true);
            const auto read = co_await take_one(locks, kind, true);
            keep_out(b, false);
            shown += fmt::format(" (reader {})", read);
            BOOST_TEST(read >= token,
                       "a reader after a writer with token " << token << " got " << read);
          }
        }
      });
      BOOST_TEST_MESSAGE(name_of(kind) << ": tokens" << shown);
      BOOST_TEST(!order.violation().has_value(), order.violation().value_or(""));
      const auto counters = counters_of(kind);
      for (std::size_t node = 0; node < fleet.size(); ++node) {
        for (const auto& key : keys_without_ttl(fleet[node])) {
          BOOST_TEST(counters.count(key) == 1u,
                     "node " << node << " keeps " << key << " without a TTL");
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
