// The request queue of one node's connection, without a socket: what is written in which order,
// which request a reply belongs to, deadlines, cancellation, NOSCRIPT re-sends, cleanups kept
// across a reconnect, how requests fail while the node is down, and when the node counts as
// unresponsive. Each rule the lock relies on is named by a test case.

#include "net/connection_options.hpp"
#include "net/multiplexer.hpp"
#include "redlock/error.hpp"
#include "resp/encoder.hpp"
#include "resp/script.hpp"
#include "support/printing.hpp"
#include "support/written_commands.hpp"
#include "unit/resp_values.hpp"

#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace rd = redlock::detail;
namespace resp = redlock::resp;
using namespace std::chrono_literals;
using boost::system::error_code;
using redlock::error;
using delivery = rd::multiplexer::delivery;
using time_point = rd::multiplexer::time_point;

// A sink of the library's own requests (connection::exec_direct): records the replies the
// multiplexer hands it directly (the harness records what goes through answer_fn); the references
// its requests hold are counted by reply_sink.
class counting_sink final : public rd::reply_sink {
 public:
  void on_reply(std::size_t tag, const error_code&, const resp::value& reply) override {
    replies.emplace_back(tag, reply.text);
  }

  std::vector<std::pair<std::size_t, std::string>> replies;  // tag, text
};

struct request_outcome {
  std::size_t tag = 0;
  error_code ec;
  resp::value reply;
  delivery how = delivery::post;
};

using redlock::test::reply::error_reply;
using redlock::test::reply::simple;

// "SET lock a" as RESP.
rd::shared_payload encode(std::string_view words) {
  std::vector<std::string_view> args;
  for (std::size_t start = 0; start < words.size();) {
    auto end = words.find(' ', start);
    if (end == std::string_view::npos) end = words.size();
    args.push_back(words.substr(start, end - start));
    start = end + 1;
  }
  auto out = std::make_shared<std::string>();
  resp::encode_command(*out, args);
  return out;
}

using redlock::test::commands;

// A multiplexer with a hand-driven clock, recording every request_outcome it gives.
class harness {
 public:
  explicit harness(std::size_t max_pending_cleanups = 8192)
      : mux(
            "node:6379", max_pending_cleanups,
            [this](rd::multiplexer::request& req, error_code ec, resp::value&& reply,
                   delivery how) {
              answers.push_back({req.tag, ec, std::move(reply), how});
              if (on_answer) on_answer(answers.back());
            },
            [this](std::string_view message) { warnings.emplace_back(message); }) {}

  // Issues `command` on a link that is up or opening; returns the request's id.
  std::uint64_t issue(std::size_t tag, std::string_view command, rd::request_options options = {}) {
    auto req = make(tag, command);
    const auto id = req->id;
    mux.add(std::move(req), options, now);
    return id;
  }

  // Issues `command` while the node is down, the last connect having failed with `cause`
  // (permanently: `permanent_failure`): it fails unsent.
  void issue_while_down(std::size_t tag, std::string_view command, rd::request_options options,
                        std::string_view cause = "connect failed: Connection refused",
                        error_code permanent_failure = {}) {
    mux.fail_while_down(make(tag, command), options, permanent_failure, cause, now);
  }

  // Issues an EVALSHA of `lua` (with its EVAL fallback).
  void issue_script(std::size_t tag, const rd::script& lua, std::string_view key,
                    rd::request_options options = {}) {
    options.eval_fallback = &lua;
    const std::string_view keys[] = {key};
    const std::string_view args[] = {"tok"};
    auto req = mux.make_request();
    req->own(std::make_shared<const std::string>(rd::encode_evalsha(lua, keys, args)));
    req->tag = tag;
    mux.add(std::move(req), options, now);
  }

  // A link comes up (its handshake is the connection's business).
  void connect() {
    mux.on_connect_started();
    mux.on_handshake_done(now);
  }

  // The commands of the next write, which is then on the wire.
  commands write() {
    rd::write_buffer bytes;
    bytes.append("left over from the last write");
    const auto requests = mux.prepare_write(bytes, now);
    if (requests > 0) mux.commit_write(requests, bytes.size());
    auto written = redlock::test::decode_commands(std::string(bytes.view()));
    BOOST_TEST(written.size() == requests);
    return written;
  }

  // The server's next reply.
  void reply(resp::value value) { BOOST_REQUIRE(mux.consume_reply(value)); }

  std::vector<std::size_t> answered_tags() const {
    std::vector<std::size_t> tags;
    for (const auto& a : answers)
      tags.push_back(a.tag);
    return tags;
  }

  const request_outcome* answer_of(std::size_t tag) const {
    for (const auto& a : answers)
      if (a.tag == tag) return &a;
    return nullptr;
  }

  std::vector<request_outcome> answers;
  std::vector<std::string> warnings;
  std::function<void(const request_outcome&)> on_answer;
  rd::multiplexer mux;
  time_point now = time_point{} + 1h;

 private:
  rd::multiplexer::request_ptr make(std::size_t tag, std::string_view command) {
    auto req = mux.make_request();
    req->own(encode(command));
    req->tag = tag;
    return req;
  }
};

rd::request_options with_timeout(std::chrono::milliseconds timeout) {
  rd::request_options options;
  options.timeout = timeout;
  return options;
}

// A new round's SET, an extension or a PING: not worth sending to a node that is not answering.
rd::request_options skippable(std::chrono::milliseconds timeout = 0ms) {
  auto options = with_timeout(timeout);
  options.skip_if_unresponsive = true;
  return options;
}

