// Malformed and unexpected replies, from a scripted fake server: first against one
// redlock::detail::connection, then against a redlock::client whose majority is real Redis.

#include "integration/prelude.hpp"
#include "net/connection.hpp"
#include "redlock/client.hpp"
#include "redlock/error.hpp"
#include "resp/encoder.hpp"
#include "resp/script.hpp"
#include "support/async_test.hpp"
#include "support/encoded_command.hpp"
#include "support/fake_server.hpp"
#include "support/printing.hpp"
#include "support/reach.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"
#include "support/text_contains.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace rd = redlock::detail;
namespace resp = redlock::resp;
namespace fake = redlock::test::fake;
using redlock::test::fake_command;
using redlock::test::fake_reply;
using fake_node = redlock::test::fake_server;  // the suite below is named fake_server

using redlock::test::command;

// Reconnects quickly, so the tests do not wait for the default backoff.
rd::connection_options fast_options() {
  rd::connection_options options;
  options.reconnect = {5ms, 50ms, 2.0};
  return options;
}

std::shared_ptr<rd::connection> connect_to(asio::io_context& io, const fake_node& server,
                                           rd::connection_options options = fast_options()) {
  return rd::connection::create(io.get_executor(), server.config(), std::move(options));
}

// One request's completion, counted: a request must complete exactly once.
struct outcome {
  int completions = 0;
  error_code ec;
  resp::value reply;
};
using outcome_ptr = std::shared_ptr<outcome>;

outcome_ptr issue(const std::shared_ptr<rd::connection>& conn, std::string payload,
                  std::chrono::milliseconds timeout = 2000ms) {
  auto result = std::make_shared<outcome>();
  conn->async_exec_encoded(std::move(payload), rd::request_options{timeout},
                           [result](error_code ec, resp::value reply) {
                             ++result->completions;
                             result->ec = ec;
                             result->reply = std::move(reply);
                           });
  return result;
}

asio::awaitable<void> wait_for(const outcome_ptr& o) {
  BOOST_TEST_REQUIRE(co_await eventually([&] { return o->completions > 0; }, 5000ms));
}

asio::awaitable<outcome_ptr> exec_and_wait(const std::shared_ptr<rd::connection>& conn,
                                           std::string payload,
                                           std::chrono::milliseconds timeout = 2000ms) {
  auto o = issue(conn, std::move(payload), timeout);
  co_await wait_for(o);
  co_return o;
}

// Waits until the connection has been re-established `connects` times in total, as seen by both
// ends.
asio::awaitable<bool> reconnected(const std::shared_ptr<rd::connection>& conn,
                                  const fake_node& server, std::size_t connects) {
  co_return co_await eventually(
      [&] {
        return server.connections_accepted() >= connects && conn->stats().connects >= connects &&
               conn->current_state() == rd::connection::state::ready;
      },
      5000ms);
}

// Answers ECHO with its argument and GET with `get_reply`.
redlock::test::fake_script echo_and(fake_reply get_reply) {
  return fake::with_handshake([get_reply](const fake_command& cmd, std::size_t) -> fake_reply {
    if (fake::is(cmd, "ECHO") && cmd.size() == 2) return fake::bulk(cmd[1]);
    if (fake::is(cmd, "GET")) return get_reply;
    return fake::error("ERR unexpected command");
  });
}

using redlock::test::contains;

// A lock node gone wrong: `on_set` answers SET; releases (EVALSHA) succeed.
redlock::test::fake_script lock_node(fake_reply on_set) {
  return fake::with_handshake([on_set](const fake_command& cmd, std::size_t) -> fake_reply {
    if (fake::is(cmd, "SET")) return on_set;
    if (fake::is(cmd, "EVALSHA") || fake::is(cmd, "EVAL")) return fake::integer(1);
    return fake::error("ERR unexpected command");
  });
}

redlock::client_options fault_client_options(std::chrono::milliseconds node_timeout = 500ms) {
  redlock::client_options options;
  options.node_timeout = node_timeout;
  options.reconnect = {5ms, 50ms, 2.0};
  return options;
}

redlock::lock_options test_lock() {
  redlock::lock_options options;
  options.ttl = 10000ms;
  options.auto_renew = false;
  return options;
}

std::string get_key(std::uint16_t port, const std::string& key) {
  redlock::test::sync_client inspect(port);
  return inspect.command({"GET", key}).text;
}

bool no_keys(redlock::test::redis_fleet& fleet) {
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    redlock::test::sync_client inspect(fleet[i].port());
    if (!inspect.command({"KEYS", "*"}).elements.empty()) return false;
  }
  return true;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(fake_server_replies)

BOOST_AUTO_TEST_CASE(answers_the_handshake_and_counts_commands) {
  fake_node server(echo_and(fake::null_bulk()));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = connect_to(io, server);
    auto a = co_await exec_and_wait(conn, command("ECHO", "hello"));
    BOOST_TEST(!a->ec);
    BOOST_TEST(a->reply.text == "hello");
    auto b = co_await exec_and_wait(conn, command("GET", "k"));
    BOOST_TEST(b->reply.is_null());
    BOOST_TEST(server.connections_accepted() == 1u);
    BOOST_TEST(server.commands_received() == 3u);
    BOOST_TEST(server.commands_received("client") == 1u);
    BOOST_TEST(server.commands_received("ECHO") == 1u);
    BOOST_TEST(server.commands_received("SET") == 0u);
    const auto log = server.log();
    BOOST_TEST_REQUIRE(log.size() == 3u);
    BOOST_TEST((log[0].command == fake_command{"CLIENT", "SETNAME", "redlock-asio"}));
    BOOST_TEST((log[1].command == fake_command{"ECHO", "hello"}));
    BOOST_TEST(log[2].connection == 0u);
    conn->close();
  });
  BOOST_TEST(server.protocol_errors() == 0u);
}

