// The public API as users write it inside a coroutine, with braced lists of resources in the
// co_await expression itself, where g++ 12 once stopped with "array used as initializer" and
// with_lock was ambiguous between one resource and a list. Compiled by the build's compiler and
// run under each build's sanitizers against a node of its own (REDLOCK_NODES), and compiled by
// g++ 12 and clang 14 as ctest entries (test/CMakeLists.txt). Prints one line and exits 0 when
// every call did what it says.

#include <redlock/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

void expect(bool holds, const char* what) {
  if (!holds) throw std::runtime_error(std::string("braced lists: ") + what);
}

// A body that reports how many resources its lease holds.
asio::awaitable<std::size_t> count(redlock::lease& held) {
  co_return held.resources().size();
}

asio::awaitable<void> use_braced_lists(std::string nodes) {
  redlock::client locks(co_await asio::this_coro::executor,
                        redlock::node_config::from_url_list(nodes));
  const redlock::lock_options options{.ttl = 10s, .wait = 2s};

  auto both =
      co_await locks.async_acquire_all({"{acct}:17", "{acct}:42"}, options, asio::use_awaitable);
  expect(both.held() && both.resources().size() == 2, "async_acquire_all({...})");
  co_await both.async_release(asio::use_awaitable);

  const std::string seventeen = "{acct}:17";
  const std::string_view forty_two = "{acct}:42";
  auto [ec, tried] =
      co_await locks.async_try_acquire_all({seventeen, forty_two, std::string("{acct}:99")},
                                           options, asio::as_tuple(asio::use_awaitable));
  expect(!ec && tried.resources().size() == 3, "async_try_acquire_all({...}) of mixed names");
  co_await tried.async_release(asio::use_awaitable);

  const auto in_set = co_await redlock::with_lock(
      locks, {"{acct}:17", "{acct}:42"}, options,
      [](redlock::lease& held) -> asio::awaitable<std::size_t> { co_return co_await count(held); });
  expect(in_set == 2, "with_lock(locks, {\"a\", \"b\"}, ...) holds a set");

  const auto alone = co_await redlock::with_lock(
      locks, "{acct}:17", options,
      [](redlock::lease& held) -> asio::awaitable<std::size_t> { co_return co_await count(held); });
  expect(alone == 1, "with_lock(locks, \"a\", ...) holds one lock");

  const auto named = co_await redlock::with_lock(
      locks, seventeen + "-copy", options,
      [](redlock::lease& held) -> asio::awaitable<std::size_t> { co_return co_await count(held); });
  expect(named == 1, "with_lock(locks, std::string, ...) holds one lock");

  const std::vector<std::string> listed = {"{acct}:17", "{acct}:42"};
  const auto from_vector = co_await redlock::with_lock(
      locks, listed, options,
      [](redlock::lease& held) -> asio::awaitable<std::size_t> { co_return co_await count(held); });
  expect(from_vector == 2, "with_lock(locks, std::vector, ...) holds a set");

  co_await locks.async_shutdown(asio::use_awaitable);
  std::printf("braced lists: every call held what it names\n");
}

}  // namespace

int main() {
  const char* nodes = std::getenv("REDLOCK_NODES");
  asio::io_context io;
  int status = 0;
  asio::co_spawn(io, use_braced_lists(nodes != nullptr ? nodes : "redis://127.0.0.1:6379"),
                 [&](std::exception_ptr e) {
                   if (!e) return;
                   try {
                     std::rethrow_exception(e);
                   } catch (const std::exception& failure) {
                     std::fprintf(stderr, "%s\n", failure.what());
                     status = 1;
                   }
                 });
  io.run();
  return status;
}
