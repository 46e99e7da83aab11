#include "redlock/error.hpp"
#include "resp/parser.hpp"
#include "resp/value.hpp"
#include "unit/resp_values.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

// GCC 12 at -O3 reports a false -Wrestrict (a __builtin_memcpy of 2^63 bytes that "may overlap")
// in std::string's _M_replace, inlined into `"literal" + std::string` (GCC bugs 105329 and
// 105651), which -Werror turns into a failed Release build. Ignored for this file's code only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace {

std::string repeat_text(std::string_view piece, std::size_t times) {
  std::string out;
  out.reserve(piece.size() * times);
  for (std::size_t i = 0; i < times; ++i)
    out += piece;
  return out;
}

using namespace std::string_literals;
using redlock::resp::parser;
using redlock::resp::parser_limits;
using redlock::resp::type;
using redlock::resp::value;

// ---- value builders ------------------------------------------------------------------------

using redlock::test::reply::array;
using redlock::test::reply::big_number;
using redlock::test::reply::blob_error;
using redlock::test::reply::boolean;
using redlock::test::reply::bulk;
using redlock::test::reply::error_reply;
using redlock::test::reply::integer;
using redlock::test::reply::map;
using redlock::test::reply::nil;
using redlock::test::reply::number;
using redlock::test::reply::push;
using redlock::test::reply::set;
using redlock::test::reply::simple;
using redlock::test::reply::verbatim;

// ---- running the parser --------------------------------------------------------------------

// Everything a parse produced: the replies in order, then the error, if any.
struct parse_outcome {
  std::vector<value> values;
  bool failed = false;
  std::string message;

  friend bool operator==(const parse_outcome&, const parse_outcome&) = default;
};

std::ostream& operator<<(std::ostream& os, const parse_outcome& o) {
  os << o.values.size() << " values [";
  for (const value& v : o.values)
    os << ' ' << redlock::resp::to_debug_string(v);
  os << " ]";
  if (o.failed) os << " then error \"" << o.message << '"';
  return os;
}

// Drains every complete reply; records the error when the parser fails.
void drain(parser& p, parse_outcome& o) {
  for (;;) {
    boost::system::error_code ec;
    std::optional<value> v = p.next(ec);
    if (ec) {
      BOOST_TEST(!v.has_value());
      BOOST_TEST((ec == redlock::make_error_code(redlock::error::protocol_error)));
      BOOST_TEST(p.failed());
      o.failed = true;
      o.message = p.error_message();
      return;
    }
    if (!v) return;
    o.values.push_back(std::move(*v));
  }
}

enum class input_path { feed, prepare_commit };

// Feeds `input` in pieces cut at `cuts` (increasing positions), draining after each piece.
parse_outcome parse_cut(std::string_view input, const std::vector<std::size_t>& cuts,
                        const parser_limits& limits = {}, input_path path = input_path::feed) {
  parser p(limits);
  parse_outcome o;
  std::size_t begin = 0;
  auto push_piece = [&](std::size_t end) {
    const std::string_view piece = input.substr(begin, end - begin);
    begin = end;
    bool ok = true;
    if (path == input_path::feed) {
      ok = p.feed(piece);
    } else if (!piece.empty()) {
      const std::span<char> space = p.prepare(piece.size());
      ok = space.size() >= piece.size();
      if (ok) {
        std::memcpy(space.data(), piece.data(), piece.size());
        p.commit(piece.size());
      }
    }
    if (!ok) {
      BOOST_TEST(p.failed());
      o.failed = true;
      o.message = p.error_message();
      return false;
    }
    drain(p, o);
    return !o.failed;
  };
  for (const std::size_t cut : cuts) {
    if (!push_piece(cut)) return o;
  }
  push_piece(input.size());
  return o;
}

parse_outcome parse_whole(std::string_view input, const parser_limits& limits = {}) {
  return parse_cut(input, {}, limits);
}

parse_outcome parse_chunked(std::string_view input, std::size_t chunk,
                            const parser_limits& limits = {}, input_path path = input_path::feed) {
  std::vector<std::size_t> cuts;
  for (std::size_t i = chunk; i < input.size(); i += chunk)
    cuts.push_back(i);
  return parse_cut(input, cuts, limits, path);
}

// The property at the heart of an incremental parser: however the input is cut, the result is
// the one-piece result. Checks every two-piece cut, byte-at-a-time and the prepare/commit path.
void check_split_invariance(std::string_view input, const parse_outcome& whole,
                            const parser_limits& limits = {}) {
  for (std::size_t i = 0; i <= input.size(); ++i) {
    BOOST_TEST_CONTEXT("split at byte " << i) {
      const parse_outcome split = parse_cut(input, {i}, limits);
      BOOST_TEST(split == whole);
    }
  }
  BOOST_TEST_CONTEXT("byte at a time") {
    BOOST_TEST(parse_chunked(input, 1, limits) == whole);
  }
  BOOST_TEST_CONTEXT("prepare/commit in 3-byte pieces") {
    BOOST_TEST(parse_chunked(input, 3, limits, input_path::prepare_commit) == whole);
  }
}