// Bytes that are not RESP: the request they answer, and every request in flight behind it, fail
// with connection_lost (never with another request's reply), the link is reopened and later
// requests work.
BOOST_AUTO_TEST_CASE(malformed_reply_fails_in_flight_requests_and_reconnects) {
  struct test_case {
    const char* name;
    fake_reply reply;
    const char* cause;  // part of the failed request's text
  };
  const std::vector<test_case> cases = {
      {"negative length", fake::negative_length(), "resp: negative"},
      {"huge length", fake::huge_length(), "exceeds limit"},
      {"missing CRLF", fake::missing_crlf(), "resp: missing CRLF"},
      {"CR without LF", fake::bare_cr(), "resp: CR not followed by LF"},
      {"unknown type byte", fake::garbage(), "resp: unknown type byte"},
      {"reset mid-reply", fake::then_reset("$5\r\nhel"), ""},
      {"close mid-reply", fake::then_close("$5\r\nhel"), "closed by the server"},
      {"malformed, one byte at a time", fake::one_byte_at_a_time(fake::huge_length()),
       "exceeds limit"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      fake_node server(echo_and(c.reply));
      run_async(
          [&](asio::io_context& io) -> asio::awaitable<void> {
            auto conn = connect_to(io, server);
            // Issued in one turn: both go out in one write, so the ECHO is in flight when the
            // GET's reply breaks the link.
            auto broken = issue(conn, command("GET", "k"));
            auto behind = issue(conn, command("ECHO", "behind"));
            co_await wait_for(broken);
            co_await wait_for(behind);
            BOOST_TEST(broken->ec == error::connection_lost);
            BOOST_TEST(contains(broken->reply.text, std::to_string(server.port())));
            BOOST_TEST(contains(broken->reply.text, c.cause), broken->reply.text);
            BOOST_TEST(behind->ec == error::connection_lost);
            BOOST_TEST(contains(conn->last_error(), c.cause), conn->last_error());

            BOOST_TEST_REQUIRE(co_await reconnected(conn, server, 2));
            auto later = co_await exec_and_wait(conn, command("ECHO", "later"));
            BOOST_TEST(!later->ec);
            BOOST_TEST(later->reply.text == "later");

            co_await sleep_for(30ms);  // a second completion would show up by now
            BOOST_TEST(broken->completions == 1);
            BOOST_TEST(behind->completions == 1);
            BOOST_TEST(later->completions == 1);
            BOOST_TEST(server.connections_accepted() == 2u);
            conn->close();
          },
          std::chrono::seconds(20));
    }
  }
}

// Error replies are answers: the request completes with success and the error reply as its value
// (connection.hpp), and the link stays up.
BOOST_AUTO_TEST_CASE(error_replies_are_values_and_keep_the_link) {
  struct test_case {
    std::string reply;
    std::string_view code_word;
  };
  const std::vector<test_case> cases = {
      {fake::noscript(), "NOSCRIPT"},
      {fake::loading(), "LOADING"},
      {fake::busy(), "BUSY"},
      {fake::readonly(), "READONLY"},
      {fake::oom(), "OOM"},
      {fake::noauth(), "NOAUTH"},
      {fake::error("ERR no such thing"), "ERR"},
      {"!21\r\nSYNTAX invalid syntax\r\n", "SYNTAX"},  // RESP3 blob error
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.code_word) {
      fake_node server(echo_and(c.reply));
      run_async([&](asio::io_context& io) -> asio::awaitable<void> {
        auto conn = connect_to(io, server);
        auto failed = co_await exec_and_wait(conn, command("GET", "k"));
        BOOST_TEST(!failed->ec);
        BOOST_TEST(failed->reply.is_error());
        BOOST_TEST(failed->reply.error_code_word() == c.code_word);
        auto next = co_await exec_and_wait(conn, command("ECHO", "next"));
        BOOST_TEST(next->reply.text == "next");
        BOOST_TEST(server.connections_accepted() == 1u);
        BOOST_TEST(conn->stats().connects == 1u);
        conn->close();
      });
    }
  }
}

// Well-formed replies of a kind the command never gets (an integer for SET, RESP3 frames from a
// RESP2 connection) are delivered as they are; pushes belong to no request and are skipped.
BOOST_AUTO_TEST_CASE(unexpected_but_valid_replies_keep_the_link) {
  struct test_case {
    const char* name;
    std::string reply;
    resp::type kind;
  };
  const std::vector<test_case> cases = {
      {"integer for SET", fake::wrong_type_for_set(), resp::type::integer},
      {"RESP3 null", fake::resp3_null(), resp::type::null},
      {"RESP3 map", fake::resp3_map(), resp::type::map},
      {"push before the reply", fake::resp3_push("hello") + fake::bulk("x"),
       resp::type::bulk_string},
      {"push after the reply", fake::bulk("x") + fake::resp3_push("late"), resp::type::bulk_string},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      fake_node server(echo_and(c.reply));
      run_async([&](asio::io_context& io) -> asio::awaitable<void> {
        auto conn = connect_to(io, server);
        auto odd = co_await exec_and_wait(conn, command("GET", "k"));
        BOOST_TEST(!odd->ec);
        BOOST_TEST(odd->reply.kind == c.kind);
        if (c.kind == resp::type::bulk_string) BOOST_TEST(odd->reply.text == "x");
        if (c.kind == resp::type::map) BOOST_TEST(odd->reply.elements.size() == 2u);
        if (c.kind == resp::type::integer) BOOST_TEST(odd->reply.integer == 1);
        auto next = co_await exec_and_wait(conn, command("ECHO", "next"));
        BOOST_TEST(next->reply.text == "next");
        co_await sleep_for(20ms);
        BOOST_TEST(odd->completions == 1);
        BOOST_TEST(server.connections_accepted() == 1u);
        conn->close();
      });
    }
  }
}

// A reply nobody asked for cannot be paired with a request: the request it followed keeps its own
// answer, the link is dropped (the stream can no longer be trusted) and reopened.
BOOST_AUTO_TEST_CASE(unsolicited_extra_reply_drops_the_link) {
  fake_node server(fake::with_handshake([](const fake_command& cmd, std::size_t) {
    if (fake::is(cmd, "ECHO") && cmd[1] == "twice")
      return fake_reply(fake::bulk("a") + "+EXTRA\r\n");
    return fake_reply(fake::bulk(cmd.back()));
  }));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = connect_to(io, server);
    auto twice = co_await exec_and_wait(conn, command("ECHO", "twice"));
    BOOST_TEST(!twice->ec);
    BOOST_TEST(twice->reply.text == "a");
    BOOST_TEST_REQUIRE(co_await reconnected(conn, server, 2));
    BOOST_TEST(contains(conn->last_error(), "unsolicited"), conn->last_error());
    auto next = co_await exec_and_wait(conn, command("ECHO", "next"));
    BOOST_TEST(!next->ec);
    BOOST_TEST(next->reply.text == "next");
    co_await sleep_for(20ms);
    BOOST_TEST(twice->completions == 1);
    BOOST_TEST(next->completions == 1);
    conn->close();
  });
}

