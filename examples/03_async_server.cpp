// 03_async_server: a lock per request inside an existing Asio server.
//
// What it shows
//   - "Embed it in your event loop": an ordinary Asio TCP server (one coroutine per connection,
//     a line protocol) and the redlock::client share one io_context. A request handler simply
//     co_awaits the lock; while it waits, the thread serves every other connection.
//   - Locks per resource: each account has its own lock ("account:<name>"), so requests for
//     different accounts never wait for each other.
//   - Why the lock is needed: the handler reads a balance, waits a little (as a call to a
//     database would), then writes balance + 1. Two requests for one account that overlap there
//     would both write the same value and one increment would be lost. Under the lock none is.
//
// The program runs both sides: it starts the server on a free loopback port, connects a few
// clients that send "INCR <account>" requests concurrently, then checks that every balance equals
// the number of requests made for it, and shuts everything down.
//
// How to run it
//   REDLOCK_NODES=redis://127.0.0.1:6379 ./03_async_server
//   REDLOCK_NODES is a comma-separated list of redis:// URLs, one per independent Redis master;
//   unset, one local node is used. Or, from a build directory configured with tests, against five
//   throwaway nodes:
//     test/support/redis_nodes -- examples/03_async_server
//
// Exits 0 when every balance is right, 1 (with a message) otherwise.

#include "common/nodes.hpp"
#include "common/run.hpp"
#include <redlock/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

// ---------------------------------------------------------------------------------------------
// The server. Protocol, one request per line:
//   "INCR <account>\n"  ->  "<new balance>\n", or "ERR <what is wrong>\n"
// Balances live in memory here; think of them as rows in a store shared by several server
// processes, which is why a distributed lock and not a local mutex guards them.

class account_server {
 public:
  account_server(redlock::client& locks, tcp::endpoint where)
      : locks_(locks),
        acceptor_(locks.get_executor(), where),
        all_stopped_(locks.get_executor(), std::chrono::steady_clock::time_point::max()) {}

  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  const std::map<std::string, long>& balances() const { return balances_; }

  void start() { spawn(accept_loop()); }

  // Stops accepting and waits until every connection has been closed by its client.
  asio::awaitable<void> stop() {
    acceptor_.close();
    // The timer never expires by itself: the last task to end cancels it (see spawn).
    if (running_ > 0) co_await all_stopped_.async_wait(asio::as_tuple(asio::use_awaitable));
  }

 private:
  // Every coroutine of the server is counted, so that stop() can wait for all of them before the
  // server (and the lock client it uses) goes away.
  void spawn(asio::awaitable<void> task) {
    ++running_;
    asio::co_spawn(acceptor_.get_executor(), std::move(task), [this](std::exception_ptr failure) {
      if (failure) {
        try {
          std::rethrow_exception(failure);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "server: %s\n", e.what());
        }
      }
      if (--running_ == 0) all_stopped_.cancel();
    });
  }

  asio::awaitable<void> accept_loop() {
    while (true) {
      auto [failed, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (failed) co_return;  // closed by stop()
      spawn(session(std::move(socket)));
    }
  }

  asio::awaitable<void> session(tcp::socket socket) {
    std::string input;
    while (true) {
      // A bounded buffer: a client sending an endless line gets an error, not all our memory.
      auto [failed, length] = co_await asio::async_read_until(
          socket, asio::dynamic_buffer(input, 1024), '\n', asio::as_tuple(asio::use_awaitable));
      if (failed == asio::error::not_found) {
        constexpr std::string_view too_long = "ERR line too long\n";
        co_await asio::async_write(socket, asio::buffer(too_long),
                                   asio::as_tuple(asio::use_awaitable));
        co_return;
      }
      if (failed) co_return;  // the client closed the connection (or it broke)
      std::string line = input.substr(0, length - 1);
      input.erase(0, length);
      if (line.ends_with('\r')) line.pop_back();  // sent by telnet and `nc -C`
      const std::string reply = co_await handle(std::move(line));
      co_await asio::async_write(socket, asio::buffer(reply), asio::use_awaitable);
    }
  }

  // Takes the line by value: a coroutine's reference parameters may dangle once it suspends.
  asio::awaitable<std::string> handle(std::string line) {
    constexpr std::string_view verb = "INCR ";
    if (!line.starts_with(verb) || line.size() == verb.size()) {
      co_return "ERR expected \"INCR <account>\"\n";
    }
    const std::string account = line.substr(verb.size());

    redlock::lock_options options;
    options.wait = 10s;  // answer with an error rather than keep a client waiting forever
    auto [failed, lease] = co_await locks_.async_acquire("account:" + account, options,
                                                         asio::as_tuple(asio::use_awaitable));
    if (failed) co_return "ERR " + failed.message() + "\n";

    // The read-modify-write the lock protects. The pause stands for a slow store: without the
    // lock, other requests for this account would read the same old balance meanwhile.
    const long balance = balances_[account];
    co_await examples::sleep_for(1ms);
    balances_[account] = balance + 1;

    // The update stands whatever the release says. If too few nodes confirmed the release in
    // time, the keys it could not delete expire with the TTL and only delay the next request for
    // this account; a server logs that and answers.
    auto [release_failed] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
    if (release_failed) {
      std::fprintf(stderr, "release of account:%s: %s\n  %s\n", account.c_str(),
                   release_failed.message().c_str(), lease.diagnostics().c_str());
    }
    co_return std::to_string(balance + 1) + "\n";
  }

  redlock::client& locks_;
  tcp::acceptor acceptor_;
  std::map<std::string, long> balances_;
  std::size_t running_ = 0;
  asio::steady_timer all_stopped_;
};