// ---- tables --------------------------------------------------------------------------------

struct valid_case {
  const char* name;
  std::string input;
  std::vector<value> expected;
};

std::vector<valid_case> valid_cases() {
  const std::string long_text(300, 'x');
  return {
      {"simple string", "+OK\r\n", {simple("OK")}},
      {"empty simple string", "+\r\n", {simple("")}},
      {"simple error",
       "-ERR unknown command 'foo'\r\n",
       {error_reply("ERR unknown command 'foo'")}},
      {"integer zero", ":0\r\n", {integer(0)}},
      // The one-digit integers and "+OK" take a shortcut (parser.cpp); their neighbours do not.
      {"one-digit integers and their neighbours",
       "*5\r\n:1\r\n:9\r\n:10\r\n:-1\r\n:+1\r\n",
       {array({integer(1), integer(9), integer(10), integer(-1), integer(1)})}},
      {"OK and strings like it",
       "*5\r\n+OK\r\n+OKAY\r\n+O\r\n+ok\r\n+OK \r\n",
       {array({simple("OK"), simple("OKAY"), simple("O"), simple("ok"), simple("OK ")})}},
      {"negative integer", ":-42\r\n", {integer(-42)}},
      {"explicit plus integer", ":+7\r\n", {integer(7)}},
      {"int64 max", ":9223372036854775807\r\n", {integer(INT64_MAX)}},
      {"int64 min", ":-9223372036854775808\r\n", {integer(INT64_MIN)}},
      {"bulk string", "$5\r\nhello\r\n", {bulk("hello")}},
      {"empty bulk string", "$0\r\n\r\n", {bulk("")}},
      {"binary bulk string", "$7\r\na\r\nb\0c\r\r\n"s, {bulk("a\r\nb\0c\r"s)}},
      {"long bulk string", "$300\r\n" + long_text + "\r\n", {bulk(long_text)}},
      {"resp2 null bulk", "$-1\r\n", {nil()}},
      {"resp2 null array", "*-1\r\n", {nil()}},
      {"resp3 null", "_\r\n", {nil()}},
      {"array", "*2\r\n$3\r\nfoo\r\n:1\r\n", {array({bulk("foo"), integer(1)})}},
      {"empty array", "*0\r\n", {array({})}},
      {"array with nulls", "*3\r\n$-1\r\n*-1\r\n_\r\n", {array({nil(), nil(), nil()})}},
      {"nested arrays",
       "*3\r\n*2\r\n:1\r\n:2\r\n*0\r\n*1\r\n*1\r\n+deep\r\n",
       {array({array({integer(1), integer(2)}), array({}), array({array({simple("deep")})})})}},
      {"map",
       "%2\r\n+first\r\n:1\r\n$6\r\nsecond\r\n:2\r\n",
       {map({simple("first"), integer(1), bulk("second"), integer(2)})}},
      {"empty map", "%0\r\n", {map({})}},
      {"map of aggregates",
       "%1\r\n*1\r\n:1\r\n~1\r\n#t\r\n",
       {map({array({integer(1)}), set({boolean(true)})})}},
      {"set", "~3\r\n+a\r\n+b\r\n:3\r\n", {set({simple("a"), simple("b"), integer(3)})}},
      {"push",
       ">3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$2\r\nhi\r\n",
       {push({bulk("message"), bulk("chan"), bulk("hi")})}},
      {"double", ",1.5\r\n", {number("1.5", 1.5)}},
      {"negative double", ",-0.25\r\n", {number("-0.25", -0.25)}},
      {"integral double", ",10\r\n", {number("10", 10.0)}},
      {"exponent double", ",1.5e3\r\n", {number("1.5e3", 1500.0)}},
      {"plus double", ",+2.5\r\n", {number("+2.5", 2.5)}},
      {"inf", ",inf\r\n", {number("inf", INFINITY)}},
      {"negative inf", ",-inf\r\n", {number("-inf", -INFINITY)}},
      {"true", "#t\r\n", {boolean(true)}},
      {"false", "#f\r\n", {boolean(false)}},
      {"big number",
       "(3492890328409238509324850943850943825024385\r\n",
       {big_number("3492890328409238509324850943850943825024385")}},
      {"negative big number", "(-12345678901234567890\r\n", {big_number("-12345678901234567890")}},
      {"verbatim string", "=15\r\ntxt:Some string\r\n", {verbatim("txt", "Some string")}},
      {"empty verbatim text", "=4\r\nmkd:\r\n", {verbatim("mkd", "")}},
      {"blob error", "!21\r\nSYNTAX invalid syntax\r\n", {blob_error("SYNTAX invalid syntax")}},
      {"attribute before a top-level reply",
       "|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n"
       "*2\r\n:2039123\r\n:9543892\r\n",
       {array({integer(2039123), integer(9543892)})}},
      {"attribute inside an array",
       "*2\r\n|1\r\n+ttl\r\n:3600\r\n:1\r\n:2\r\n",
       {array({integer(1), integer(2)})}},
      {"attribute before the last element",
       "*2\r\n:1\r\n|1\r\n+a\r\n*1\r\n:9\r\n:2\r\n",
       {array({integer(1), integer(2)})}},
      {"attribute on a map key",
       "%1\r\n|1\r\n+a\r\n+b\r\n+key\r\n+value\r\n",
       {map({simple("key"), simple("value")})}},
      {"empty attribute", "|0\r\n+OK\r\n", {simple("OK")}},
      {"two attributes in a row",
       "|1\r\n+a\r\n+b\r\n|1\r\n+c\r\n|1\r\n+d\r\n+e\r\n+f\r\n:5\r\n",
       {integer(5)}},
      {"several replies in one chunk",
       "+OK\r\n:1\r\n$-1\r\n-ERR x\r\n*1\r\n+y\r\n",
       {simple("OK"), integer(1), nil(), error_reply("ERR x"), array({simple("y")})}},
  };
}