// A reply that arrives after its request timed out is read and dropped; the next request gets its
// own reply, on the same link.
BOOST_AUTO_TEST_CASE(late_reply_is_dropped_not_paired_with_the_next_request) {
  fake_node server(fake::with_handshake([](const fake_command& cmd, std::size_t) {
    if (cmd.size() == 2 && cmd[1] == "slow") return fake::delayed(fake::bulk("slow"), 600ms);
    return fake_reply(fake::bulk(cmd.back()));
  }));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = connect_to(io, server);
    const auto start = std::chrono::steady_clock::now();
    auto slow = co_await exec_and_wait(conn, command("ECHO", "slow"), 100ms);
    BOOST_TEST(slow->ec == error::request_timeout);
    BOOST_TEST(redlock::test::ms_since(start) < 550);  // did not wait for the reply
    auto fast = co_await exec_and_wait(conn, command("ECHO", "fast"));
    BOOST_TEST(!fast->ec);
    BOOST_TEST(fast->reply.text == "fast");
    BOOST_TEST(conn->stats().replies_dropped == 1u);
    co_await sleep_for(20ms);
    BOOST_TEST(slow->completions == 1);
    BOOST_TEST(fast->completions == 1);
    BOOST_TEST(server.connections_accepted() == 1u);
    BOOST_TEST(server.commands_received("ECHO") == 2u);
    conn->close();
  });
}

// A reply that never completes ("+OK" without CRLF) cannot hang anyone: the request times out,
// the health check declares the link dead and reopens it.
BOOST_AUTO_TEST_CASE(unterminated_reply_times_out_and_the_link_recovers) {
  fake_node server(echo_and(fake::unterminated()));
  auto options = fast_options();
  options.health_check_timeout = 300ms;
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = connect_to(io, server, options);
    auto stuck = co_await exec_and_wait(conn, command("GET", "k"), 100ms);
    BOOST_TEST(stuck->ec == error::request_timeout);
    BOOST_TEST_REQUIRE(co_await reconnected(conn, server, 2));
    BOOST_TEST(contains(conn->last_error(), "no reply"), conn->last_error());
    auto next = co_await exec_and_wait(conn, command("ECHO", "next"));
    BOOST_TEST(next->reply.text == "next");
    BOOST_TEST(stuck->completions == 1);
    conn->close();
  });
}

BOOST_AUTO_TEST_CASE(replies_sent_one_byte_at_a_time_parse) {
  fake_node server([](const fake_command& cmd, std::size_t) -> fake_reply {
    if (auto handshake = fake::handshake_reply(cmd)) {
      return fake::one_byte_at_a_time(handshake->bytes);
    }
    if (fake::is(cmd, "LRANGE")) return fake::one_byte_at_a_time("*2\r\n$1\r\na\r\n:5\r\n");
    return fake::one_byte_at_a_time(fake::bulk(cmd.back()));
  });
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = connect_to(io, server);
    std::vector<outcome_ptr> echoes;
    for (int i = 0; i < 3; ++i)
      echoes.push_back(issue(conn, command("ECHO", "value-" + std::to_string(i))));
    auto array = issue(conn, command("LRANGE", "k", "0", "-1"));
    for (const auto& e : echoes)
      co_await wait_for(e);
    co_await wait_for(array);
    for (int i = 0; i < 3; ++i) {
      BOOST_TEST(!echoes[i]->ec);
      BOOST_TEST(echoes[i]->reply.text == "value-" + std::to_string(i));
    }
    BOOST_TEST_REQUIRE(array->reply.elements.size() == 2u);
    BOOST_TEST(array->reply.elements[0].text == "a");
    BOOST_TEST(array->reply.elements[1].integer == 5);
    BOOST_TEST(server.connections_accepted() == 1u);
    conn->close();
  });
}

// Handshake failures are typed: NOAUTH => auth_failed, another error reply => server_error,
// garbage => protocol_error. The connection keeps retrying and recovers once the server does.
BOOST_AUTO_TEST_CASE(handshake_failures_are_typed_and_retried) {
  struct test_case {
    const char* name;
    std::string reply;
    error expected;
    const char* cause;
  };
  const std::vector<test_case> cases = {
      {"NOAUTH", fake::noauth(), error::auth_failed, "NOAUTH"},
      {"LOADING", fake::loading(), error::server_error, "LOADING"},
      {"garbage", fake::garbage(), error::protocol_error, "resp: unknown type byte"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      auto healthy = std::make_shared<std::atomic<bool>>(false);
      fake_node server([&c, healthy](const fake_command& cmd, std::size_t) -> fake_reply {
        if (fake::is(cmd, "CLIENT") && !healthy->load()) return c.reply;
        if (auto handshake = fake::handshake_reply(cmd)) return *handshake;
        return fake::bulk(cmd.back());
      });
      run_async([&](asio::io_context& io) -> asio::awaitable<void> {
        auto conn = connect_to(io, server);
        auto refused = co_await exec_and_wait(conn, command("ECHO", "x"));
        BOOST_TEST(refused->ec == error(c.expected));
        BOOST_TEST(contains(refused->reply.text, c.cause), refused->reply.text);
        BOOST_TEST(server.commands_received("ECHO") == 0u);  // never sent
        BOOST_TEST_REQUIRE(co_await eventually([&] { return server.connections_accepted() >= 2; },
                                               5000ms));  // it retries
        healthy->store(true);
        outcome_ptr ok;
        BOOST_TEST_REQUIRE(co_await eventually(
            [&] {
              if (ok && ok->completions > 0 && !ok->ec) return true;
              if (!ok || ok->completions > 0) ok = issue(conn, command("ECHO", "y"));
              return false;
            },
            5000ms, 10ms));
        BOOST_TEST(ok->reply.text == "y");
        conn->close();
      });
    }
  }
}

