// The pipelined per-node connection against real redis-server processes.

#include "integration/prelude.hpp"
#include "net/connection.hpp"
#include "net/writer_turns.hpp"
#include "redlock/error.hpp"
#include "resp/encoder.hpp"
#include "resp/script.hpp"
#include "support/async_test.hpp"
#include "support/encoded_command.hpp"
#include "support/printing.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

namespace rd = redlock::detail;
namespace resp = redlock::resp;
using redlock::test::ms_between;
using redlock::test::redis_server;
using redlock::test::redis_server_options;

std::shared_ptr<rd::connection> make_connection(asio::io_context& io, redlock::node_config node,
                                                rd::connection_options options = {}) {
  return rd::connection::create(io.get_executor(), std::move(node), std::move(options));
}

using redlock::test::command;

asio::awaitable<std::tuple<error_code, resp::value>> exec(
    const std::shared_ptr<rd::connection>& conn, std::string payload,
    std::chrono::milliseconds timeout = 5000ms) {
  co_return co_await conn->async_exec_encoded(std::move(payload), rd::request_options{timeout},
                                              tuple_awaitable);
}

// A sink that records each tag's outcome and when it came, and may issue a request of its own from
// inside an answer, as a failed round's cleanup does.
class recording_sink final : public rd::reply_sink {
 public:
  struct answer {
    error_code ec;
    steady_clock::time_point at;
  };

  void on_reply(std::size_t tag, const error_code& ec, const resp::value&) override {
    answers[tag] = {ec, steady_clock::now()};
    if (then) then(tag);
  }

  std::map<std::size_t, answer> answers;
  std::function<void(std::size_t)> then;
};

// A connection that was up and has seen its server die: in backoff, reconnecting every 10 to
// 50 ms until the server is started again. (A scalar parameter: g++ 12 destroys a coroutine's
// by-value class parameter that has a default argument twice.)
asio::awaitable<std::shared_ptr<rd::connection>> connection_to_a_dead_server(
    asio::io_context& io, redis_server& server, std::size_t max_pending_cleanups = 8192) {
  rd::connection_options options;
  options.reconnect = {10ms, 50ms, 2.0};
  options.max_pending_cleanups = max_pending_cleanups;
  auto conn = make_connection(io, server.config(), options);
  co_await exec(conn, command("PING"));
  server.kill9();
  BOOST_TEST_REQUIRE(co_await eventually(
      [&] { return conn->current_state() == rd::connection::state::backoff; }, 2s));
  co_return conn;
}

// A SET that marks the key as "cleaned", sent as a cleanup (request_options::deliver_for).
rd::request_options cleanup_options(std::chrono::milliseconds deliver_for,
                                    std::chrono::milliseconds timeout = 200ms) {
  rd::request_options options{timeout};
  options.deliver_for = deliver_for;
  return options;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(connection)

BOOST_AUTO_TEST_CASE(round_trip_and_reply_kinds) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = make_connection(io, server.config());
    auto [ec, reply] = co_await exec(conn, command("SET", "k", std::string_view("v\r\n\0x", 5)));
    BOOST_TEST(!ec);
    BOOST_TEST(reply.kind == resp::type::simple_string);
    BOOST_TEST(reply.text == "OK");

    std::tie(ec, reply) = co_await exec(conn, command("GET", "k"));
    BOOST_TEST(reply.kind == resp::type::bulk_string);
    BOOST_TEST(reply.text == std::string("v\r\n\0x", 5));

    std::tie(ec, reply) = co_await exec(conn, command("INCR", "n"));
    BOOST_TEST(reply.kind == resp::type::integer);
    BOOST_TEST(reply.integer == 1);

    std::tie(ec, reply) = co_await exec(conn, command("GET", "missing"));
    BOOST_TEST(reply.is_null());

    co_await exec(conn, command("RPUSH", "list", "a", "b"));
    std::tie(ec, reply) = co_await exec(conn, command("LRANGE", "list", "0", "-1"));
    BOOST_TEST_REQUIRE(reply.kind == resp::type::array);
    BOOST_TEST(reply.elements.size() == 2u);
    BOOST_TEST(reply.elements[1].text == "b");

    // A server error reply is a reply, not a failed request.
    std::tie(ec, reply) = co_await exec(conn, command("INCR", "list"));
    BOOST_TEST(!ec);
    BOOST_TEST(reply.is_error());
    BOOST_TEST(reply.error_code_word() == "WRONGTYPE");

    BOOST_TEST(conn->stats().connects == 1u);
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(ten_thousand_requests_from_100_coroutines_stay_in_order) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = make_connection(io, server.config());
    constexpr int coroutines = 100;
    constexpr int per_coroutine = 100;
    int running = coroutines;
    int mismatches = 0;
    int errors = 0;
    for (int c = 0; c < coroutines; ++c) {
      asio::co_spawn(
          io,
          [&, c]() -> asio::awaitable<void> {
            const std::string counter = fmt::format("counter:{}", c);
            for (int i = 0; i < per_coroutine; ++i) {
              // Alternate two commands whose replies prove both pairing and per-caller order.
              if (i % 2 == 0) {
                const std::string payload = fmt::format("{}/{}", c, i);
                auto [ec, reply] = co_await exec(conn, command("ECHO", payload));
                errors += ec ? 1 : 0;
                mismatches += reply.text == payload ? 0 : 1;
              } else {
                auto [ec, reply] = co_await exec(conn, command("INCR", counter));
                errors += ec ? 1 : 0;
                mismatches += reply.integer == (i + 1) / 2 ? 0 : 1;
              }
            }
            --running;
          },
          asio::detached);
    }
    BOOST_TEST_REQUIRE(co_await eventually([&] { return running == 0; }, 30000ms));
    BOOST_TEST(errors == 0);
    BOOST_TEST(mismatches == 0);
    const auto& stats = conn->stats();
    BOOST_TEST(stats.requests_written == std::uint64_t{coroutines * per_coroutine});
    BOOST_TEST(stats.replies == stats.requests_written);
    // Automatic pipelining: many requests per socket write.
    BOOST_TEST_MESSAGE(
        fmt::format("{} requests in {} writes", stats.requests_written, stats.writes));
    BOOST_TEST(stats.writes * 4 < stats.requests_written);
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(requests_of_one_turn_share_one_write) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = make_connection(io, server.config());
    co_await exec(conn, command("PING"));
    const auto writes_before = conn->stats().writes;

    constexpr int count = 64;
    int done = 0;
    int wrong = 0;
    for (int i = 0; i < count; ++i) {
      conn->async_exec({"ECHO", std::to_string(i)}, {}, [&, i](error_code ec, resp::value reply) {
        ++done;
        wrong += (ec || reply.text != std::to_string(i)) ? 1 : 0;
      });
    }
    BOOST_TEST_REQUIRE(co_await eventually([&] { return done == count; }));
    BOOST_TEST(wrong == 0);
    BOOST_TEST(conn->stats().writes - writes_before == 1u);

    // The server saw them too: its command counter grew by exactly the batch.
    redlock::test::sync_client inspect(server.port());
    auto info = inspect.command({"INFO", "commandstats"}).text;
    BOOST_TEST(info.find("cmdstat_echo:calls=64,") != std::string::npos);
    conn->close();
  });
}