// A token-checked release that must reach the node (request_options::deliver_for).
rd::request_options cleanup(std::chrono::milliseconds timeout,
                            std::chrono::milliseconds deliver_for = 10s) {
  auto options = with_timeout(timeout);
  options.deliver_for = deliver_for;
  return options;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(multiplexer)

// A batch's bytes are every payload in order, whatever their sizes (empty, a lock's command,
// longer), across the buffer's growth, and after clear().
BOOST_AUTO_TEST_CASE(a_write_buffer_holds_every_payload_in_order) {
  rd::write_buffer buffer;
  for (int round = 0; round < 2; ++round) {
    buffer.clear();
    std::string expected;
    for (std::size_t n = 0; n <= 300; ++n) {
      std::string payload(n, '\0');
      for (std::size_t i = 0; i < n; ++i)
        payload[i] = static_cast<char>('a' + (n * 7 + i) % 26);
      buffer.append(payload);
      expected += payload;
    }
    BOOST_TEST_REQUIRE(buffer.size() == expected.size());
    BOOST_TEST((buffer.view() == expected));
  }
}

BOOST_AUTO_TEST_CASE(requests_queued_together_are_coalesced_into_one_write_in_order) {
  harness h;
  BOOST_TEST(h.write().empty());  // nothing queued: nothing to write
  BOOST_TEST(!h.mux.write_pending());
  h.issue(1, "SET a 1");
  h.issue(2, "SET b 2");
  h.issue(3, "GET a");
  BOOST_TEST(h.mux.write_pending());
  BOOST_TEST(h.write() == (commands{"SET a 1", "SET b 2", "GET a"}));
  BOOST_TEST(h.write().empty());
  h.issue(4, "GET b");
  BOOST_TEST(h.write() == (commands{"GET b"}));

  const auto& stats = h.mux.stats();
  BOOST_TEST(stats.writes == 2u);
  BOOST_TEST(stats.requests_written == 4u);
  BOOST_TEST(stats.bytes_written == encode("SET a 1")->size() + encode("SET b 2")->size() +
                                        encode("GET a")->size() + encode("GET b")->size());
  BOOST_TEST(!h.mux.idle());  // four replies still to come
}

BOOST_AUTO_TEST_CASE(replies_answer_written_requests_in_fifo_order) {
  harness h;
  h.issue(1, "SET a 1");
  h.issue(2, "GET a");
  h.write();
  h.reply(simple("OK"));
  h.reply(simple("1"));
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{1, 2}));
  for (const auto& a : h.answers) {
    BOOST_TEST(!a.ec);
    // Answers to parsed replies run inline: the connection's sinks read them where they are.
    BOOST_TEST((a.how == delivery::dispatch));
  }
  BOOST_TEST(h.answers[0].reply.text == "OK");
  BOOST_TEST(h.answers[1].reply.text == "1");
  BOOST_TEST(h.mux.stats().replies == 2u);
  BOOST_TEST(h.mux.idle());
}

BOOST_AUTO_TEST_CASE(unsolicited_reply_is_refused_and_push_belongs_to_no_request) {
  harness h;
  auto stray = simple("OK");
  BOOST_TEST(!h.mux.consume_reply(stray));
  BOOST_TEST(stray.text == "OK");  // left for the connection's message

  h.issue(1, "GET a");
  h.write();
  resp::value push;
  push.kind = resp::type::push;
  h.reply(push);
  BOOST_TEST(h.answers.empty());
  h.reply(simple("v"));
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{1}));
}

// SSUBSCRIBE on a RESP3 link (request_options::reply_is_push): its confirmation comes as a push,
// which answers it in its turn; an error answers it as any reply would. Pushes the server sends
// unprompted (messages, the "sunsubscribe" of a slot that moved away) answer nothing.
BOOST_AUTO_TEST_CASE(a_subscribe_is_answered_by_its_confirmation_push_or_an_error) {
  const auto push_of = [](std::initializer_list<std::string_view> words) {
    resp::value v;
    v.kind = resp::type::push;
    for (const auto word : words)
      v.elements.push_back(simple(std::string(word)));
    return v;
  };
  rd::request_options subscribe;
  subscribe.reply_is_push = true;
  harness h;
  h.issue(1, "PING");
  h.issue(2, "SSUBSCRIBE {1}ch", subscribe);
  h.issue(3, "SSUBSCRIBE {2}ch", subscribe);
  h.issue(4, "PING");
  BOOST_TEST(h.write().size() == 4u);

  // Not its turn: the PING before it is still unanswered.
  const auto confirmation = push_of({"ssubscribe", "{1}ch", "1"});
  BOOST_TEST(!h.mux.takes_push(confirmation));
  h.reply(simple("PONG"));
  BOOST_TEST(!h.mux.takes_push(push_of({"smessage", "{1}ch", "lock"})));
  BOOST_TEST(!h.mux.takes_push(push_of({"sunsubscribe", "{1}ch", "0"})));
  BOOST_TEST(h.mux.takes_push(confirmation));
  h.reply(confirmation);
  BOOST_TEST_REQUIRE(h.answers.size() == 2u);
  BOOST_TEST(h.answers[1].tag == 2u);
  BOOST_TEST((h.answers[1].reply.kind == resp::type::push));

  // A refusal answers the second; the PING's reply is still its own.
  h.reply(error_reply("MOVED 3 127.0.0.1:7002"));
  h.reply(simple("PONG"));
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{1, 2, 3, 4}));
  BOOST_TEST(h.answer_of(3)->reply.is_error());
  BOOST_TEST(h.answer_of(4)->reply.text == "PONG");

  // A push with nothing waiting for one belongs to no request.
  auto late = push_of({"ssubscribe", "{1}ch", "1"});
  BOOST_TEST(!h.mux.takes_push(late));
  BOOST_TEST(h.mux.consume_reply(late));
  BOOST_TEST(h.answers.size() == 4u);
}