// EVALSHA answered NOSCRIPT is resent once as EVAL; an EVAL answered NOSCRIPT as well (a broken
// server) is returned as it is, not retried forever.
BOOST_AUTO_TEST_CASE(noscript_falls_back_to_eval_exactly_once) {
  auto eval_works = std::make_shared<std::atomic<bool>>(true);
  fake_node server(fake::with_handshake([eval_works](const fake_command& cmd, std::size_t) {
    if (fake::is(cmd, "EVALSHA")) return fake_reply(fake::noscript());
    if (fake::is(cmd, "EVAL")) {
      return fake_reply(eval_works->load() ? fake::integer(7) : fake::noscript());
    }
    return fake_reply(fake::error("ERR unexpected"));
  }));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = connect_to(io, server);
    const rd::script lua("return 7");
    const std::string_view keys[] = {"k"};
    const std::span<const std::string_view> args;
    auto run_script = [&] {
      return rd::async_eval(conn, lua, keys, args, {2000ms}, tuple_awaitable);
    };

    auto [ec, reply] = co_await run_script();
    BOOST_TEST(!ec);
    BOOST_TEST(reply.integer == 7);
    BOOST_TEST(server.commands_received("EVALSHA") == 1u);
    BOOST_TEST(server.commands_received("EVAL") == 1u);

    eval_works->store(false);
    std::tie(ec, reply) = co_await run_script();
    BOOST_TEST(!ec);
    BOOST_TEST(reply.error_code_word() == "NOSCRIPT");
    co_await sleep_for(30ms);
    BOOST_TEST(server.commands_received("EVALSHA") == 2u);
    BOOST_TEST(server.commands_received("EVAL") == 2u);
    BOOST_TEST(server.connections_accepted() == 1u);
    conn->close();
  });
}

// An EVALSHA whose NOSCRIPT answer comes after its caller gave up (timed out) is still resent as
// EVAL: a release nobody waits for any more must run all the same, or its key stays behind. The
// EVAL's reply is dropped, and the next request gets its own.
BOOST_AUTO_TEST_CASE(noscript_after_a_timeout_still_falls_back_to_eval) {
  fake_node server(fake::with_handshake([](const fake_command& cmd, std::size_t) {
    if (fake::is(cmd, "EVALSHA")) return fake::delayed(fake::noscript(), 300ms);
    if (fake::is(cmd, "EVAL")) return fake_reply(fake::integer(1));
    if (fake::is(cmd, "ECHO")) return fake_reply(fake::bulk(cmd.at(1)));
    return fake_reply(fake::error("ERR unexpected"));
  }));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = connect_to(io, server);
    const rd::script lua("return 1");
    const std::string_view keys[] = {"k"};
    const std::span<const std::string_view> args;
    auto [ec, reply] = co_await rd::async_eval(conn, lua, keys, args, {100ms}, tuple_awaitable);
    BOOST_TEST(ec == redlock::error::request_timeout, ec.message());
    const bool resent = co_await redlock::test::eventually(
        [&] { return server.commands_received("EVAL") == 1; }, 2000ms);
    BOOST_TEST(resent, "the EVAL fallback was not sent");
    auto echoed = co_await exec_and_wait(conn, command("ECHO", "next"), 1000ms);
    BOOST_TEST(!echoed->ec);
    BOOST_TEST(echoed->reply.text == "next");
    BOOST_TEST(conn->stats().replies_dropped == 1u);  // the EVAL's answer
    BOOST_TEST(server.connections_accepted() == 1u);
    conn->close();
  });
}

// A sink that issues a request from inside its first answer, as library code does (a vote decided
// by that answer queues a cleanup).
class chaining_sink final : public rd::reply_sink {
 public:
  explicit chaining_sink(std::function<void()> then) : then_(std::move(then)) {}
  void on_reply(std::size_t, const error_code&, const resp::value&) override {
    if (auto then = std::exchange(then_, nullptr)) then();
  }

 private:
  std::function<void()> then_;
};

// A call answered NOSCRIPT is resent as EVAL ahead of every request not yet written: here one
// issued, from inside the answer to the request before it, in the very batch of replies that
// brought the NOSCRIPT. On the server the EVAL runs before it, in the order they were issued.
BOOST_AUTO_TEST_CASE(noscript_resend_keeps_its_place_among_unwritten_requests) {
  fake_node server(fake::with_handshake([](const fake_command& cmd, std::size_t) -> fake_reply {
    // The ECHO's reply goes out with the EVALSHA's, in one write, so that both are read at once.
    if (fake::is(cmd, "ECHO") && cmd.at(1) == "first") return fake::no_reply();
    if (fake::is(cmd, "EVALSHA")) return fake_reply(fake::bulk("first") + fake::noscript());
    if (fake::is(cmd, "EVAL")) return fake_reply(fake::integer(1));
    if (fake::is(cmd, "ECHO")) return fake_reply(fake::bulk(cmd.at(1)));
    return fake_reply(fake::error("ERR unexpected"));
  }));
  // The sinks outlive the io_context: closing the connection may post a failure to them, and a
  // posted handler that is never run still drops its reference when the context is destroyed.
  const std::string first = command("ECHO", "first");
  const std::string later = command("ECHO", "later");
  std::function<void()> issue_later_now;
  chaining_sink ignore(nullptr);
  chaining_sink issue_later([&] { issue_later_now(); });
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = connect_to(io, server);
    co_await exec_and_wait(conn, command("ECHO", "warm"));
    issue_later_now = [&] {
      conn->exec_direct(later, rd::request_options{2000ms}, ignore, 0,
                        std::chrono::steady_clock::now());
    };
    const rd::script lua("return 1");
    const std::string_view keys[] = {"k"};
    const std::span<const std::string_view> args;
    conn->exec_direct(first, rd::request_options{2000ms}, issue_later, 0,
                      std::chrono::steady_clock::now());
    auto [ec, reply] = co_await rd::async_eval(conn, lua, keys, args, {2000ms}, tuple_awaitable);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(reply.integer == 1);
    BOOST_TEST_REQUIRE(
        co_await eventually([&] { return server.commands_received("ECHO") == 3; }, 2000ms));
    std::vector<std::string> order;
    for (const auto& received : server.log()) {
      if (!fake::is(received.command, "CLIENT")) order.push_back(received.command.at(0));
    }
    const std::vector<std::string> expected = {"ECHO", "ECHO", "EVALSHA", "EVAL", "ECHO"};
    BOOST_TEST(order == expected, boost::test_tools::per_element());
    conn->close();
  });
}