// A client's lock connections share their writers' turns (writer_turns): one posted turn writes
// for every connection woken before it runs. Each connection still writes its requests in one
// write and in order, and one that is closed while the turn is pending writes nothing and fails
// its requests, while the others are answered.
BOOST_AUTO_TEST_CASE(connections_sharing_turns_write_once_each_and_in_order) {
  redis_server first;
  redis_server second;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    rd::connection_options options;
    options.shared_turns = std::make_shared<rd::writer_turns>();
    const std::vector<std::shared_ptr<rd::connection>> conns = {
        make_connection(io, first.config(), options),
        make_connection(io, second.config(), options)};
    for (const auto& conn : conns)
      co_await exec(conn, command("PING"));

    auto issue = [&](int per_connection, std::vector<int>& done, std::vector<int>& wrong,
                     std::vector<error_code>& last_error) {
      for (int i = 0; i < per_connection; ++i) {
        for (std::size_t c = 0; c < conns.size(); ++c) {
          conns[c]->async_exec({"ECHO", std::to_string(i)}, {},
                               [&, c, i](error_code ec, resp::value reply) {
                                 ++done[c];
                                 if (ec) last_error[c] = ec;
                                 wrong[c] += (ec || reply.text != std::to_string(i)) ? 1 : 0;
                               });
        }
      }
    };

    constexpr int count = 32;
    std::vector<std::uint64_t> writes_before;
    for (const auto& conn : conns)
      writes_before.push_back(conn->stats().writes);
    std::vector<int> done(conns.size()), wrong(conns.size());
    std::vector<error_code> last_error(conns.size());
    issue(count, done, wrong, last_error);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return done[0] == count && done[1] == count; }));
    for (std::size_t c = 0; c < conns.size(); ++c) {
      BOOST_TEST(wrong[c] == 0);
      BOOST_TEST(conns[c]->stats().writes - writes_before[c] == 1u);
    }

    // The first connection is closed after its requests woke the shared turn, before it ran.
    std::vector<int> done_after(conns.size()), wrong_after(conns.size());
    std::vector<error_code> error_after(conns.size());
    const auto first_writes = conns[0]->stats().writes;
    issue(count, done_after, wrong_after, error_after);
    conns[0]->close();
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return done_after[0] == count && done_after[1] == count; }));
    BOOST_TEST(conns[0]->stats().writes == first_writes);
    BOOST_TEST(wrong_after[0] == count);
    BOOST_TEST(error_after[0] == asio::error::operation_aborted);
    BOOST_TEST(wrong_after[1] == 0);
    conns[1]->close();
  });
}