// All the valid cases back to back: one stream with every type, for the split tests.
valid_case mixed_case() {
  valid_case mixed{"long mixed stream", "", {}};
  for (valid_case& c : valid_cases()) {
    mixed.input += c.input;
    for (value& v : c.expected)
      mixed.expected.push_back(std::move(v));
  }
  return mixed;
}

struct bad_case {
  const char* name;
  std::string input;
  std::string words;  // expected within error_message()
};

std::vector<bad_case> malformed_cases() {
  return {
      {"unknown type byte", "?x\r\n", "unknown type byte 0x3f"},
      {"NUL type byte", "\0\r\n"s, "unknown type byte 0x00"},
      {"high type byte", "\xff\r\n", "unknown type byte 0xff"},
      {"bare CRLF", "\r\n", "unknown type byte 0x0d"},
      {"inline command", "PING\r\n", "unknown type byte 0x50"},
      {"unknown type inside array", "*2\r\n:1\r\n@\r\n", "unknown type byte 0x40"},
      {"CR without LF in simple", "+OK\rX\r\n", "CR not followed by LF"},
      {"CR without LF in header", "$3\rX", "CR not followed by LF"},
      {"letters as integer", ":abc\r\n", "bad integer"},
      {"empty integer", ":\r\n", "empty integer"},
      {"space before integer", ": 1\r\n", "bad integer"},
      {"space after integer", ":1 \r\n", "bad integer"},
      {"lone minus", ":-\r\n", "bad integer"},
      {"plus minus", ":+-1\r\n", "bad integer"},
      {"double sign", ":--1\r\n", "bad integer"},
      {"integer above int64", ":9223372036854775808\r\n", "out of int64 range"},
      {"integer below int64", ":-9223372036854775809\r\n", "out of int64 range"},
      {"letters as bulk length", "$abc\r\n", "bad bulk length"},
      {"empty bulk length", "$\r\n", "empty bulk length"},
      {"plus bulk length", "$+5\r\nhello\r\n", "bad bulk length"},
      {"space in bulk length", "$ 5\r\nhello\r\n", "bad bulk length"},
      {"junk after bulk length", "$5x\r\nhello\r\n", "bad bulk length"},
      {"bulk length -2", "$-2\r\n", "negative bulk length"},
      {"bulk length -0", "$-0\r\n", "negative bulk length"},
      {"bulk length overflow", "$99999999999999999999999\r\n", "bulk length '9"},
      {"array length -2", "*-2\r\n", "negative array length"},
      {"array length overflow", "*99999999999999999999\r\n", "overflows"},
      {"plus array length", "*+1\r\n:1\r\n", "bad array length"},
      {"map length -1", "%-1\r\n", "negative map length"},
      {"set length -1", "~-1\r\n", "negative set length"},
      {"push length -1", ">-1\r\n", "negative push length"},
      {"attribute length -1", "|-1\r\n", "negative attribute length"},
      {"verbatim length -1", "=-1\r\n", "negative verbatim length"},
      {"blob error length -1", "!-1\r\n", "negative blob error length"},
      {"bulk payload too long", "$3\r\nabcd\r\n", "missing CRLF after bulk payload"},
      {"bulk payload CR without LF", "$3\r\nabc\rX", "missing CRLF after bulk payload"},
      {"bulk in array missing CRLF", "*1\r\n$1\r\nab\r\n", "missing CRLF after bulk payload"},
      {"bad boolean", "#x\r\n", "bad boolean"},
      {"empty boolean", "#\r\n", "bad boolean"},
      {"long boolean", "#tt\r\n", "bad boolean"},
      {"upper-case boolean", "#T\r\n", "bad boolean"},
      {"letters as double", ",abc\r\n", "bad double"},
      {"empty double", ",\r\n", "bad double"},
      {"junk after double", ",1.5x\r\n", "bad double"},
      {"space before double", ", 1\r\n", "bad double"},
      {"hex double", ",0x10\r\n", "bad double"},
      {"double sign double", ",--1\r\n", "bad double"},
      {"bad big number", "(12a\r\n", "bad big number"},
      {"empty big number", "(\r\n", "bad big number"},
      {"sign-only big number", "(-\r\n", "bad big number"},
      {"null with payload", "_x\r\n", "bad null"},
      {"verbatim too short", "=3\r\ntxt\r\n", "verbatim string of 3 bytes"},
      {"verbatim without colon", "=5\r\ntxt_a\r\n", "verbatim string of 5 bytes"},
      {"streamed bulk", "$?\r\n;4\r\nabcd\r\n;0\r\n", "streamed aggregates are unsupported"},
      {"streamed array", "*?\r\n:1\r\n.\r\n", "streamed aggregates are unsupported"},
      {"streamed map", "%?\r\n", "streamed aggregates are unsupported"},
      {"streamed chunk", ";4\r\nabcd\r\n", "streamed aggregates are unsupported"},
      {"streamed end", ".\r\n", "streamed aggregates are unsupported"},
      {"error after valid replies", "+OK\r\n:1\r\n:x\r\n+never\r\n", "bad integer"},
      {"one digit without LF", ":1\rX", "CR not followed by LF"},
      {"OK without LF", "+OK\rX\r\n", "CR not followed by LF"},
      {"non-digit in a one-character integer", ":x\r\n", "bad integer"},
  };
}