// A resent EVAL whose caller's deadline passes before it can be written (the connection is busy
// writing a large request the server is not reading yet) is still written: a release must run
// even when nobody waits for it any more.
BOOST_AUTO_TEST_CASE(noscript_resend_is_written_after_its_deadline) {
  fake_node server(fake::with_handshake([](const fake_command& cmd, std::size_t) -> fake_reply {
    if (fake::is(cmd, "EVALSHA")) return fake_reply(fake::noscript());
    // Stops reading for a second. Not a PING: the handshake part of the script answers those.
    if (fake::is(cmd, "ECHO") && cmd.at(1) == "stall") {
      return fake::delayed(fake::bulk("stall"), 1000ms);
    }
    if (fake::is(cmd, "ECHO")) return fake_reply(fake::bulk(cmd.at(1)));
    if (fake::is(cmd, "SET")) return fake_reply(fake::ok());
    if (fake::is(cmd, "EVAL")) return fake_reply(fake::integer(1));
    return fake_reply(fake::error("ERR unexpected"));
  }));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto conn = connect_to(io, server);
    co_await exec_and_wait(conn, command("ECHO", "warm"), 2000ms);
    const rd::script lua("return 1");
    const std::string_view keys[] = {"k"};
    const std::span<const std::string_view> args;
    // One write: the call, an ECHO that makes the server stop reading for a second, and 32 MB
    // that cannot all be written meanwhile (the fake server's receive buffer is fixed and small);
    // the NOSCRIPT comes back at once.
    auto called = std::make_shared<outcome>();
    rd::async_eval(conn, lua, keys, args, {300ms}, [called](error_code ec, resp::value) {
      ++called->completions;
      called->ec = ec;
    });
    auto stalled = issue(conn, command("ECHO", "stall"), 5000ms);
    auto big = issue(conn, command("SET", "big", std::string(32 * 1024 * 1024, 'x')), 10000ms);
    co_await wait_for(called);
    BOOST_TEST(called->ec == error::request_timeout, called->ec.message());
    BOOST_TEST(server.commands_received("EVAL") == 0u);
    BOOST_TEST(co_await eventually([&] { return server.commands_received("EVAL") == 1; }, 8000ms),
               "the resent EVAL was never written");
    co_await wait_for(stalled);
    BOOST_TEST(!stalled->ec, stalled->ec.message());
    co_await wait_for(big);
    BOOST_TEST(!big->ec, big->ec.message());
    conn->close();
  });
}

// A client's reply limits bound what one reply may cost in memory, not only its wire size: an
// answer of many empty arrays (4 bytes each on the wire, a value each in memory) breaks that
// node's link with a message naming the limit, and the node's vote is lost.
BOOST_AUTO_TEST_CASE(reply_memory_is_bounded_by_the_client_options) {
  std::string empty_arrays = "*2000\r\n";
  for (int i = 0; i < 2000; ++i)
    empty_arrays += "*0\r\n";
  fake_node server(lock_node(fake_reply(empty_arrays)));
  std::vector<std::string> logged;
  auto options = fault_client_options();
  options.replies.max_reply_memory = 64 * 1024;  // the default; 2000 values take ~200 KB
  options.logger = [&](redlock::log_level, std::string_view message) {
    logged.emplace_back(message);
  };
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    redlock::client locks(io.get_executor(), {server.config()}, options);
    auto [ec, lease] = co_await locks.async_try_acquire("bounded", test_lock(), tuple_awaitable);
    BOOST_TEST(ec == error::no_quorum, ec.message());
    BOOST_TEST(contains(lease.diagnostics(), "memory"), lease.diagnostics());
    BOOST_TEST(contains(lease.diagnostics(), "65536"), lease.diagnostics());
    bool named = false;
    for (const auto& line : logged)
      named = named || (contains(line, "memory") && contains(line, server.config().address()));
    BOOST_TEST(named, "no log line names the node and the memory limit");
  });
}

// Three real nodes out of five grant the lock although the other two misbehave on SET. A success
// clears diagnostics() (lease.hpp), so the misbehaving nodes are checked through what they received
// and, where the link broke, through the client's log, which names them.
BOOST_AUTO_TEST_CASE(client_acquires_through_the_real_majority) {
  redlock::test::redis_fleet fleet(3);
  struct test_case {
    const char* name;
    fake_reply on_set;
    bool breaks_link;
  };
  const std::vector<test_case> cases = {
      {"garbage", fake::garbage(), true},
      {"huge length", fake::huge_length(), true},
      {"integer for SET", fake::wrong_type_for_set(), false},
      {"-OOM", fake::oom(), false},
      {"-READONLY", fake::readonly(), false},
      {"no reply at all", fake::no_reply(), false},
      {"+OK one byte at a time", fake::one_byte_at_a_time(fake::ok(), 2ms), false},
  };
  int round = 0;
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      fake_node bad0(lock_node(c.on_set));
      fake_node bad1(lock_node(c.on_set));
      const std::string resource = "fake-majority-" + std::to_string(round++);
      std::vector<std::string> logged;
      auto options = fault_client_options();
      options.logger = [&](redlock::log_level, std::string_view message) {
        logged.emplace_back(message);
      };
      run_async([&](asio::io_context& io) -> asio::awaitable<void> {
        const std::vector<redlock::node_config> nodes = {
            fleet[0].config(), bad0.config(), fleet[1].config(), bad1.config(), fleet[2].config()};
        redlock::client client(io.get_executor(), nodes, options);
        auto [ec, lease] =
            co_await client.async_try_acquire(resource, test_lock(), tuple_awaitable);
        BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
        BOOST_TEST(lease.held());
        // Once the bad nodes have answered too, the lease notes that it has only 3 of 5.
        BOOST_TEST((lease.diagnostics().empty() ||
                    contains(lease.diagnostics(), "acquired on 3 of 5 nodes")),
                   lease.diagnostics());
        BOOST_TEST(co_await eventually([&] {
          return get_key(fleet[0].port(), resource) == lease.token() &&
                 get_key(fleet[1].port(), resource) == lease.token() &&
                 get_key(fleet[2].port(), resource) == lease.token();
        }));
        BOOST_TEST(co_await eventually([&] {
          return bad0.commands_received("SET") == 1 && bad1.commands_received("SET") == 1;
        }));
        if (c.breaks_link) {
          const fake_node* bads[] = {&bad0, &bad1};
          for (const auto* bad : bads) {
            const auto name = bad->config().address();
            BOOST_TEST(co_await eventually([&] {
                         for (const auto& line : logged)
                           if (contains(line, name) && contains(line, "resp:")) return true;
                         return false;
                       }),
                       name);
          }
        }

        auto [released] = co_await lease.async_release(tuple_awaitable);
        BOOST_TEST(!released, released.message() << ": " << lease.diagnostics());
        BOOST_TEST(!lease.held());
        BOOST_TEST(co_await eventually([&] { return no_keys(fleet); }, 5000ms, 20ms));
      });
    }
  }
}