// Connections that share their turns and the turn they share do not hold each other: when the
// io_context goes with a turn still pending, both are freed.
BOOST_AUTO_TEST_CASE(an_io_context_destroyed_with_a_shared_turn_pending_frees_the_connection) {
  redis_server server;
  std::weak_ptr<rd::connection> weak_conn;
  std::weak_ptr<rd::writer_turns> weak_turns;
  {
    asio::io_context io;
    rd::connection_options options;
    options.shared_turns = std::make_shared<rd::writer_turns>();
    weak_turns = options.shared_turns;
    auto conn = make_connection(io, server.config(), std::move(options));
    weak_conn = conn;
    bool answered = false;
    conn->async_exec({"PING"}, {}, [&](error_code, resp::value) { answered = true; });
    const auto give_up = steady_clock::now() + 10s;
    while (!answered && steady_clock::now() < give_up)
      io.run_one_for(100ms);
    BOOST_TEST_REQUIRE(answered);
    // Wakes the shared turn, which the io_context never runs.
    conn->async_exec({"PING"}, {}, [](error_code, resp::value) {});
    conn.reset();  // its link's loop holds it now
  }
  BOOST_TEST(weak_conn.expired());
  BOOST_TEST(weak_turns.expired());
}

// A batch goes to the socket directly while the kernel takes it whole. Against a paused server
// the socket buffers fill: what is left of a batch then waits for the socket, and the requests
// issued meanwhile follow it. Every byte must arrive once and in order.
BOOST_AUTO_TEST_CASE(batches_larger_than_the_socket_buffers_arrive_whole_and_in_order) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = make_connection(io, server.config());
    co_await exec(conn, command("PING"));

    // 32 MiB: more than loopback's send and receive buffers hold together.
    constexpr int count = 128;
    constexpr std::size_t value_size = 256 * 1024;
    const auto value_of = [&](int i) {
      std::string value(value_size, static_cast<char>('a' + i % 26));
      value.replace(0, 8, fmt::format("{:08}", i));
      return value;
    };
    server.pause();
    int done = 0;
    int wrong = 0;
    for (int i = 0; i < count; ++i) {
      const std::string key = fmt::format("big:{}", i);
      const std::string value = value_of(i);
      const std::string_view args[] = {"SET", key, value};
      conn->async_exec(args, rd::request_options{30000ms}, [&](error_code ec, resp::value reply) {
        ++done;
        wrong += (ec || reply.text != "OK") ? 1 : 0;
      });
      // A few small requests between the large ones, written in the same batches or after.
      if (i % 16 == 0) {
        conn->async_exec({"ECHO", std::to_string(i)}, rd::request_options{30000ms},
                         [&, i](error_code ec, resp::value reply) {
                           ++done;
                           wrong += (ec || reply.text != std::to_string(i)) ? 1 : 0;
                         });
      }
    }
    // Let the connection fill the buffers and wait for the socket before the server reads.
    co_await sleep_for(200ms);
    BOOST_TEST(done == 0);
    server.resume();
    BOOST_TEST_REQUIRE(co_await eventually([&] { return done == count + count / 16; }, 30000ms));
    BOOST_TEST(wrong == 0);
    BOOST_TEST(conn->stats().connects == 1u);

    redlock::test::sync_client inspect(server.port());
    for (int i : {0, 1, 63, 127}) {
      const auto key = fmt::format("big:{}", i);
      BOOST_TEST(inspect.command({"GET", key}).text == value_of(i), "value of " << key);
    }
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(cancel_before_write_never_sends) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = make_connection(io, server.config());
    co_await exec(conn, command("PING"));
    const auto written_before = conn->stats().requests_written;

    for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                      asio::cancellation_type::total}) {
      asio::cancellation_signal signal;
      bool completed = false;
      error_code result;
      conn->async_exec({"INCR", "never"}, {},
                       asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, resp::value) {
                         completed = true;
                         result = ec;
                       }));
      signal.emit(type);  // same turn: the writer has not run yet
      BOOST_TEST_REQUIRE(co_await eventually([&] { return completed; }));
      BOOST_TEST(result == asio::error::operation_aborted);
    }
    auto [ec, reply] = co_await exec(conn, command("GET", "never"));
    BOOST_TEST(!ec);
    BOOST_TEST(reply.is_null());
    BOOST_TEST(conn->stats().requests_written - written_before == 1u);  // only the GET
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(cancel_after_write_drops_the_late_reply) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = make_connection(io, server.config());
    co_await exec(conn, command("PING"));

    // DEBUG SLEEP holds the server, so the next requests are written but unanswered for a while.
    bool slept = false;
    conn->async_exec({"DEBUG", "SLEEP", "0.4"}, {},
                     [&](error_code ec, resp::value reply) { slept = !ec && reply.text == "OK"; });

    // Total cancellation is not honoured after the write (the command may run), so it is ignored;
    // terminal cancellation completes at once.
    asio::cancellation_signal signal;
    bool completed = false;
    error_code result;
    steady_clock::time_point completed_at;
    conn->async_exec({"INCR", "x"}, {},
                     asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, resp::value) {
                       completed = true;
                       result = ec;
                       completed_at = steady_clock::now();
                     }));
    co_await sleep_for(50ms);
    BOOST_TEST(conn->stats().requests_written >= 3u);
    signal.emit(asio::cancellation_type::total);
    co_await sleep_for(10ms);
    BOOST_TEST(!completed);
    const auto emitted_at = steady_clock::now();
    signal.emit(asio::cancellation_type::terminal);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return completed; }));
    BOOST_TEST(result == asio::error::operation_aborted);
    BOOST_TEST(
        std::chrono::duration_cast<std::chrono::milliseconds>(completed_at - emitted_at).count() <
        200);  // long before DEBUG SLEEP ends

    // The INCR did execute; its reply was dropped and the next reply is matched correctly.
    auto [ec, reply] = co_await exec(conn, command("GET", "x"));
    BOOST_TEST(!ec);
    BOOST_TEST(reply.text == "1");
    BOOST_TEST(slept);
    BOOST_TEST(conn->stats().replies_dropped == 1u);
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(request_deadline_against_a_paused_node) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = make_connection(io, server.config());
    co_await exec(conn, command("PING"));

    server.pause();
    const auto start = steady_clock::now();
    auto [ec, reply] = co_await exec(conn, command("SET", "k", "v"), 200ms);
    const auto elapsed = ms_since(start);
    BOOST_TEST(ec == error::request_timeout);
    BOOST_TEST(reply.text.find(server.config().address()) != std::string::npos);
    BOOST_TEST(elapsed >= 190);
    BOOST_TEST(elapsed < 2000);

    server.resume();
    std::tie(ec, reply) = co_await exec(conn, command("GET", "k"));
    BOOST_TEST(!ec);
    BOOST_TEST(reply.text == "v");  // the timed-out SET ran once the server resumed
    BOOST_TEST(conn->stats().replies_dropped == 1u);
    BOOST_TEST(conn->stats().connects == 1u);
    conn->close();
  });
}