// The lock's ordering guarantee on one node: a token-checked release queued after a SET is written
// behind it on the same link, whether the SET was already written, still queued, or timed out.
BOOST_AUTO_TEST_CASE(release_is_written_behind_the_set_it_undoes) {
  for (const bool set_written_first : {true, false}) {
    for (const bool set_timed_out : {true, false}) {
      BOOST_TEST_CONTEXT("SET written before the release: "
                         << set_written_first << ", SET timed out: " << set_timed_out) {
        harness h;
        h.issue(1, "SET lock t1 NX PX 10000", with_timeout(50ms));
        commands wire;
        if (set_written_first) wire = h.write();
        if (set_timed_out) {
          h.now += 60ms;
          h.mux.expire_deadlines(h.now, "connecting");
          BOOST_TEST(h.answer_of(1)->ec == error::request_timeout);
        }
        h.issue(2, "EVALSHA release 1 lock t1", cleanup(50ms));
        for (auto& command : h.write())
          wire.push_back(std::move(command));
        if (set_timed_out && !set_written_first) {
          // Never written, so it cannot run: nothing to undo, and only the release goes out.
          BOOST_TEST(wire == (commands{"EVALSHA release 1 lock t1"}));
        } else {
          BOOST_TEST(wire == (commands{"SET lock t1 NX PX 10000", "EVALSHA release 1 lock t1"}));
          // The SET's reply is its own, even when nobody waits for it any more.
          h.reply(simple("OK"));
        }
        h.reply(simple("1"));
        BOOST_REQUIRE(h.answer_of(2) != nullptr);
        BOOST_TEST(h.answer_of(2)->reply.text == "1");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(late_reply_is_dropped_not_paired) {
  harness h;
  h.issue(1, "SET lock t1 NX PX 10000", with_timeout(50ms));
  h.write();
  h.now += 50ms;
  h.mux.expire_deadlines(h.now, "connecting");
  BOOST_REQUIRE(h.answers.size() == 1u);
  BOOST_TEST(h.answers[0].ec == error::request_timeout);
  BOOST_TEST(h.answers[0].reply.text ==
             "node:6379: no reply within 50 ms (sent; it may still execute)");

  h.issue(2, "GET lock");
  h.write();
  h.reply(simple("OK"));  // the SET's, late
  BOOST_TEST(h.answers.size() == 1u);
  BOOST_TEST(h.mux.stats().replies_dropped == 1u);
  h.reply(simple("t1"));
  BOOST_REQUIRE(h.answers.size() == 2u);
  BOOST_TEST(h.answers[1].tag == 2u);
  BOOST_TEST(h.answers[1].reply.text == "t1");
}

// A NOSCRIPT reply means the call did not run: it is re-sent as EVAL ahead of everything not yet
// written and behind earlier re-sends, so it keeps its place among them.
BOOST_AUTO_TEST_CASE(noscript_resend_keeps_order) {
  const rd::script lua("release-script");
  harness h;
  h.issue_script(1, lua, "a");
  h.issue_script(2, lua, "b");
  h.issue(3, "GET c");
  const auto evalsha = [&](std::string_view key) {
    return "EVALSHA " + lua.sha1() + " 1 " + std::string(key) + " tok";
  };
  BOOST_TEST(h.write() == (commands{evalsha("a"), evalsha("b"), "GET c"}));
  h.issue(4, "SET d 1");  // queued, not written
  h.reply(error_reply("NOSCRIPT No matching script. Please use EVAL."));
  h.reply(error_reply("NOSCRIPT No matching script. Please use EVAL."));
  BOOST_TEST(h.answers.empty());  // the callers wait for the EVALs' replies
  h.issue(5, "SET e 1");
  BOOST_TEST(h.write() == (commands{"EVAL release-script 1 a tok", "EVAL release-script 1 b tok",
                                    "SET d 1", "SET e 1"}));
  h.reply(simple("c"));  // GET c, written before the re-sends
  h.reply(simple("1"));
  h.reply(simple("0"));
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{3, 1, 2}));
  BOOST_TEST(h.answer_of(1)->reply.text == "1");
  BOOST_TEST(h.answer_of(2)->reply.text == "0");
  BOOST_TEST(h.mux.stats().scripts_reloaded == 0u);
}

BOOST_AUTO_TEST_CASE(noscript_resend_is_sent_after_its_caller_gave_up) {
  const rd::script lua("release-script");
  harness h;
  h.issue_script(1, lua, "a", with_timeout(50ms));
  h.write();
  h.now += 50ms;
  h.mux.expire_deadlines(h.now, "connecting");
  BOOST_TEST(h.answer_of(1)->ec == error::request_timeout);
  h.reply(error_reply("NOSCRIPT No matching script."));
  // A release must still run.
  BOOST_TEST(h.write() == (commands{"EVAL release-script 1 a tok"}));
  h.reply(simple("1"));
  BOOST_TEST(h.answers.size() == 1u);
  BOOST_TEST(h.mux.stats().replies_dropped == 1u);
  BOOST_TEST(h.mux.idle());
}

// An extension answered NOSCRIPT is not re-sent behind later requests: the NOSCRIPT is its
// answer, and the script is loaded again at once, ahead of every request not yet written.
BOOST_AUTO_TEST_CASE(noscript_is_final_reloads_script_ahead) {
  const rd::script lua("extend-script");
  harness h;
  rd::request_options final_answer;
  final_answer.noscript_is_final = true;
  h.issue_script(1, lua, "a", final_answer);
  h.issue_script(2, lua, "b", final_answer);
  h.write();
  h.issue(3, "GET c");
  h.reply(error_reply("NOSCRIPT No matching script."));
  h.reply(error_reply("NOSCRIPT No matching script."));
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{1, 2}));
  BOOST_TEST(!h.answers[0].ec);
  BOOST_TEST(h.answers[0].reply.is_error());
  BOOST_TEST(h.answers[0].reply.error_code_word() == "NOSCRIPT");
  // One reload while one is under way, ahead of the request queued before the NOSCRIPT.
  BOOST_TEST(h.write() == (commands{"SCRIPT LOAD extend-script", "GET c"}));
  BOOST_TEST(h.mux.stats().scripts_reloaded == 1u);
  h.reply(simple(lua.sha1()));  // the connection's own: nobody is answered
  BOOST_TEST(h.answers.size() == 2u);
  h.reply(simple("c"));
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{1, 2, 3}));

  // Loaded: a later flush loads it again.
  h.issue_script(4, lua, "d", final_answer);
  h.write();
  h.reply(error_reply("NOSCRIPT No matching script."));
  BOOST_TEST(h.write() == (commands{"SCRIPT LOAD extend-script"}));
  BOOST_TEST(h.mux.stats().scripts_reloaded == 2u);
}