struct limit_case {
  const char* name;
  std::string input;
  parser_limits limits;
  std::string words;
};

std::string nested_arrays(std::size_t depth) {
  std::string s;
  for (std::size_t i = 0; i < depth; ++i)
    s += "*1\r\n";
  return s + ":1\r\n";
}

parser_limits with(std::size_t parser_limits::*field, std::size_t v) {
  parser_limits l;
  l.*field = v;
  return l;
}

std::vector<limit_case> limit_cases() {
  return {
      {"depth 33", nested_arrays(33), {}, "resp: nesting depth 33 exceeds limit 32"},
      {"depth with small limit", nested_arrays(3), with(&parser_limits::max_depth, 2),
       "nesting depth 3 exceeds limit 2"},
      {"attribute counts as depth", "*1\r\n|1\r\n+a\r\n+b\r\n:1\r\n",
       with(&parser_limits::max_depth, 1), "nesting depth 2 exceeds limit 1"},
      {"empty aggregate counts as depth", "*1\r\n*0\r\n", with(&parser_limits::max_depth, 1),
       "nesting depth 2 exceeds limit 1"},
      {"bulk length",
       "$99999999999\r\n",
       {},
       "resp: bulk length 99999999999 exceeds limit 67108864"},
      {"verbatim length", "=10\r\ntxt:abcdef\r\n", with(&parser_limits::max_bulk_length, 4),
       "verbatim length 10 exceeds limit 4"},
      {"blob error length", "!5\r\nERR x\r\n", with(&parser_limits::max_bulk_length, 4),
       "blob error length 5 exceeds limit 4"},
      {"map size", "%1000000\r\n", {}, "resp: aggregate of 2000000 elements exceeds limit 1048576"},
      {"array size",
       "*2000000\r\n",
       {},
       "resp: aggregate of 2000000 elements exceeds limit 1048576"},
      {"huge array size", "*9223372036854775807\r\n", {}, "aggregate of 9223372036854775807"},
      {"huge map size", "%9223372036854775807\r\n", {}, "aggregate of 18446744073709551614"},
      {"set size with small limit", "~3\r\n:1\r\n:2\r\n:3\r\n",
       with(&parser_limits::max_aggregate_size, 2), "aggregate of 3 elements exceeds limit 2"},
      {"attribute size", "|2\r\n+a\r\n+b\r\n+c\r\n+d\r\n+OK\r\n",
       with(&parser_limits::max_aggregate_size, 3), "aggregate of 4 elements exceeds limit 3"},
      {"simple line length",
       "+" + std::string(65537, 'a'),
       {},
       "resp: line longer than 65536 bytes without CRLF"},
      {"simple line length with CRLF",
       "+" + std::string(65537, 'a') + "\r\n",
       {},
       "resp: line longer than 65536 bytes without CRLF"},
      {"header line length", "$" + std::string(11, '1') + "\r\n",
       with(&parser_limits::max_line_length, 10), "line longer than 10 bytes"},
      {"reply size across many small elements", "*1000\r\n" + repeat_text(":1\r\n", 1000),
       with(&parser_limits::max_reply_size, 100), "resp: reply of 103+ bytes exceeds limit 100"},
      // The shortcut for the commonest replies must not step around the limits.
      {"a bare +OK over a tiny reply limit", "+OK\r\n", with(&parser_limits::max_reply_size, 4),
       "resp: reply of 5+ bytes exceeds limit 4"},
      {"a bare :1 over a tiny memory limit", ":1\r\n",
       with(&parser_limits::max_reply_memory, sizeof(value) - 1), "bytes of memory"},
      {"reply size counts skipped attributes",
       "|1\r\n+a\r\n$20\r\n" + std::string(20, 'x') + "\r\n+OK\r\n",
       with(&parser_limits::max_reply_size, 20), "exceeds limit 20"},
  };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(resp_parser)

BOOST_AUTO_TEST_CASE(every_type_parses) {
  for (const valid_case& c : valid_cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const parse_outcome got = parse_whole(c.input);
      BOOST_TEST(got == (parse_outcome{c.expected, false, ""}));
    }
  }
}