// A request that asks to skip an unresponsive node fails at once, unsent, once another request
// to that node has timed out without an answer; requests that may not be skipped are still sent;
// when the late replies arrive the node is used again.
BOOST_AUTO_TEST_CASE(unresponsive_node_skips_what_may_be_skipped) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = make_connection(io, server.config());
    co_await exec(conn, command("PING"));
    const rd::request_options skippable{200ms, nullptr, true};

    server.pause();
    // Silent, but nothing has timed out yet: both requests are sent, and wait out their deadline.
    const auto written_before = conn->stats().requests_written;
    std::optional<error_code> second;
    conn->async_exec_encoded(command("SET", "second", "1"), skippable,
                             [&](error_code e, resp::value) { second = e; });
    auto [ec, reply] =
        co_await conn->async_exec_encoded(command("SET", "first", "1"), skippable, tuple_awaitable);
    BOOST_TEST(ec == error::request_timeout);
    BOOST_TEST_REQUIRE(co_await eventually([&] { return second.has_value(); }, 1s));
    BOOST_TEST(*second == error::request_timeout);
    BOOST_TEST(conn->stats().requests_written == written_before + 2);
    BOOST_TEST(conn->unresponsive());

    const auto start = steady_clock::now();
    std::tie(ec, reply) = co_await conn->async_exec_encoded(command("SET", "skipped", "1"),
                                                            skippable, tuple_awaitable);
    BOOST_TEST(ec == error::node_unresponsive, ec.message());
    BOOST_TEST(ms_since(start) < 150);  // at once, not after its 200 ms
    BOOST_TEST(reply.text.find(server.config().address()) != std::string::npos);
    BOOST_TEST(reply.text.find("not sent") != std::string::npos, reply.text);
    BOOST_TEST(conn->stats().skipped_unresponsive == 1u);
    BOOST_TEST(conn->stats().requests_written == written_before + 2);

    // One that may not be skipped (a release, in the library) is still sent.
    std::optional<std::tuple<error_code, resp::value>> sent;
    conn->async_exec_encoded(command("SET", "sent", "1"), rd::request_options{10s},
                             [&](error_code e, resp::value r) { sent.emplace(e, std::move(r)); });
    BOOST_TEST(co_await eventually(
        [&] { return conn->stats().requests_written == written_before + 3; }, 1s));

    server.resume();
    BOOST_TEST_REQUIRE(co_await eventually([&] { return sent.has_value(); }, 2s));
    BOOST_TEST(!std::get<0>(*sent), std::get<0>(*sent).message());
    BOOST_TEST(std::get<1>(*sent).text == "OK");
    // The late replies are in: the node answers again and is asked again.
    BOOST_TEST(!conn->unresponsive());
    std::tie(ec, reply) = co_await conn->async_exec_encoded(
        command("MGET", "first", "second", "skipped", "sent"), skippable, tuple_awaitable);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST_REQUIRE(reply.elements.size() == 4u);
    BOOST_TEST(reply.elements[0].text == "1");  // the timed-out SETs ran late
    BOOST_TEST(reply.elements[1].text == "1");
    BOOST_TEST(reply.elements[2].is_null());  // the skipped one never ran
    BOOST_TEST(reply.elements[3].text == "1");
    BOOST_TEST(conn->stats().skipped_unresponsive == 1u);
    BOOST_TEST(conn->stats().connects == 1u);
    conn->close();
  });
}