BOOST_AUTO_TEST_CASE(cleanup_written_after_its_deadline) {
  harness h;
  h.mux.on_connect_started();
  h.issue(1, "GET a", with_timeout(50ms));
  h.issue(2, "EVALSHA release 1 lock t1", cleanup(50ms));
  h.now += 50ms;
  h.mux.expire_deadlines(h.now, "waiting for the handshake");
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{1, 2}));
  BOOST_TEST(h.answers[0].ec == error::request_timeout);
  BOOST_TEST(h.answers[0].reply.text ==
             "node:6379: not sent within 50 ms: still waiting for the handshake");
  h.mux.on_handshake_done(h.now);
  // Its caller has its timeout, but the release still goes out; the GET does not.
  BOOST_TEST(h.write() == (commands{"EVALSHA release 1 lock t1"}));
  h.reply(simple("1"));
  BOOST_TEST(h.answers.size() == 2u);
  BOOST_TEST(h.mux.idle());
}

// Cleanups failed by a broken link or issued while the node was down are sent right after the
// next handshake, before anything issued later, in the order they were issued.
BOOST_AUTO_TEST_CASE(cleanups_kept_across_reconnect_go_first) {
  harness h;
  h.connect();
  h.issue(1, "EVALSHA release 1 a t1", cleanup(1s));
  h.issue(2, "GET x", with_timeout(1s));
  h.write();
  h.issue(3, "EVALSHA release 1 b t2", cleanup(1s));  // queued when the link breaks
  h.mux.on_connection_lost(error::connection_lost, "connection closed by the server", h.now);
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{1, 2, 3}));
  for (const auto& a : h.answers) {
    BOOST_TEST(a.ec == error::connection_lost);
    BOOST_TEST((a.how == delivery::post));
  }
  BOOST_TEST(h.mux.has_kept_cleanups());
  BOOST_TEST(!h.mux.idle());

  h.issue_while_down(4, "EVALSHA release 1 c t3", cleanup(1s));
  h.issue_while_down(5, "GET y", {});
  BOOST_TEST(h.answer_of(4)->ec == error::not_connected);
  BOOST_TEST(h.answer_of(5)->ec == error::not_connected);

  h.mux.on_connect_started();
  h.issue(6, "SET z 1");  // issued while connecting, after the kept cleanups
  h.mux.on_handshake_done(h.now);
  BOOST_TEST(h.write() == (commands{"EVALSHA release 1 a t1", "EVALSHA release 1 b t2",
                                    "EVALSHA release 1 c t3", "SET z 1"}));
  BOOST_TEST(h.mux.stats().cleanups_kept == 3u);
  BOOST_TEST(h.mux.stats().connects == 2u);
  BOOST_TEST(!h.mux.has_kept_cleanups());
  for (int i = 0; i < 3; ++i)
    h.reply(simple("1"));  // nobody waits for these any more
  h.reply(simple("OK"));
  BOOST_TEST(h.answer_of(6)->reply.text == "OK");
  BOOST_TEST(h.mux.stats().replies_dropped == 3u);
  BOOST_TEST(h.mux.idle());
}

// While the node is down between connect attempts, a request fails unsent at once, and its text
// names the last failure. Its code says whether waiting can help: not_connected, or the connect
// failure that retrying will not fix (a refused AUTH) until someone changes a configuration. A
// cleanup is kept for the next handshake either way, since the connection keeps reconnecting.
BOOST_AUTO_TEST_CASE(requests_issued_while_down_fail_unsent_with_the_last_failure) {
  harness h;
  h.issue_while_down(1, "SET a 1 NX PX 10000", {}, "connect failed: Connection refused");
  h.issue_while_down(2, "SET a 1 NX PX 10000", {}, "AUTH failed: WRONGPASS invalid password",
                     error::auth_failed);
  h.issue_while_down(3, "EVALSHA release 1 a t1", cleanup(1s), "AUTH failed: WRONGPASS",
                     error::auth_failed);
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{1, 2, 3}));
  for (const auto& a : h.answers)
    BOOST_TEST((a.how == delivery::post));  // never inside the initiating function
  BOOST_TEST(h.answer_of(1)->ec == error::not_connected);
  BOOST_TEST(h.answer_of(1)->reply.text ==
             "node:6379: node is down, reconnecting (last error: connect failed: Connection "
             "refused)");
  BOOST_TEST(h.answer_of(2)->ec == error::auth_failed);
  BOOST_TEST(h.answer_of(2)->reply.text ==
             "node:6379: not sent: AUTH failed: WRONGPASS invalid password");
  BOOST_TEST(h.answer_of(3)->ec == error::auth_failed);
  BOOST_TEST(h.mux.has_kept_cleanups());
  h.connect();
  BOOST_TEST(h.write() == (commands{"EVALSHA release 1 a t1"}));
}