BOOST_AUTO_TEST_CASE(every_split_point) {
  std::vector<valid_case> cases = valid_cases();
  cases.push_back(mixed_case());
  for (const valid_case& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      const parse_outcome whole = parse_whole(c.input);
      BOOST_TEST(whole == (parse_outcome{c.expected, false, ""}));
      check_split_invariance(c.input, whole);
    }
  }
}

BOOST_AUTO_TEST_CASE(nan_double) {
  for (const std::string input : {",nan\r\n", ",-nan\r\n", ",NaN\r\n"}) {
    BOOST_TEST_CONTEXT(input) {
      const parse_outcome got = parse_whole(input);
      BOOST_TEST_REQUIRE(got.values.size() == 1u);
      BOOST_TEST((got.values[0].kind == type::double_number));
      BOOST_TEST(std::isnan(got.values[0].number));
      BOOST_TEST(got.values[0].text == input.substr(1, input.size() - 3));
    }
  }
}

BOOST_AUTO_TEST_CASE(reply_available_as_soon_as_complete) {
  parser p;
  boost::system::error_code ec;
  BOOST_TEST(p.error_message().empty());
  BOOST_TEST(p.feed("+OK\r\n:1"));
  std::optional<value> v = p.next(ec);
  BOOST_TEST(!ec);
  BOOST_TEST((v == simple("OK")));
  BOOST_TEST(!p.next(ec).has_value());
  BOOST_TEST(!ec);
  BOOST_TEST(p.buffered() == 2u);
  BOOST_TEST(p.feed("\r\n"));
  v = p.next(ec);
  BOOST_TEST((v == integer(1)));
  BOOST_TEST(!p.next(ec).has_value());
  BOOST_TEST(!ec);
  BOOST_TEST(p.buffered() == 0u);
  BOOST_TEST(!p.failed());
}

BOOST_AUTO_TEST_CASE(limits_are_enforced) {
  for (const limit_case& c : limit_cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const parse_outcome whole = parse_whole(c.input, c.limits);
      BOOST_TEST(whole.failed);
      BOOST_TEST(whole.message.find(c.words) != std::string::npos, "message: " << whole.message);
      BOOST_TEST(parse_chunked(c.input, 1, c.limits) == whole);
      BOOST_TEST(parse_chunked(c.input, 4096, c.limits) == whole);
    }
  }
}

BOOST_AUTO_TEST_CASE(limits_are_inclusive) {
  // Exactly at each limit is fine.
  BOOST_TEST(!parse_whole(nested_arrays(32)).failed);
  BOOST_TEST(!parse_whole(nested_arrays(2), with(&parser_limits::max_depth, 2)).failed);
  BOOST_TEST(!parse_whole("$4\r\nabcd\r\n", with(&parser_limits::max_bulk_length, 4)).failed);
  BOOST_TEST(
      !parse_whole("%1\r\n:1\r\n:2\r\n", with(&parser_limits::max_aggregate_size, 2)).failed);
  BOOST_TEST(!parse_whole("+" + std::string(65536, 'a') + "\r\n").failed);
  const parser_limits small_line = with(&parser_limits::max_line_length, 3);
  BOOST_TEST(parse_chunked("+abc\r\n:123\r\n", 1, small_line).values.size() == 2u);
  // The buffer limit counts what is unconsumed, not the total: a long stream of small replies
  // passes through a small buffer.
  std::string stream;
  for (int i = 0; i < 1000; ++i)
    stream += "+OK\r\n";
  // Chunks of 10 leave at most 4 bytes of a partial reply behind: never more than 14 buffered.
  const parse_outcome o = parse_chunked(stream, 10, with(&parser_limits::max_buffer, 14));
  BOOST_TEST(!o.failed, o.message);
  BOOST_TEST(o.values.size() == 1000u);
}