// A request that timed out behind a connect attempt makes the node unresponsive until that attempt
// ends: the kernel accepts for a stopped server, but the handshake hangs.
BOOST_AUTO_TEST_CASE(unresponsive_while_connecting) {
  redis_server server;
  server.pause();
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    rd::connection_options options;
    options.connect_timeout = 5s;
    auto conn = make_connection(io, server.config(), options);
    const rd::request_options skippable{100ms, nullptr, true};
    auto [ec, reply] =
        co_await conn->async_exec_encoded(command("PING"), skippable, tuple_awaitable);
    BOOST_TEST(ec == error::request_timeout);  // queued behind the connect, timed out unsent
    const auto start = steady_clock::now();
    std::tie(ec, reply) =
        co_await conn->async_exec_encoded(command("PING"), skippable, tuple_awaitable);
    BOOST_TEST(ec == error::node_unresponsive, ec.message());
    BOOST_TEST(ms_since(start) < 80);
    BOOST_TEST(reply.text.find("waiting for the connection") != std::string::npos, reply.text);
    server.resume();
    std::tie(ec, reply) = co_await exec(conn, command("PING"));
    BOOST_TEST(!ec, ec.message());
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(node_killed_mid_pipeline_fails_in_flight_then_recovers) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    rd::connection_options options;
    options.reconnect = {10ms, 100ms, 2.0};
    auto conn = make_connection(io, server.config(), options);
    co_await exec(conn, command("PING"));

    server.pause();
    constexpr int in_flight = 50;
    int failed = 0;
    int other = 0;
    for (int i = 0; i < in_flight; ++i) {
      conn->async_exec({"INCR", "n"}, {}, [&](error_code ec, resp::value reply) {
        if (ec == error::connection_lost && reply.text.find("127.0.0.1") != std::string::npos) {
          ++failed;
        } else {
          ++other;
        }
      });
    }
    co_await sleep_for(50ms);
    server.kill9();
    BOOST_TEST_REQUIRE(co_await eventually([&] { return failed + other == in_flight; }));
    BOOST_TEST(failed == in_flight);

    // While the node is down, requests fail fast instead of waiting for their deadline.
    for (int i = 0; i < 20; ++i) {
      const auto start = steady_clock::now();
      auto [ec, reply] = co_await exec(conn, command("PING"), 3000ms);
      BOOST_TEST(ec.failed());
      BOOST_TEST(ms_since(start) < 1000);
      co_await sleep_for(5ms);
    }

    server.start();
    bool recovered = false;
    for (int attempt = 0; attempt < 500 && !recovered; ++attempt) {
      auto [ec, reply] = co_await exec(conn, command("PING"), 1000ms);
      recovered = !ec && reply.text == "PONG";
      if (!recovered) co_await sleep_for(20ms);
    }
    BOOST_TEST(recovered);
    BOOST_TEST(conn->stats().connects >= 2u);
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(health_check_reopens_a_hung_connection) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    rd::connection_options options;
    options.health_check_timeout = 300ms;
    options.reconnect = {10ms, 50ms, 2.0};
    options.connect_timeout = 200ms;
    auto conn = make_connection(io, server.config(), options);
    co_await exec(conn, command("PING"));

    server.pause();
    const auto start = steady_clock::now();
    auto [ec, reply] = co_await exec(conn, command("PING"), 0ms);  // no deadline of its own
    BOOST_TEST(ec == error::connection_lost);
    BOOST_TEST(reply.text.find("no reply") != std::string::npos);
    BOOST_TEST(ms_since(start) >= 290);
    BOOST_TEST(ms_since(start) < 3000);

    server.resume();
    bool recovered = false;
    for (int attempt = 0; attempt < 200 && !recovered; ++attempt) {
      std::tie(ec, reply) = co_await exec(conn, command("PING"), 1000ms);
      recovered = !ec;
      if (!recovered) co_await sleep_for(20ms);
    }
    BOOST_TEST(recovered);
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(password_auth) {
  redis_server_options options;
  options.password = "s3cret";
  redis_server server(options);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto good = server.config();
    auto conn = make_connection(io, good);
    auto [ec, reply] = co_await exec(conn, command("PING"));
    BOOST_TEST(!ec);
    BOOST_TEST(reply.text == "PONG");
    conn->close();

    auto wrong = good;
    wrong.password = "nope";
    conn = make_connection(io, wrong);
    std::tie(ec, reply) = co_await exec(conn, command("PING"));
    BOOST_TEST(ec == error::auth_failed);
    BOOST_TEST(reply.text.find("WRONGPASS") != std::string::npos);
    BOOST_TEST(reply.text.find(good.address()) != std::string::npos);
    BOOST_TEST(reply.text.find("nope") == std::string::npos);
    conn->close();

    auto missing = good;
    missing.password.clear();
    conn = make_connection(io, missing);
    std::tie(ec, reply) = co_await exec(conn, command("PING"));
    BOOST_TEST(ec == error::auth_failed);
    BOOST_TEST(reply.text.find("NOAUTH") != std::string::npos);
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(acl_user_auth) {
  redis_server_options options;
  options.acl_users = {"alice on >wonder ~* &* +@all"};
  redis_server server(options);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto node = server.config();
    node.username = "alice";
    node.password = "wonder";
    auto conn = make_connection(io, node);
    auto [ec, reply] = co_await exec(conn, command("ACL", "WHOAMI"));
    BOOST_TEST(!ec);
    BOOST_TEST(reply.text == "alice");
    conn->close();

    node.password = "rabbit";
    conn = make_connection(io, node);
    std::tie(ec, reply) = co_await exec(conn, command("PING"));
    BOOST_TEST(ec == error::auth_failed);
    BOOST_TEST(reply.text.find("WRONGPASS") != std::string::npos);
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(select_database) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto node = server.config();
    node.database = 3;
    auto conn = make_connection(io, node);
    auto [ec, reply] = co_await exec(conn, command("SET", "in-db-3", "yes"));
    BOOST_TEST(!ec);
    conn->close();

    redlock::test::sync_client inspect(server.port());
    BOOST_TEST(inspect.command({"GET", "in-db-3"}).is_null());
    inspect.command({"SELECT", "3"});
    BOOST_TEST(inspect.command({"GET", "in-db-3"}).text == "yes");

    node.database = 99;
    conn = make_connection(io, node);
    std::tie(ec, reply) = co_await exec(conn, command("PING"));
    BOOST_TEST(ec == error::select_failed);
    BOOST_TEST(reply.text.find("SELECT") != std::string::npos);
    BOOST_TEST(reply.text.find("out of range") != std::string::npos);
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(connection_refused_names_the_node) {
  std::uint16_t port = 0;
  {
    redis_server server;
    port = server.port();
  }
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::node_config node;
    node.port = port;
    auto conn = make_connection(io, node);
    auto [ec, reply] = co_await exec(conn, command("PING"));
    BOOST_TEST(ec == asio::error::connection_refused);
    BOOST_TEST(reply.text.find(node.address()) != std::string::npos);
    BOOST_TEST(conn->last_error().find("connect failed") != std::string::npos);
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(connect_timeout_against_a_paused_node) {
  redis_server server;
  server.pause();  // the kernel still accepts; the handshake never gets an answer
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    rd::connection_options options;
    options.connect_timeout = 300ms;
    auto conn = make_connection(io, server.config(), options);
    const auto start = steady_clock::now();
    auto [ec, reply] = co_await exec(conn, command("PING"), 0ms);
    BOOST_TEST(ec == error::connect_timeout);
    BOOST_TEST(reply.text.find("timed out") != std::string::npos);
    BOOST_TEST(ms_since(start) >= 290);
    BOOST_TEST(ms_since(start) < 3000);
    conn->close();
  });
  server.resume();
}

BOOST_AUTO_TEST_CASE(evalsha_falls_back_to_eval_after_script_flush) {
  redis_server server;
  redlock::test::sync_client inspect(server.port());
  auto eval_calls = [&] {
    const auto info = inspect.command({"INFO", "commandstats"}).text;
    const auto at = info.find("cmdstat_eval:calls=");
    return at == std::string::npos ? 0 : std::stoi(info.substr(at + 19));
  };
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = make_connection(io, server.config());
    const rd::script lua("return redis.call('SET', KEYS[1], ARGV[1]) and ARGV[1]");
    const std::string_view keys[] = {"scripted"};
    const std::string_view args[] = {"value\r\n"};
    auto run_script = [&] {
      return rd::async_eval(conn, lua, keys, args, {2000ms}, tuple_awaitable);
    };

    auto [ec, reply] = co_await run_script();  // NOSCRIPT, then EVAL
    BOOST_TEST(!ec);
    BOOST_TEST(reply.text == "value\r\n");
    BOOST_TEST(eval_calls() == 1);

    std::tie(ec, reply) = co_await run_script();  // EVALSHA hits
    BOOST_TEST(reply.text == "value\r\n");
    BOOST_TEST(eval_calls() == 1);

    inspect.command({"SCRIPT", "FLUSH"});
    std::tie(ec, reply) = co_await run_script();  // NOSCRIPT again, then EVAL
    BOOST_TEST(!ec);
    BOOST_TEST(reply.text == "value\r\n");
    BOOST_TEST(eval_calls() == 2);
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(close_aborts_everything_pending) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = make_connection(io, server.config());
    co_await exec(conn, command("PING"));
    server.pause();
    int aborted = 0;
    for (int i = 0; i < 10; ++i) {
      conn->async_exec({"PING"}, {}, [&](error_code ec, resp::value) {
        aborted += ec == asio::error::operation_aborted ? 1 : 0;
      });
    }
    co_await sleep_for(20ms);  // written by now
    conn->close();
    BOOST_TEST_REQUIRE(co_await eventually([&] { return aborted == 10; }));
    auto [ec, reply] = co_await exec(conn, command("PING"));
    BOOST_TEST(ec == asio::error::operation_aborted);
    BOOST_TEST((conn->current_state() == rd::connection::state::closed));
  });
  server.resume();
}