// When the misbehaving nodes are needed for a majority (one real node holds the key for another
// owner), the acquire fails with a typed error and diagnostics() names each misbehaving node and
// what it sent; what the round set on the real nodes is released, the foreign key is untouched.
BOOST_AUTO_TEST_CASE(client_fails_typed_when_the_misbehaving_nodes_are_needed) {
  redlock::test::redis_fleet fleet(3);
  struct test_case {
    const char* name;
    fake_reply on_set;
    const char* detail;
  };
  const std::vector<test_case> cases = {
      {"garbage", fake::garbage(), "resp: unknown type byte"},
      {"integer for SET", fake::wrong_type_for_set(), "unexpected reply"},
      {"-OOM", fake::oom(), "OOM"},
      {"-READONLY", fake::readonly(), "READONLY"},
  };
  int round = 0;
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      fake_node bad0(lock_node(c.on_set));
      fake_node bad1(lock_node(c.on_set));
      const std::string resource = "fake-minority-" + std::to_string(round++);
      redlock::test::sync_client(fleet[0].port())
          .command({"SET", resource, "foreign", "PX", "10000"});
      run_async([&](asio::io_context& io) -> asio::awaitable<void> {
        const std::vector<redlock::node_config> nodes = {
            fleet[0].config(), bad0.config(), fleet[1].config(), bad1.config(), fleet[2].config()};
        redlock::client client(io.get_executor(), nodes, fault_client_options());
        auto [ec, lease] =
            co_await client.async_try_acquire(resource, test_lock(), tuple_awaitable);
        // 2 granted, 1 refused, 2 failed: a majority is impossible, and 2 failures are not more
        // than a majority can spare, so the answer is "contended".
        BOOST_TEST(ec == error::contended, ec.message());
        BOOST_TEST(!lease.held());
        const auto& why = lease.diagnostics();
        BOOST_TEST(contains(why, bad0.config().address() + " failed ("), why);
        BOOST_TEST(contains(why, bad1.config().address() + " failed ("), why);
        BOOST_TEST(contains(why, c.detail), why);
        BOOST_TEST(contains(why, fleet[0].config().address() + " held by another owner"), why);

        BOOST_TEST(co_await eventually(
            [&] {
              return get_key(fleet[1].port(), resource).empty() &&
                     get_key(fleet[2].port(), resource).empty();
            },
            5000ms, 20ms));
        BOOST_TEST(get_key(fleet[0].port(), resource) == "foreign");
      });
      redlock::test::sync_client(fleet[0].port()).command({"DEL", resource});
      BOOST_TEST(no_keys(fleet));
    }
  }
}

// Two misbehaving nodes and one stopped real node: too many failures for any majority, so
// no_quorum, naming every failed node. Nothing is left behind once the stopped node resumes.
BOOST_AUTO_TEST_CASE(client_reports_no_quorum_naming_the_failed_nodes) {
  redlock::test::redis_fleet fleet(3);
  fake_node bad0(lock_node(fake::garbage()));
  fake_node bad1(lock_node(fake::oom()));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    // A first lock on the real nodes alone loads the release script into their script caches,
    // so the release of the failed round below is an EVALSHA every node can run even after its
    // request timed out (a timed-out EVALSHA is not resent as EVAL).
    {
      redlock::client warm(io.get_executor(), fleet.configs(), fault_client_options());
      auto [ec, lease] = co_await warm.async_try_acquire("warm-up", test_lock(), tuple_awaitable);
      BOOST_TEST_REQUIRE(!ec);
      auto [released] = co_await lease.async_release(tuple_awaitable);
      BOOST_TEST_REQUIRE(!released);
    }

    const std::vector<redlock::node_config> nodes = {
        fleet[0].config(), bad0.config(), fleet[1].config(), bad1.config(), fleet[2].config()};
    redlock::client client(io.get_executor(), nodes, fault_client_options(300ms));
    BOOST_TEST_REQUIRE(!co_await redlock::test::ping_until_answered(client));  // connected
    fleet[0].pause();
    auto [ec, lease] = co_await client.async_try_acquire("stalled", test_lock(), tuple_awaitable);
    fleet[0].resume();
    BOOST_TEST(ec == error::no_quorum, ec.message());
    const auto& why = lease.diagnostics();
    BOOST_TEST((contains(why, bad0.config().address() + " failed (") && contains(why, "resp:")),
               why);
    BOOST_TEST((contains(why, bad1.config().address() + " failed (") && contains(why, "OOM")), why);
    BOOST_TEST(contains(why, fleet[0].config().address() + " failed ("), why);
    BOOST_TEST(co_await eventually([&] { return no_keys(fleet); }, 5000ms, 20ms));
  });
  fleet[0].resume();
}

// Replies of a shape the lock's command cannot have (an integer for SET) are no passing trouble:
// the server runs other code, or something pairs replies with the wrong requests. When such nodes
// leave no quorum, an acquire that could wait 30 s ends at once with protocol_error (a node
// failure) naming them, instead of retrying until its wait runs out; what its round set on the
// real nodes is released.
BOOST_AUTO_TEST_CASE(replies_a_lock_cannot_get_end_the_wait_when_they_leave_no_quorum) {
  redlock::test::redis_fleet fleet(2);
  fake_node bad0(lock_node(fake::wrong_type_for_set()));
  fake_node bad1(lock_node(fake::wrong_type_for_set()));
  fake_node bad2(lock_node(fake::wrong_type_for_set()));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    const std::vector<redlock::node_config> nodes = {
        fleet[0].config(), bad0.config(), fleet[1].config(), bad1.config(), bad2.config()};
    redlock::client client(io.get_executor(), nodes, fault_client_options());
    auto options = test_lock();
    options.wait = 30s;
    const auto started = std::chrono::steady_clock::now();
    auto [ec, lease] = co_await client.async_acquire("odd-majority", options, tuple_awaitable);
    BOOST_TEST(ec == error::protocol_error, ec.message());
    BOOST_TEST((ec == redlock::condition::node_failure));
    BOOST_TEST(!lease.held());
    // Generous: the point is that it does not wait out its 30 s.
    BOOST_TEST((std::chrono::steady_clock::now() - started < 15s));
    const auto& why = lease.diagnostics();
    for (const fake_node* bad : {&bad0, &bad1, &bad2})
      BOOST_TEST(contains(why, bad->config().address()), why);
    BOOST_TEST(contains(why, "unexpected reply"), why);
    BOOST_TEST(co_await eventually([&] { return no_keys(fleet); }, 5000ms, 20ms));
  });
}