// What a reply costs in memory is bounded, not only its wire size: an empty array is 4 bytes on
// the wire and a whole value in memory, so a reply well within the wire limit can take dozens of
// times its size once parsed. Each value counts sizeof(value) plus its text; an aggregate's
// elements count as soon as its header declares them.
BOOST_AUTO_TEST_CASE(reply_memory_is_bounded) {
  const std::size_t per_value = sizeof(redlock::resp::value);
  auto empty_arrays = [](std::size_t n) {
    std::string reply = "*" + std::to_string(n) + "\r\n";
    for (std::size_t i = 0; i < n; ++i)
      reply += "*0\r\n";
    return reply;
  };
  // 1000 empty arrays: 4 KB on the wire, 1001 values in memory.
  const std::string wide = empty_arrays(1000);
  parser_limits limits = with(&parser_limits::max_reply_size, 64 * 1024);
  limits.max_reply_memory = 1001 * per_value;
  BOOST_TEST(!parse_chunked(wide, 7, limits).failed);  // exactly at the limit
  limits.max_reply_memory = 1000 * per_value;
  parse_outcome o = parse_chunked(wide, 7, limits);
  BOOST_TEST(o.failed);
  BOOST_TEST(o.message.find("memory") != std::string::npos, o.message);

  // Nested one inside the other: 4 bytes and one value per level, and the integer at the bottom.
  limits.max_reply_memory = 32 * per_value;
  o = parse_whole(nested_arrays(32), limits);
  BOOST_TEST(o.failed);
  BOOST_TEST(o.message.find("memory") != std::string::npos, o.message);
  limits.max_reply_memory = 33 * per_value;
  BOOST_TEST(!parse_whole(nested_arrays(32), limits).failed);

  // Text counts by its bytes; the budget is per reply, not per stream.
  limits.max_reply_memory = per_value + 10;
  o = parse_chunked("$10\r\n0123456789\r\n$10\r\n0123456789\r\n", 3, limits);
  BOOST_TEST(!o.failed, o.message);
  BOOST_TEST(o.values.size() == 2u);
  BOOST_TEST(parse_whole("$11\r\n01234567890\r\n", limits).failed);
}

BOOST_AUTO_TEST_CASE(buffer_limit) {
  {
    parser p(with(&parser_limits::max_buffer, 16));
    BOOST_TEST(!p.feed(std::string(17, '+')));
    BOOST_TEST(p.failed());
    BOOST_TEST(p.error_message() == "resp: 17 bytes buffered exceed limit 16");
  }
  {
    // A partial line stays buffered, so the second piece crosses the limit.
    parser p(with(&parser_limits::max_buffer, 16));
    boost::system::error_code ec;
    BOOST_TEST(p.feed("+0123456789"));
    BOOST_TEST(!p.next(ec).has_value());
    BOOST_TEST(!ec);
    BOOST_TEST(!p.feed("abcdefghij"));
    BOOST_TEST(p.error_message() == "resp: 21 bytes buffered exceed limit 16");
    BOOST_TEST(!p.next(ec).has_value());
    BOOST_TEST((ec == redlock::make_error_code(redlock::error::protocol_error)));
  }
  {
    parser p(with(&parser_limits::max_buffer, 16));
    BOOST_TEST(p.prepare(16).size() == 16u);
    p.commit(0);
    BOOST_TEST(p.prepare(17).empty());
    BOOST_TEST(p.failed());
    BOOST_TEST(p.error_message() == "resp: 17 bytes buffered exceed limit 16");
  }
  {
    // prepare() never hands out more space than the limit leaves.
    parser p(with(&parser_limits::max_buffer, 16));
    const std::span<char> s = p.prepare(4);
    BOOST_TEST(s.size() >= 4u);
    BOOST_TEST(s.size() <= 16u);
  }
}

BOOST_AUTO_TEST_CASE(malformed_inputs_fail) {
  for (const bad_case& c : malformed_cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const parse_outcome whole = parse_whole(c.input);
      BOOST_TEST(whole.failed);
      BOOST_TEST(whole.message.rfind("resp: ", 0) == 0u, "message: " << whole.message);
      BOOST_TEST(whole.message.find(c.words) != std::string::npos, "message: " << whole.message);
      check_split_invariance(c.input, whole);
    }
  }
}

BOOST_AUTO_TEST_CASE(failed_parser_stays_failed) {
  parser p;
  boost::system::error_code ec;
  BOOST_TEST(p.feed("+OK\r\n#x\r\n+after\r\n"));
  BOOST_TEST((p.next(ec) == simple("OK")));
  BOOST_TEST(!ec);
  BOOST_TEST(!p.next(ec).has_value());
  const boost::system::error_code first = ec;
  const std::string message = p.error_message();
  BOOST_TEST((first == redlock::make_error_code(redlock::error::protocol_error)));
  BOOST_TEST(message == "resp: bad boolean 'x'");
  for (int i = 0; i < 3; ++i) {
    boost::system::error_code again;
    BOOST_TEST(!p.next(again).has_value());
    BOOST_TEST((again == first));
    BOOST_TEST(p.error_message() == message);
    BOOST_TEST(p.failed());
  }
  BOOST_TEST(!p.feed("+more\r\n"));
  BOOST_TEST(p.prepare(16).empty());
  BOOST_TEST(p.error_message() == message);
}