BOOST_AUTO_TEST_CASE(malformed_reply_breaks_only_the_link) {
  // A fake server: answers the handshake, then sends bytes that are not RESP.
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  redlock::node_config node;
  node.port = acceptor.local_endpoint().port();
  int accepted = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (;;) {
          auto socket = co_await acceptor.async_accept(asio::use_awaitable);
          ++accepted;
          char buffer[1024];
          co_await socket.async_read_some(asio::buffer(buffer), asio::use_awaitable);  // SETNAME
          co_await asio::async_write(socket, asio::buffer(std::string("+OK\r\n")),
                                     asio::use_awaitable);
          co_await socket.async_read_some(asio::buffer(buffer), asio::use_awaitable);
          co_await asio::async_write(socket, asio::buffer(std::string("?bogus\r\n")),
                                     asio::use_awaitable);
          co_await sleep_for(50ms);
        }
      },
      asio::detached);

  auto conn = rd::connection::create(io.get_executor(), node);
  bool done = false;
  conn->async_exec({"PING"}, {}, [&](error_code ec, resp::value reply) {
    done = true;
    BOOST_TEST(ec == error::connection_lost);
    BOOST_TEST(reply.text.find("resp") != std::string::npos);
    conn->close();
    io.stop();
  });
  io.run_for(10s);
  BOOST_TEST(done);
  BOOST_TEST(accepted == 1);
}