// ---------------------------------------------------------------------------------------------
// The clients: each opens one connection and sends its requests one after another.

constexpr std::array<std::string_view, 3> accounts = {"alice", "bob", "carol"};
constexpr int client_count = 8;
constexpr int requests_per_client = 30;

asio::awaitable<void> run_client(int id, std::uint16_t port, std::map<std::string, long>& sent) {
  tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect({asio::ip::address_v4::loopback(), port}, asio::use_awaitable);
  std::string input;
  for (int i = 0; i < requests_per_client; ++i) {
    const std::string account(accounts[static_cast<std::size_t>(id + i) % accounts.size()]);
    const std::string request = "INCR " + account + "\n";
    co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
    const std::size_t length = co_await asio::async_read_until(socket, asio::dynamic_buffer(input),
                                                               '\n', asio::use_awaitable);
    const std::string reply = input.substr(0, length - 1);
    input.erase(0, length);
    if (reply.starts_with("ERR")) throw std::runtime_error("server answered: " + reply);
    ++sent[account];
  }
}  // the socket closes here; the server's session sees the end of the stream

asio::awaitable<int> demo(std::vector<redlock::node_config> nodes) {
  const auto executor = co_await asio::this_coro::executor;
  // The lock client lives on the server's own io_context: no extra thread, no blocking call.
  redlock::client locks(executor, std::move(nodes));
  // Fail fast, naming the problem, when the nodes cannot be reached (see reach_quorum).
  const auto unreachable = co_await examples::reach_quorum(locks);
  if (unreachable) {
    std::fprintf(stderr, "cannot reach a quorum of the %zu nodes: %s\n", locks.size(),
                 unreachable.message().c_str());
    co_return 1;
  }
  account_server server(locks, {asio::ip::address_v4::loopback(), 0});  // port 0: any free one
  server.start();
  std::printf("server listening on 127.0.0.1:%u\n", static_cast<unsigned>(server.port()));

  std::map<std::string, long> sent;
  std::vector<asio::awaitable<void>> clients;
  for (int id = 0; id < client_count; ++id) {
    clients.push_back(run_client(id, server.port(), sent));
  }
  const auto start = std::chrono::steady_clock::now();
  std::exception_ptr client_failure;
  try {
    co_await examples::run_all(std::move(clients));
  } catch (const std::exception&) {
    client_failure = std::current_exception();
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);

  // Also after a failure: the server must be idle before it and the lock client go away.
  co_await server.stop();
  if (client_failure) std::rethrow_exception(client_failure);
  std::printf("%d clients sent %d requests in %lld ms\n", client_count,
              client_count * requests_per_client, static_cast<long long>(took.count()));

  int wrong = 0;
  for (const auto& [account, requests] : sent) {
    const auto found = server.balances().find(account);
    const long balance = found == server.balances().end() ? 0 : found->second;
    std::printf("  %-6s requests %ld, balance %ld%s\n", account.c_str(), requests, balance,
                balance == requests ? "" : "  <- updates were lost");
    if (balance != requests) ++wrong;
  }
  if (wrong > 0) {
    std::fprintf(stderr, "%d account(s) lost updates\n", wrong);
    co_return 1;
  }
  std::printf("every balance equals its number of requests: no update was lost\n");
  co_return 0;
}

}  // namespace

int main() {
  auto nodes = examples::nodes_from_environment();

  asio::io_context io;
  int exit_code = 1;
  asio::co_spawn(io, demo(std::move(nodes)), examples::exit_status("03_async_server", exit_code));
  // Returns once the server has stopped and the lock client has closed its connections.
  io.run();
  return exit_code;
}