BOOST_AUTO_TEST_CASE(reset_recovers) {
  parser p(with(&parser_limits::max_depth, 1));
  boost::system::error_code ec;
  BOOST_TEST(p.feed("*1\r\n*1\r\n:1\r\n"));
  BOOST_TEST(!p.next(ec).has_value());
  BOOST_TEST(ec.failed());
  BOOST_TEST(p.failed());
  p.reset();
  BOOST_TEST(!p.failed());
  BOOST_TEST(p.error_message().empty());
  BOOST_TEST(p.buffered() == 0u);
  // A partial reply before reset() must not leak into what follows it.
  BOOST_TEST(p.feed("*2\r\n:1\r\n$5\r\nab"));
  BOOST_TEST(!p.next(ec).has_value());
  BOOST_TEST(!ec);
  p.reset();
  BOOST_TEST(p.feed("*1\r\n:7\r\n"));
  BOOST_TEST((p.next(ec) == array({integer(7)})));
  BOOST_TEST(!ec);
  BOOST_TEST(!p.next(ec).has_value());
  BOOST_TEST(!ec);
  // The depth limit is kept across reset().
  BOOST_TEST(p.feed("*1\r\n*0\r\n"));
  BOOST_TEST(!p.next(ec).has_value());
  BOOST_TEST(p.error_message() == "resp: nesting depth 2 exceeds limit 1");
}

BOOST_AUTO_TEST_CASE(prepare_commit) {
  parser p;
  boost::system::error_code ec;
  std::span<char> space = p.prepare(64);
  BOOST_TEST_REQUIRE(space.size() >= 64u);
  const std::string_view first = "$5\r\nhel";
  std::memcpy(space.data(), first.data(), first.size());
  p.commit(first.size());  // less than prepared: only these bytes become input
  BOOST_TEST(p.buffered() == first.size());
  BOOST_TEST(!p.next(ec).has_value());
  BOOST_TEST(!ec);
  space = p.prepare(100000);  // forces growth with a partial bulk pending
  BOOST_TEST_REQUIRE(space.size() >= 100000u);
  const std::string_view second = "lo\r\n+OK\r\n";
  std::memcpy(space.data(), second.data(), second.size());
  p.commit(second.size());
  BOOST_TEST((p.next(ec) == bulk("hello")));
  BOOST_TEST((p.next(ec) == simple("OK")));
  BOOST_TEST(!p.next(ec).has_value());
  BOOST_TEST(!ec);
  // A read may be pending on a prepared span while earlier replies are drained.
  BOOST_TEST(p.feed("+OK\r\n"));
  space = p.prepare(16);
  BOOST_TEST_REQUIRE(space.size() >= 16u);
  BOOST_TEST((p.next(ec) == simple("OK")));
  std::memcpy(space.data(), ":1\r\n", 4);
  p.commit(4);
  BOOST_TEST((p.next(ec) == integer(1)));
  BOOST_TEST(!ec);
  // commit(0) and an unused prepare() change nothing.
  (void)p.prepare(10);
  p.commit(0);
  BOOST_TEST(p.buffered() == 0u);
  BOOST_TEST(!p.next(ec).has_value());
  BOOST_TEST(!ec);
}

BOOST_AUTO_TEST_CASE(large_array_in_small_chunks) {
  constexpr int n = 100000;
  std::string input = "*" + std::to_string(n) + "\r\n";
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      const std::string s = "value-" + std::to_string(i);
      input += "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
    } else {
      input += ":" + std::to_string(i) + "\r\n";
    }
  }
  const auto start = std::chrono::steady_clock::now();
  parser p;
  std::vector<value> got;
  std::size_t max_buffered = 0;
  boost::system::error_code ec;
  for (std::size_t pos = 0; pos < input.size(); pos += 7) {
    const std::string_view chunk = std::string_view(input).substr(pos, 7);
    const std::span<char> space = p.prepare(chunk.size());
    BOOST_TEST_REQUIRE(space.size() >= chunk.size());
    std::memcpy(space.data(), chunk.data(), chunk.size());
    p.commit(chunk.size());
    max_buffered = std::max(max_buffered, p.buffered());
    while (std::optional<value> v = p.next(ec))
      got.push_back(std::move(*v));
    BOOST_TEST_REQUIRE(!ec);
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  BOOST_TEST_REQUIRE(got.size() == 1u);
  const value& a = got[0];
  BOOST_TEST((a.kind == type::array));
  BOOST_TEST_REQUIRE(a.elements.size() == static_cast<std::size_t>(n));
  BOOST_TEST((a.elements[0] == bulk("value-0")));
  BOOST_TEST((a.elements[1] == integer(1)));
  BOOST_TEST((a.elements[n - 2] == bulk("value-" + std::to_string(n - 2))));
  BOOST_TEST((a.elements[n - 1] == integer(n - 1)));
  // Consumed elements leave the buffer: only a partial element plus one chunk stays behind.
  BOOST_TEST(max_buffered < 32u);
  BOOST_TEST(p.buffered() == 0u);
  // Re-parsing from the start on every chunk would be quadratic: hours, not seconds.
  BOOST_TEST(std::chrono::duration_cast<std::chrono::seconds>(elapsed).count() < 30);
}