// Runs `f` on the io_context's thread and returns what it returned: a connection is only ever
// used from its executor, also when its result is awaited from another thread.
template <class F>
auto on_io_thread(asio::io_context& io, F f) {
  std::packaged_task<decltype(f())()> task(std::move(f));
  auto result = task.get_future();
  asio::post(io, [&task] { task(); });
  return result.get();
}

BOOST_AUTO_TEST_CASE(every_completion_token_works, *boost::unit_test::label("threaded")) {
  redis_server server;
  asio::io_context io;
  auto conn = rd::connection::create(io.get_executor(), server.config());
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });

  // use_future, waited for on another thread
  auto future = on_io_thread(io, [&] {
    return conn->async_exec({"ECHO", "future"}, {}, asio::use_future);
  });
  BOOST_TEST(future.get().text == "future");

  // deferred: nothing happens until it is invoked
  std::promise<std::string> from_deferred;
  on_io_thread(io, [&] {
    auto deferred = conn->async_exec({"ECHO", "deferred"}, {}, asio::deferred);
    BOOST_TEST(conn->stats().requests_written == 1u);  // the ECHO above only
    std::move(deferred)([&](error_code, resp::value v) { from_deferred.set_value(v.text); });
    return 0;
  });
  BOOST_TEST(from_deferred.get_future().get() == "deferred");

  // plain callback
  std::promise<std::string> from_callback;
  on_io_thread(io, [&] {
    conn->async_exec({"ECHO", "callback"}, {}, [&](error_code ec, resp::value v) {
      from_callback.set_value(ec ? ec.message() : v.text);
    });
    return 0;
  });
  BOOST_TEST(from_callback.get_future().get() == "callback");

  // use_future surfaces a request error as an exception
  server.pause();
  auto timed_out =
      on_io_thread(io, [&] { return conn->async_exec({"PING"}, {100ms}, asio::use_future); });
  BOOST_CHECK_THROW(timed_out.get(), boost::system::system_error);
  server.resume();

  asio::post(io, [&] { conn->close(); });
  work.reset();
  runner.join();
}

// Deadlines fire on time, also when an earlier request's timeout issues a new request from inside
// its answer (a failed round's cleanup): that request's later deadline must not delay the ones
// already waiting.
BOOST_AUTO_TEST_CASE(deadlines_fire_on_time_when_a_timeout_issues_a_request) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = make_connection(io, server.config());
    co_await exec(conn, command("PING"));
    server.pause();
    static const std::string ping = command("PING");
    recording_sink sink;
    const rd::request_options deadline{400ms};
    sink.then = [&](std::size_t tag) {
      if (tag == 0) conn->exec_direct(ping, deadline, sink, 2, steady_clock::now());
    };
    const auto start = steady_clock::now();
    conn->exec_direct(ping, deadline, sink, 0, start);
    co_await sleep_for(200ms);
    conn->exec_direct(ping, deadline, sink, 1, steady_clock::now());
    BOOST_TEST_REQUIRE(co_await eventually([&] { return sink.answers.count(2) == 1; }, 2s));
    BOOST_TEST(sink.answers[1].ec == error::request_timeout);
    // Due at 600 ms; the request issued at 400 ms is due at 800 ms.
    const auto second = ms_between(start, sink.answers[1].at);
    BOOST_TEST(second >= 590);
    BOOST_TEST(second < 720, "the second deadline fired at " << second << " ms, not 600");
    server.resume();
    conn->close();
  });
}