BOOST_AUTO_TEST_CASE(kept_cleanups_bounded_by_count_and_age) {
  struct scenario {
    const char* name;
    std::size_t max_pending;
    std::chrono::milliseconds down_for;
    commands written;
    std::uint64_t dropped;
  };
  const scenario scenarios[] = {
      {"within both bounds", 8, 50ms, {"DEL k1", "DEL k2", "DEL k3"}, 0},
      {"over the count: the oldest go", 2, 50ms, {"DEL k2", "DEL k3"}, 1},
      {"older than deliver_for: the key has expired", 8, 150ms, {}, 3},
  };
  for (const auto& s : scenarios) {
    BOOST_TEST_CONTEXT(s.name) {
      harness h(s.max_pending);
      for (std::size_t i = 1; i <= 3; ++i)
        h.issue_while_down(i, "DEL k" + std::to_string(i), cleanup(1s, 100ms));
      h.now += s.down_for;
      h.connect();
      BOOST_TEST(h.write() == s.written);
      BOOST_TEST(h.mux.stats().cleanups_dropped == s.dropped);
      BOOST_TEST(h.warnings.size() == (s.max_pending < 3 ? 1u : 0u));
    }
  }
}

// The cap every connection of a client has (connection_options' default, which no client option
// changes): 8192 releases kept for one node, the oldest dropped beyond it, with one warning.
BOOST_AUTO_TEST_CASE(kept_cleanups_are_capped_at_8192_by_default) {
  const std::size_t cap = rd::connection_options{}.max_pending_cleanups;
  BOOST_TEST(cap == 8192u);
  harness h(cap);
  for (std::size_t i = 1; i <= cap + 1; ++i)
    h.issue_while_down(i, "DEL k" + std::to_string(i), cleanup(1s, 10s));
  h.connect();
  const auto written = h.write();
  BOOST_TEST_REQUIRE(written.size() == cap);
  BOOST_TEST(written.front() == "DEL k2");  // the oldest went
  BOOST_TEST(written.back() == "DEL k" + std::to_string(cap + 1));
  BOOST_TEST(h.mux.stats().cleanups_dropped == 1u);
  BOOST_TEST(h.warnings.size() == 1u);
}

BOOST_AUTO_TEST_CASE(kept_cleanup_age_counts_from_the_first_failure) {
  harness h;
  h.issue_while_down(1, "DEL k", cleanup(1s, 100ms));
  h.now += 60ms;
  h.connect();
  // Queued again, then the link breaks before it is written: still 100 ms from the first failure.
  h.mux.on_connection_lost(error::connection_lost, "reset", h.now);
  BOOST_TEST(h.mux.has_kept_cleanups());
  h.now += 50ms;
  h.connect();
  BOOST_TEST(h.write().empty());
  BOOST_TEST(h.mux.stats().cleanups_dropped == 1u);
}

BOOST_AUTO_TEST_CASE(close_drops_kept_cleanups_and_keeps_nothing_later) {
  harness h;
  h.issue_while_down(1, "DEL k1", cleanup(1s));
  h.issue(2, "DEL k2", cleanup(1s));
  h.mux.close(asio::error::operation_aborted, "connection closed", h.now);
  BOOST_TEST(h.answer_of(2)->ec == asio::error::operation_aborted);
  BOOST_TEST(h.answer_of(2)->reply.text == "node:6379: connection closed");
  BOOST_TEST(h.mux.stats().cleanups_dropped == 2u);
  h.issue_while_down(3, "DEL k3", cleanup(1s));
  BOOST_TEST(h.mux.idle());
  BOOST_TEST(!h.mux.has_kept_cleanups());
}

BOOST_AUTO_TEST_CASE(cancel_before_write_never_sent) {
  using ct = asio::cancellation_type;
  for (const auto type : {ct::terminal, ct::partial, ct::total}) {
    BOOST_TEST_CONTEXT("cancellation type " << static_cast<unsigned>(type)) {
      harness h;
      h.issue(1, "GET a");
      const auto id = h.issue(2, "SET b 1");
      h.issue(3, "DEL c", cleanup(1s));
      const auto cleanup_id = h.issue(4, "DEL d", cleanup(1s));
      h.mux.cancel(id, type);
      h.mux.cancel(cleanup_id, type);
      BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{2, 4}));
      BOOST_TEST(h.answers[0].ec == asio::error::operation_aborted);
      // Inside the caller's cancellation slot: posted.
      BOOST_TEST((h.answers[0].how == delivery::post));
      // A cleanup is written anyway.
      BOOST_TEST(h.write() == (commands{"GET a", "DEL c", "DEL d"}));
      h.mux.cancel(id, type);  // answered and gone: nothing happens
      BOOST_TEST(h.answers.size() == 2u);
    }
  }
}