// A ping right after construction opens the connections, and each node has node_timeout to
// answer, the connect included: a handshake slower than that fails the first ping (long before
// connect_timeout), while the connects go on, so that a ping after them succeeds. Pinging again
// until then is how a caller waits for a slow first connect.
BOOST_AUTO_TEST_CASE(client_ping_obeys_node_timeout_while_the_connections_open) {
  auto slow_handshake = [](std::chrono::milliseconds delay) {
    // The first command of the handshake is late, and holds back the replies behind it.
    return [delay](const fake_command& cmd, std::size_t) -> fake_reply {
      auto handshake = fake::handshake_reply(cmd);
      if (!handshake) return fake::error("ERR unexpected command");
      if (fake::is(cmd, "CLIENT")) return fake::delayed(handshake->bytes, delay);
      return *handshake;
    };
  };
  fake_node a(slow_handshake(250ms)), b(slow_handshake(250ms)), c(slow_handshake(250ms));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto options = fault_client_options(100ms);
    options.connect_timeout = 2000ms;
    redlock::client locks(io.get_executor(), {a.config(), b.config(), c.config()}, options);
    const auto start = std::chrono::steady_clock::now();
    auto [ec] = co_await locks.async_ping(tuple_awaitable);
    const auto took = std::chrono::steady_clock::now() - start;
    BOOST_TEST(ec == error::no_quorum, ec.message());
    BOOST_TEST((took < 1000ms));
    // The connects were not given up: a later ping finds the nodes answering.
    for (int attempt = 0; attempt < 250 && ec; ++attempt) {
      co_await sleep_for(20ms);
      std::tie(ec) = co_await locks.async_ping(tuple_awaitable);
    }
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(a.connections_accepted() == 1u);  // the same connection, not a reconnect
  });
}

// Every reply of every node arrives one byte at a time: the whole lock cycle still works. The
// handshake's replies (HELLO's map, a SHA per script) take about a thousand writes, a timer's wait
// apart: the node and connect timeouts are generous, as what is tested is the parsing, not the
// speed (under ASan beside other suites, 500 ms was not enough; on a busy machine neither was
// the default connect timeout of a second).
BOOST_AUTO_TEST_CASE(client_lock_cycle_with_replies_one_byte_at_a_time) {
  auto script = [](const fake_command& cmd, std::size_t) -> fake_reply {
    if (auto handshake = fake::handshake_reply(cmd)) {
      return fake::one_byte_at_a_time(handshake->bytes);
    }
    if (fake::is(cmd, "SET")) return fake::one_byte_at_a_time(fake::ok());
    if (fake::is(cmd, "EVALSHA")) return fake::one_byte_at_a_time(fake::integer(1));
    return fake::error("ERR unexpected command");
  };
  fake_node a(script), b(script), c(script);
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    auto options = fault_client_options(20000ms);
    options.connect_timeout = 20000ms;
    redlock::client client(io.get_executor(), {a.config(), b.config(), c.config()}, options);
    auto [ec, lease] = co_await client.async_try_acquire("bytewise", test_lock(), tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    BOOST_TEST(lease.held());
    auto [released] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!released, released.message() << ": " << lease.diagnostics());
    BOOST_TEST(co_await eventually([&] {
      return a.commands_received("EVALSHA") == 1 && b.commands_received("EVALSHA") == 1 &&
             c.commands_received("EVALSHA") == 1;
    }));
    const fake_node* all[] = {&a, &b, &c};
    for (const auto* node : all) {
      BOOST_TEST(node->commands_received("SET") == 1u);
      BOOST_TEST(node->connections_accepted() == 1u);
      BOOST_TEST(node->protocol_errors() == 0u);
    }
  });
}

// A cleanup release that meets NOSCRIPT is resent as EVAL behind the requests issued meanwhile. If
// the next round reused the token, that stale release would delete the key the next round had
// just been granted on the same node, and the client would hold a vote it no longer has. Node 0
// here fails round 1 (-OOM), answers the cleanup's EVALSHA with NOSCRIPT after 50 ms, and grants
// round 2 before the resent EVAL arrives; it keeps its keys like a server, so it shows whether the
// EVAL deleted round 2's key. Node 1 grants from round 2 on, node 2 never.
BOOST_AUTO_TEST_CASE(a_stale_cleanup_never_deletes_a_later_rounds_key) {
  struct key_store {
    std::mutex mutex;
    std::map<std::string, std::string> keys;
    int sets = 0;
    std::vector<std::string> set_tokens;
  };
  auto stale = std::make_shared<key_store>();
  fake_node node0(fake::with_handshake([stale](const fake_command& cmd, std::size_t) -> fake_reply {
    const std::lock_guard lock(stale->mutex);
    if (fake::is(cmd, "SET") && cmd.size() >= 3) {
      stale->set_tokens.push_back(cmd[2]);
      if (stale->sets++ == 0) return fake::oom();
      if (stale->keys.count(cmd[1]) != 0) return fake::null_bulk();
      stale->keys[cmd[1]] = cmd[2];
      return fake::ok();
    }
    if (fake::is(cmd, "EVALSHA")) {
      fake_reply reply(fake::noscript());
      reply.delay = 50ms;
      return reply;
    }
    if (fake::is(cmd, "EVAL") && cmd.size() >= 5) {  // EVAL source 1 key token
      const auto found = stale->keys.find(cmd[3]);
      if (found == stale->keys.end() || found->second != cmd[4]) return fake::integer(0);
      stale->keys.erase(found);
      return fake::integer(1);
    }
    return fake::error("ERR unexpected command");
  }));
  auto node1_sets = std::make_shared<std::atomic<int>>(0);
  fake_node node1(fake::with_handshake([node1_sets](const fake_command& cmd, std::size_t) {
    if (fake::is(cmd, "SET"))
      return fake_reply(node1_sets->fetch_add(1) == 0 ? fake::null_bulk() : fake::ok());
    return fake_reply(fake::integer(1));
  }));
  fake_node node2(fake::with_handshake([](const fake_command& cmd, std::size_t) {
    return fake_reply(fake::is(cmd, "SET") ? fake::null_bulk() : fake::integer(0));
  }));
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    const std::vector<redlock::node_config> nodes = {node0.config(), node1.config(),
                                                     node2.config()};
    redlock::client client(io.get_executor(), nodes, fault_client_options());
    auto options = test_lock();
    options.retry = {1ms, 1ms, 1.0};
    options.wait = 2000ms;
    auto [ec, lease] = co_await client.async_acquire("stale", options, tuple_awaitable);
    BOOST_TEST_REQUIRE(!ec, ec.message() << ": " << lease.diagnostics());
    // The resent cleanup has been run on node 0.
    BOOST_TEST(co_await eventually([&] { return node0.commands_received("EVAL") >= 1; }, 2000ms));
    co_await sleep_for(20ms);
    {
      const std::lock_guard lock(stale->mutex);
      BOOST_TEST_REQUIRE(stale->set_tokens.size() >= 2u);
      BOOST_TEST(stale->set_tokens[0] != stale->set_tokens[1], "two rounds shared a token");
      BOOST_TEST(stale->keys["stale"] == lease.token(),
                 "node 0 lost the key it granted to the winning round");
    }
    auto [release_ec] = co_await lease.async_release(tuple_awaitable);
    BOOST_TEST(!release_ec, release_ec.message());
  });
}