// A cleanup issued while the node is down is kept, and sent right after the next handshake
// ahead of what was issued meanwhile; one issued while connected whose link then breaks is sent
// again. Its caller still gets its outcome at once.
BOOST_AUTO_TEST_CASE(cleanups_wait_for_a_node_that_is_down) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = co_await connection_to_a_dead_server(io, server);
    // Unsent either way: refused at once while the node is down, or failed with the connect
    // error when the request met one of the reconnect attempts.
    auto unsent = [](error_code ec) {
      return ec == error::not_connected || ec == asio::error::connection_refused;
    };
    auto [ec, reply] = co_await conn->async_exec_encoded(command("SET", "cleaned", "1"),
                                                         cleanup_options(10s), tuple_awaitable);
    BOOST_TEST(unsent(ec), ec.message());
    BOOST_TEST(conn->stats().cleanups_kept == 1u);
    std::tie(ec, reply) = co_await conn->async_exec_encoded(
        command("SET", "ordinary", "1"), rd::request_options{200ms}, tuple_awaitable);
    BOOST_TEST(unsent(ec), ec.message());

    server.start();
    BOOST_TEST_REQUIRE(co_await eventually(
        [&] { return conn->current_state() == rd::connection::state::ready; }, 3s));
    std::tie(ec, reply) = co_await exec(conn, command("MGET", "cleaned", "ordinary"));
    BOOST_TEST_REQUIRE(reply.elements.size() == 2u);
    BOOST_TEST(reply.elements[0].text == "1");  // delivered after the reconnect
    BOOST_TEST(reply.elements[1].is_null());    // an ordinary request is not kept
    conn->close();
  });
}

// A kept cleanup is dropped once its key must have expired (deliver_for after the node first
// failed it), and beyond max_pending_cleanups the oldest go first.
BOOST_AUTO_TEST_CASE(kept_cleanups_are_bounded_in_age_and_number) {
  redis_server server;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = co_await connection_to_a_dead_server(io, server, 4);

    auto keep = [&](const char* key, std::chrono::milliseconds deliver_for) {
      return conn->async_exec_encoded(command("SET", key, "1"), cleanup_options(deliver_for),
                                      tuple_awaitable);
    };
    co_await keep("c1", 10s);
    co_await keep("c2", 10s);
    co_await keep("c3", 10s);
    co_await keep("short", 100ms);
    co_await keep("c4", 10s);
    BOOST_TEST(conn->stats().cleanups_dropped == 1u);  // c1: the oldest, over the bound
    co_await sleep_for(200ms);                         // "short" has expired meanwhile

    server.start();
    BOOST_TEST_REQUIRE(co_await eventually(
        [&] { return conn->current_state() == rd::connection::state::ready; }, 3s));
    auto [ec, reply] = co_await exec(conn, command("MGET", "c1", "c2", "c3", "short", "c4"));
    BOOST_TEST_REQUIRE(reply.elements.size() == 5u);
    BOOST_TEST(reply.elements[0].is_null());
    BOOST_TEST(reply.elements[1].text == "1");
    BOOST_TEST(reply.elements[2].text == "1");
    BOOST_TEST(reply.elements[3].is_null());
    BOOST_TEST(reply.elements[4].text == "1");
    BOOST_TEST(conn->stats().cleanups_dropped == 2u);
    conn->close();
  });
}

// A cleanup whose deadline passes before it is written (queued behind a connect that hangs) is
// answered with request_timeout, but still written once the connection is up.
BOOST_AUTO_TEST_CASE(a_cleanup_is_written_after_its_deadline) {
  redis_server server;
  server.pause();  // the kernel accepts, the handshake hangs
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    rd::connection_options options;
    options.connect_timeout = 5s;
    auto conn = make_connection(io, server.config(), options);
    auto [ec, reply] = co_await conn->async_exec_encoded(
        command("SET", "late", "1"), cleanup_options(10s, 100ms), tuple_awaitable);
    BOOST_TEST(ec == error::request_timeout, ec.message());
    auto [ordinary_ec, ordinary] = co_await conn->async_exec_encoded(
        command("SET", "skipped", "1"), rd::request_options{100ms}, tuple_awaitable);
    BOOST_TEST(ordinary_ec == error::request_timeout);
    server.resume();
    std::tie(ec, reply) = co_await exec(conn, command("MGET", "late", "skipped"));
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST_REQUIRE(reply.elements.size() == 2u);
    BOOST_TEST(reply.elements[0].text == "1");
    BOOST_TEST(reply.elements[1].is_null());  // an ordinary request that timed out unsent
    conn->close();
  });
}

BOOST_AUTO_TEST_SUITE_END()