BOOST_AUTO_TEST_CASE(cancel_after_write_drops_reply) {
  using ct = asio::cancellation_type;
  struct scenario {
    ct type;
    bool completes_at_once;
  };
  for (const auto s :
       {scenario{ct::terminal, true}, scenario{ct::partial, true}, scenario{ct::total, false}}) {
    BOOST_TEST_CONTEXT("cancellation type " << static_cast<unsigned>(s.type)) {
      harness h;
      const auto id = h.issue(1, "SET a 1");
      h.issue(2, "GET a");
      h.write();
      h.mux.cancel(id, s.type);
      BOOST_TEST(h.answers.size() == (s.completes_at_once ? 1u : 0u));
      h.reply(simple("OK"));
      h.reply(simple("1"));
      BOOST_REQUIRE(h.answer_of(1) != nullptr);
      if (s.completes_at_once) {
        // The command may have run; its reply is read and dropped so GET keeps its own.
        BOOST_TEST(h.answer_of(1)->ec == asio::error::operation_aborted);
        BOOST_TEST(h.mux.stats().replies_dropped == 1u);
      } else {
        // Total cancellation cannot undo a written command: the reply completes it.
        BOOST_TEST(!h.answer_of(1)->ec);
        BOOST_TEST(h.answer_of(1)->reply.text == "OK");
      }
      BOOST_TEST(h.answer_of(2)->reply.text == "1");
    }
  }
}

BOOST_AUTO_TEST_CASE(unresponsive_after_written_request_times_out_and_recovers_on_reply) {
  harness h;
  h.issue(1, "SET lock t1 NX PX 10000", skippable(50ms));
  h.write();
  BOOST_TEST(!h.mux.unresponsive());
  h.now += 50ms;
  h.mux.expire_deadlines(h.now, "connecting");
  BOOST_TEST(h.mux.unresponsive());

  // A new round's SET fails unsent; a release is never skipped.
  BOOST_TEST(!h.mux.add(h.mux.make_request(), skippable(50ms), h.now));
  BOOST_TEST(h.answers.back().ec == error::node_unresponsive);
  BOOST_TEST(h.answers.back().reply.text ==
             "node:6379: not sent: the node has not answered a request that timed out");
  BOOST_TEST(h.mux.stats().skipped_unresponsive == 1u);
  h.issue(2, "EVALSHA release 1 lock t1", cleanup(50ms));
  BOOST_TEST(h.write() == (commands{"EVALSHA release 1 lock t1"}));

  // The written requests are the probe: the late reply ends it.
  h.reply(simple("OK"));
  BOOST_TEST(!h.mux.unresponsive());
  h.issue(3, "SET lock t2 NX PX 10000", skippable(50ms));
  BOOST_TEST(h.write() == (commands{"SET lock t2 NX PX 10000"}));
}

BOOST_AUTO_TEST_CASE(unresponsive_while_a_connect_outlasts_a_deadline) {
  harness h;
  h.mux.on_connect_started();
  h.issue(1, "GET a", with_timeout(50ms));
  h.now += 50ms;
  h.mux.expire_deadlines(h.now, "connecting");
  BOOST_TEST(h.mux.unresponsive());
  h.issue(2, "PING", skippable());
  BOOST_TEST(h.answer_of(2)->reply.text ==
             "node:6379: not sent: a request already timed out waiting for the connection while "
             "connecting");
  // A new attempt, or a link that comes up, is judged afresh.
  h.mux.on_connection_lost(error::connect_timeout, "connect timed out", h.now);
  BOOST_TEST(!h.mux.unresponsive());
  h.mux.on_connect_started();
  BOOST_TEST(!h.mux.unresponsive());
}

// A connect attempt has no say in a request's deadline: a request queued behind it fails at its
// own deadline, however long the connect may still take (connect_timeout), and is never written
// once the link comes up. What the connect was doing, with what that may mean (the connection's
// words), is in that failure's text and in the text of every request skipped behind it.
BOOST_AUTO_TEST_CASE(request_queued_behind_a_connect_fails_at_its_own_deadline) {
  harness h;
  const auto t0 = h.now;
  constexpr std::string_view stage =
      "performing the TLS handshake (no TLS answer: is it a plain redis:// port?)";
  h.mux.on_connect_started();
  h.issue(1, "PING", skippable(100ms));
  h.now = t0 + 40ms;
  h.issue(2, "SET lock t1 NX PX 10000", skippable(100ms));
  BOOST_TEST((h.mux.next_deadline() == t0 + 100ms));
  h.now = t0 + 99ms;
  h.mux.expire_deadlines(h.now, stage);
  BOOST_TEST(h.answers.empty());
  h.now = t0 + 100ms;
  h.mux.expire_deadlines(h.now, stage);
  BOOST_TEST_REQUIRE(h.answered_tags() == (std::vector<std::size_t>{1}));
  BOOST_TEST(h.answers[0].ec == error::request_timeout);
  BOOST_TEST(h.answers[0].reply.text ==
             "node:6379: not sent within 100 ms: still performing the TLS handshake (no TLS "
             "answer: is it a plain redis:// port?)");
  // The second one keeps its own deadline, 100 ms after it was issued.
  BOOST_TEST((h.mux.next_deadline() == t0 + 140ms));
  h.issue(3, "PING", skippable(100ms));
  BOOST_TEST(h.answer_of(3)->ec == error::node_unresponsive);
  BOOST_TEST(h.answer_of(3)->reply.text ==
             "node:6379: not sent: a request already timed out waiting for the connection while "
             "performing the TLS handshake (no TLS answer: is it a plain redis:// port?)");
  h.now = t0 + 140ms;
  h.mux.expire_deadlines(h.now, "waiting for the handshake");
  BOOST_TEST(h.answer_of(2)->ec == error::request_timeout);
  BOOST_TEST(h.answer_of(2)->reply.text ==
             "node:6379: not sent within 100 ms: still waiting for the handshake");
  // The connect completes long after: nothing that timed out is sent.
  h.now = t0 + 900ms;
  h.mux.on_handshake_done(h.now);
  BOOST_TEST(h.write().empty());
  BOOST_TEST(h.mux.idle());
}