// A fake node that refuses every SET but the ones `answer_set` answers (given how many SETs it
// has seen, this one included) and grants every release, logging the tokens of both.
struct token_log {
  std::mutex mutex;
  std::vector<std::string> set_tokens;
  std::vector<std::string> release_tokens;
};

std::unique_ptr<fake_node> token_logging_node(
    std::shared_ptr<token_log> log,
    std::function<std::optional<fake_reply>(std::size_t)> answer_set = {}) {
  return std::make_unique<fake_node>(
      fake::with_handshake([log, answer_set](const fake_command& cmd, std::size_t) -> fake_reply {
        const std::lock_guard lock(log->mutex);
        if (fake::is(cmd, "SET") && cmd.size() >= 3) {
          log->set_tokens.push_back(cmd[2]);
          if (answer_set) {
            if (auto reply = answer_set(log->set_tokens.size())) return *reply;
          }
          return fake_reply(fake::null_bulk());
        }
        if (fake::is(cmd, "EVALSHA") && cmd.size() >= 5) {  // EVALSHA sha 1 key token ...
          log->release_tokens.push_back(cmd[4]);
          return fake_reply(fake::integer(1));
        }
        return fake_reply(fake::error("ERR unexpected"));
      }));
}

// Three token-logging nodes (their logs in `logs`); node 2 answers its SETs through `answer_set`.
std::vector<std::unique_ptr<fake_node>> nodes_with_a_slow_third(
    std::vector<std::shared_ptr<token_log>>& logs,
    std::function<std::optional<fake_reply>(std::size_t)> answer_set) {
  std::vector<std::unique_ptr<fake_node>> nodes;
  for (std::size_t i = 0; i < 3; ++i) {
    logs.push_back(std::make_shared<token_log>());
    nodes.push_back(token_logging_node(logs.back(), i == 2 ? answer_set : nullptr));
  }
  return nodes;
}

// An acquire of "late" on `nodes` that must time out after `wait`, then 50 ms for the cleanups
// still under way.
void acquire_until_the_wait_ends(const std::vector<std::unique_ptr<fake_node>>& nodes,
                                 redlock::retry_policy retry, std::chrono::milliseconds wait) {
  run_async([&](asio::io_context& io) -> asio::awaitable<void> {
    const auto configs = redlock::test::configs_of(nodes);
    auto options = fault_client_options();
    options.release_channel.clear();  // the fake nodes do not subscribe
    redlock::client locks(io.get_executor(), configs, options);
    auto lock = test_lock();
    lock.retry = retry;
    lock.wait = wait;
    auto [ec, lease] = co_await locks.async_acquire("late", lock, tuple_awaitable);
    BOOST_TEST(ec == error::wait_timeout, ec.message() << ": " << lease.diagnostics());
    co_await sleep_for(50ms);
  });
}

// A failed round's node that has not answered when the round is decided is released only once it
// answers, and only if it did not refuse: a late grant is undone with that round's token, and a
// late refusal costs no release at all. Nodes 0 and 1 refuse at once; node 2 answers the second
// round's SET 100 ms late. The waiter's backoff (up to a minute) keeps it asleep meanwhile, and
// its wait ends at 1.5 s.
BOOST_AUTO_TEST_CASE(a_late_answer_decides_whether_a_failed_round_is_cleaned_up) {
  for (const bool late_grant : {true, false}) {
    BOOST_TEST_CONTEXT((late_grant ? "late grant" : "late refusal")) {
      std::vector<std::shared_ptr<token_log>> logs;
      const auto nodes = nodes_with_a_slow_third(
          logs, [late_grant](std::size_t sets) -> std::optional<fake_reply> {
            if (sets != 2) return std::nullopt;
            return fake::delayed(late_grant ? fake::ok() : fake::null_bulk(), 100ms);
          });
      acquire_until_the_wait_ends(nodes, {60s, 60s, 1.0}, 1500ms);
      for (std::size_t i = 0; i < 3; ++i) {
        const std::lock_guard lock_log(logs[i]->mutex);
        BOOST_TEST_CONTEXT("node " << i) {
          BOOST_TEST_REQUIRE(logs[i]->set_tokens.size() >= 2u);
          if (i == 2 && late_grant) {
            const std::vector<std::string> expected = {logs[i]->set_tokens[1]};
            BOOST_TEST(logs[i]->release_tokens == expected, boost::test_tools::per_element());
          } else {
            BOOST_TEST(logs[i]->release_tokens.empty());
          }
        }
      }
    }
  }
}

// A node whose answers stall behind a slow one stays owed a cleanup for every round it missed,
// and each is settled by its own answer: refusals that arrive several rounds late cost nothing.
// Node 2 answers its first SET 150 ms late, so the SETs of the rounds after it queue behind it.
// Only the last round's cleanup may be sent without its answer, when the acquire ends first.
BOOST_AUTO_TEST_CASE(refusals_several_rounds_late_cost_no_release) {
  std::vector<std::shared_ptr<token_log>> logs;
  const auto nodes =
      nodes_with_a_slow_third(logs, [](std::size_t sets) -> std::optional<fake_reply> {
        if (sets != 1) return std::nullopt;
        return fake::delayed(fake::null_bulk(), 150ms);
      });
  acquire_until_the_wait_ends(nodes, {100ms, 100ms, 1.0}, 400ms);
  const std::lock_guard lock_log(logs[2]->mutex);
  const auto& log = *logs[2];
  BOOST_TEST_REQUIRE(log.set_tokens.size() >= 3u);
  BOOST_TEST(log.release_tokens.size() <= 1u);
  for (const auto& token : log.release_tokens)
    BOOST_TEST(token == log.set_tokens.back(), "a release for a round that was refused late");
}

BOOST_AUTO_TEST_SUITE_END()