BOOST_AUTO_TEST_CASE(large_bulk_in_chunks) {
  const std::string payload(1 << 20, 'z');
  const std::string input =
      "*2\r\n$" + std::to_string(payload.size()) + "\r\n" + payload + "\r\n+tail\r\n";
  const parse_outcome o = parse_chunked(input, 4096, {}, input_path::prepare_commit);
  BOOST_TEST(!o.failed, o.message);
  BOOST_TEST_REQUIRE(o.values.size() == 1u);
  BOOST_TEST((o.values[0] == array({bulk(payload), simple("tail")})));
}

BOOST_AUTO_TEST_CASE(value_helpers) {
  BOOST_TEST(redlock::resp::to_string(type::simple_string) == "simple_string");
  BOOST_TEST(redlock::resp::to_string(type::verbatim_string) == "verbatim_string");
  BOOST_TEST(redlock::resp::to_string(type::blob_error) == "blob_error");

  BOOST_TEST(error_reply("NOSCRIPT No matching script").error_code_word() == "NOSCRIPT");
  BOOST_TEST(error_reply("ERR").error_code_word() == "ERR");
  BOOST_TEST(blob_error("WRONGPASS invalid username-password pair").error_code_word() ==
             "WRONGPASS");
  BOOST_TEST(error_reply("Error: no code").error_code_word().empty());
  BOOST_TEST(error_reply("").error_code_word().empty());
  BOOST_TEST(simple("OK").error_code_word().empty());
  BOOST_TEST(bulk("ERR x").error_code_word().empty());

  const value v = array({simple("OK"), bulk("a\r\n\"b\""), integer(-3), nil(), boolean(true),
                         map({simple("k"), number("1.5", 1.5)}), error_reply("ERR x")});
  const std::string s = redlock::resp::to_debug_string(v);
  BOOST_TEST(s.find('\n') == std::string::npos);
  BOOST_TEST(s.find("\\r\\n") != std::string::npos, s);
  BOOST_TEST(s.find("(integer) -3") != std::string::npos, s);
  BOOST_TEST(s.find("(nil)") != std::string::npos, s);
  BOOST_TEST(s.find("ERR x") != std::string::npos, s);
  // Bounded even for huge values.
  BOOST_TEST(redlock::resp::to_debug_string(bulk(std::string(1 << 20, 'q'))).size() < 1024u);
}

// A connection reads every reply into one value. Whatever that value held before (an "OK" of
// another kind, an aggregate, an error, an integer), each reply must read exactly as it does
// into a fresh value, the shortcuts for "+OK" and ":<digit>" included.
BOOST_AUTO_TEST_CASE(one_value_reused_for_every_reply_reads_as_a_fresh_one) {
  const std::string replies[] = {"+OK\r\n",     "+OK\r\n",          ":1\r\n",
                                 "+OK\r\n",     "$2\r\nOK\r\n",     "+OK\r\n",
                                 "-ERR OK\r\n", "+OK\r\n",          "*2\r\n+OK\r\n:1\r\n",
                                 "+OK\r\n",     "+OKAY\r\n",        "+OK\r\n",
                                 ":0\r\n",      ":12\r\n",          "_\r\n",
                                 "+OK\r\n",     "=6\r\ntxt:OK\r\n", "+OK\r\n",
                                 ",1.5\r\n",    "+OK\r\n",          "%1\r\n+OK\r\n+OK\r\n",
                                 ":5\r\n"};
  std::string all;
  for (const auto& reply : replies)
    all += reply;
  parser reused;
  BOOST_TEST_REQUIRE(reused.feed(all));
  value v;
  for (std::size_t i = 0; i < std::size(replies); ++i) {
    const std::string& reply = replies[i];
    BOOST_TEST_CONTEXT("reply " << i) {
      boost::system::error_code ec;
      BOOST_TEST_REQUIRE(reused.next(v, ec));
      BOOST_TEST_REQUIRE(!ec);
      parser fresh;
      BOOST_TEST_REQUIRE(fresh.feed(reply));
      const std::optional<value> expected = fresh.next(ec);
      BOOST_TEST_REQUIRE(expected.has_value());
      BOOST_TEST(v == *expected, redlock::resp::to_debug_string(v)
                                     << " against " << redlock::resp::to_debug_string(*expected));
    }
  }
  boost::system::error_code ec;
  BOOST_TEST(!reused.next(v, ec));
  BOOST_TEST(!ec);
}

BOOST_AUTO_TEST_SUITE_END()

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