// The reactor reads ready sockets before it runs expired timers, so a node is blamed only when
// its deadline timer fires, never by the age of the oldest request when a new one is issued.
BOOST_AUTO_TEST_CASE(unresponsive_judged_when_deadlines_expire_not_at_issue) {
  harness h;
  h.issue(1, "SET a 1", skippable(50ms));
  h.write();
  h.now += 500ms;  // long past the deadline, but the timer has not run yet
  BOOST_TEST(!h.mux.unresponsive());
  h.issue(2, "SET b 1", skippable(50ms));
  h.reply(simple("OK"));  // the reply was there first
  h.mux.expire_deadlines(h.now, "connecting");
  BOOST_TEST(!h.mux.unresponsive());
  BOOST_TEST(h.answer_of(1)->reply.text == "OK");
  // SET b was issued 0 ms ago by the hand-driven clock: not due.
  BOOST_TEST(h.answers.size() == 1u);
}

BOOST_AUTO_TEST_CASE(expire_deadlines_in_order) {
  harness h;
  BOOST_TEST((h.mux.next_deadline() == time_point::max()));
  const auto t0 = h.now;
  h.issue(1, "GET a", with_timeout(300ms));
  h.issue(2, "GET b", with_timeout(100ms));
  h.issue(3, "GET c", with_timeout(200ms));
  h.issue(4, "GET d");  // no deadline of its own
  const auto id = h.issue(5, "GET e", with_timeout(150ms));
  BOOST_TEST((h.mux.next_deadline() == t0 + 100ms));

  h.now = t0 + 99ms;
  h.mux.expire_deadlines(h.now, "connecting");
  BOOST_TEST(h.answers.empty());
  h.mux.cancel(id, asio::cancellation_type::terminal);  // answered: its deadline no longer counts
  h.now = t0 + 250ms;
  h.mux.expire_deadlines(h.now, "connecting");
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{5, 2, 3}));
  BOOST_TEST((h.answers[1].how == delivery::dispatch));
  BOOST_TEST(h.answers[1].reply.text ==
             "node:6379: not sent within 100 ms: queued behind earlier requests");
  BOOST_TEST((h.mux.next_deadline() == t0 + 300ms));
  h.mux.cancel(h.issue(6, "GET f", with_timeout(10ms)), asio::cancellation_type::total);
  BOOST_TEST((h.mux.next_deadline() == t0 + 300ms));
  h.now = t0 + 300ms;
  h.mux.expire_deadlines(h.now, "connecting");
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{5, 2, 3, 6, 1}));
  BOOST_TEST((h.mux.next_deadline() == time_point::max()));
  BOOST_TEST(h.write() == (commands{"GET d"}));
}

// A sink answered with its timeout may issue a request at once (a failed round's cleanup): the
// deadlines still waiting stay the earliest the connection's timer must serve.
BOOST_AUTO_TEST_CASE(requests_issued_while_timeouts_are_answered_keep_the_deadline_order) {
  harness h;
  const auto t0 = h.now;
  h.issue(1, "SET a t1", with_timeout(100ms));
  h.issue(2, "SET b t1", with_timeout(200ms));
  std::vector<time_point> seen;
  h.on_answer = [&](const request_outcome& a) {
    seen.push_back(h.mux.next_deadline());
    if (a.tag == 1) h.issue(3, "DEL a", cleanup(500ms));
  };
  h.now = t0 + 100ms;
  h.mux.expire_deadlines(h.now, "connecting");
  BOOST_REQUIRE(seen.size() == 1u);
  BOOST_TEST((seen[0] == t0 + 200ms));  // the due one was out before anyone was answered
  BOOST_TEST((h.mux.next_deadline() == t0 + 200ms));
  BOOST_TEST(h.write() == (commands{"SET b t1", "DEL a"}));
}

BOOST_AUTO_TEST_CASE(fail_all_on_connection_lost) {
  harness h;
  h.issue(1, "SET a 1", with_timeout(50ms));
  h.issue(2, "GET a", with_timeout(500ms));
  h.write();
  h.issue(3, "GET b", with_timeout(500ms));
  h.now += 50ms;
  h.mux.expire_deadlines(h.now, "connecting");  // 1 times out: the node is unresponsive
  BOOST_TEST(h.mux.unresponsive());
  h.mux.on_connection_lost(error::connection_lost, "read failed: Connection reset by peer", h.now);
  // Written first, then queued; each once; posted (the connection's loops are running).
  BOOST_TEST(h.answered_tags() == (std::vector<std::size_t>{1, 2, 3}));
  for (std::size_t i = 1; i < h.answers.size(); ++i) {
    BOOST_TEST(h.answers[i].ec == error::connection_lost);
    BOOST_TEST((h.answers[i].how == delivery::post));
    BOOST_TEST(h.answers[i].reply.text == "node:6379: read failed: Connection reset by peer");
  }
  BOOST_TEST(!h.mux.unresponsive());  // their replies will never come
  BOOST_TEST((h.mux.next_deadline() == time_point::max()));
  BOOST_TEST(h.mux.idle());
  auto stray = simple("OK");
  BOOST_TEST(!h.mux.consume_reply(stray));  // a new link owes nothing to the old requests
}

BOOST_AUTO_TEST_CASE(drop_all_answers_nobody) {
  harness h;
  h.issue(1, "GET a", with_timeout(50ms));
  h.write();
  h.issue(2, "GET b");
  h.issue_while_down(3, "DEL c", cleanup(1s));
  h.answers.clear();
  h.mux.drop_all();
  BOOST_TEST(h.answers.empty());
  BOOST_TEST(h.mux.idle());
  BOOST_TEST((h.mux.next_deadline() == time_point::max()));
}

// At shutdown a connection waits (bounded) for what is left only if a request was ever written
// to its node: a cleanup kept for a node that was connected may still have a key to delete, but
// a node never written to (never connected, say) cannot hold anything we sent. While the link is
// down, only kept cleanups are worth waiting for: a reconnect delivers nothing else.
BOOST_AUTO_TEST_CASE(shutdown_waits_only_for_a_node_that_was_ever_written_to) {
  harness h;
  BOOST_TEST(!h.mux.worth_draining(false));  // nothing left
  // Refused from the start: a round's SET failed unsent and the cleanup behind it is kept.
  h.issue_while_down(1, "SET lock t1 NX PX 10000", skippable(100ms));
  h.issue_while_down(2, "EVALSHA release 1 lock t1", cleanup(100ms));
  BOOST_TEST(h.mux.has_kept_cleanups());
  BOOST_TEST(!h.mux.worth_draining(true));
  // A connect attempt under way, with requests queued behind it: still nothing was written.
  h.mux.on_connect_started();
  h.issue(3, "SET lock t3 NX PX 10000", skippable(100ms));
  h.issue(4, "EVALSHA release 1 lock t3", cleanup(100ms));
  BOOST_TEST(!h.mux.worth_draining(false));
  // Once something has gone out, what is left is waited for, on this link and after it broke.
  h.mux.on_handshake_done(h.now);
  BOOST_TEST(h.write() == (commands{"EVALSHA release 1 lock t1", "SET lock t3 NX PX 10000",
                                    "EVALSHA release 1 lock t3"}));
  BOOST_TEST(h.mux.worth_draining(false));  // in flight
  h.reply(simple("0"));
  h.reply(simple("OK"));
  h.reply(simple("1"));
  BOOST_TEST(!h.mux.worth_draining(false));  // idle
  h.issue(5, "SET lock t5 NX PX 10000", skippable(100ms));
  h.write();
  BOOST_TEST(h.mux.worth_draining(false));
  // The link has just gone down: the SET fails as it is, and no reconnect would deliver it.
  BOOST_TEST(!h.mux.worth_draining(true));
  h.mux.on_connection_lost(error::connection_lost, "connection closed by the server", h.now);
  h.issue_while_down(6, "EVALSHA release 1 lock t5", cleanup(100ms));
  BOOST_TEST(h.mux.worth_draining(true));  // the SET may have run: its release must get there
}

// A library request borrows its sink's bytes. One that must outlive its answer (a cleanup that
// timed out before it was written) copies them when it is answered: the sink may reuse or free
// them before the write.
BOOST_AUTO_TEST_CASE(a_sinks_borrowed_bytes_are_copied_when_a_request_outlives_its_answer) {
  harness h;
  counting_sink sink;
  std::string bytes = *encode("EVALSHA release 1 lock t1");
  h.mux.on_connect_started();
  BOOST_TEST(h.mux.add(h.mux.make_request(std::string_view(bytes), sink, 1), cleanup(50ms), h.now));
  BOOST_TEST(h.mux.add(h.mux.make_request(encode("GET a"), sink, 2), with_timeout(1s), h.now));
  BOOST_TEST(sink.references() == 2u);  // each request keeps the sink alive
  h.now += 50ms;
  h.mux.expire_deadlines(h.now, "connecting");
  BOOST_TEST(h.answer_of(1)->ec == error::request_timeout);
  std::fill(bytes.begin(), bytes.end(), 'x');  // the sink's buffer, reused
  h.mux.on_handshake_done(h.now);
  BOOST_TEST(h.write() == (commands{"EVALSHA release 1 lock t1", "GET a"}));
  h.reply(simple("1"));
  h.reply(simple("OK"));
  // A sink's reply goes to the sink itself; the timeout, a failure, went through answer_fn.
  BOOST_TEST(h.answer_of(2) == nullptr);
  BOOST_TEST((sink.replies == std::vector<std::pair<std::size_t, std::string>>{{2, "OK"}}));
  BOOST_TEST(h.mux.idle());
  BOOST_TEST(sink.references() == 0u);  // released with the requests
}

BOOST_AUTO_TEST_CASE(reply_overdue_counts_from_the_last_read_and_the_oldest_write) {
  harness h;
  const auto t0 = h.now;
  BOOST_TEST(!h.mux.reply_overdue(t0 - 1h, 100ms, t0));  // nothing in flight
  h.issue(1, "GET a");
  h.write();
  BOOST_TEST(!h.mux.reply_overdue(t0 - 1h, 100ms, t0 + 100ms));
  BOOST_TEST(h.mux.reply_overdue(t0 - 1h, 100ms, t0 + 101ms));
  // Bytes read meanwhile (a long reply arriving) keep the link alive.
  BOOST_TEST(!h.mux.reply_overdue(t0 + 50ms, 100ms, t0 + 101ms));
}

BOOST_AUTO_TEST_SUITE_END()
