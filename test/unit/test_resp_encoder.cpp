#include "resp/encoder.hpp"
#include "resp/parser.hpp"
#include "resp/script.hpp"
#include "resp/value.hpp"

#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
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

using namespace std::string_literals;
using namespace std::string_view_literals;
namespace resp = redlock::resp;

std::string encode(std::span<const std::string_view> args) {
  std::string out;
  resp::encode_command(out, args);
  return out;
}

std::string encode(std::initializer_list<std::string_view> args) {
  std::string out;
  resp::encode_command(out, args);
  return out;
}

// Parses `encoded` as exactly one reply and returns its elements' texts, checking that it is an
// array of bulk strings.
std::vector<std::string> parse_back(const std::string& encoded) {
  resp::parser p;
  boost::system::error_code ec;
  BOOST_TEST_REQUIRE(p.feed(encoded));
  std::optional<resp::value> v = p.next(ec);
  BOOST_TEST_REQUIRE(!ec, p.error_message());
  BOOST_TEST_REQUIRE(v.has_value());
  BOOST_TEST((v->kind == resp::type::array));
  std::vector<std::string> texts;
  for (const resp::value& e : v->elements) {
    BOOST_TEST((e.kind == resp::type::bulk_string));
    texts.push_back(e.text);
  }
  BOOST_TEST(!p.next(ec).has_value());
  BOOST_TEST(!ec);
  BOOST_TEST(p.buffered() == 0u);
  return texts;
}

struct encode_case {
  const char* name;
  std::vector<std::string_view> args;
  std::string expected;
};

std::vector<encode_case> encode_cases() {
  static const std::string big(100000, 'b');
  return {
      {"empty command", {}, "*0\r\n"},
      {"one argument", {"PING"}, "*1\r\n$4\r\nPING\r\n"},
      {"set", {"SET", "k", "v"}, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"},
      {"set nx px",
       {"SET", "lock:a", "token", "NX", "PX", "10000"},
       "*6\r\n$3\r\nSET\r\n$6\r\nlock:a\r\n$5\r\ntoken\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n10000\r\n"},
      {"empty argument", {"GET", ""}, "*2\r\n$3\r\nGET\r\n$0\r\n\r\n"},
      {"CR LF and NUL bytes",
       {"SET", "a\r\nb", "\0x\r"sv},
       "*3\r\n$3\r\nSET\r\n$4\r\na\r\nb\r\n$3\r\n\0x\r\r\n"s},
      {"only CRLF", {"\r\n"}, "*1\r\n$2\r\n\r\n\r\n"},
      {"argument looking like RESP", {"$3\r\nfoo"}, "*1\r\n$7\r\n$3\r\nfoo\r\n"},
      {"ten arguments",
       {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"},
       "*10\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n"
       "$1\r\nh\r\n$1\r\ni\r\n$1\r\nj\r\n"},
      {"large argument", {"SET", big}, "*2\r\n$3\r\nSET\r\n$100000\r\n" + big + "\r\n"},
  };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(resp_encoder)

BOOST_AUTO_TEST_CASE(exact_bytes) {
  for (const encode_case& c : encode_cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const std::string got = encode(c.args);
      BOOST_TEST(got == c.expected);
      BOOST_TEST(resp::encoded_size(c.args) == got.size());
    }
  }
}

BOOST_AUTO_TEST_CASE(initializer_list_overload) {
  std::string out;
  resp::encode_command(out, {"DEL", "key"});
  BOOST_TEST(out == "*2\r\n$3\r\nDEL\r\n$3\r\nkey\r\n");
}

BOOST_AUTO_TEST_CASE(appends_to_existing_content) {
  std::string out = "prefix";
  resp::encode_command(out, {"PING"});
  resp::encode_command(out, {"ECHO", "x"});
  BOOST_TEST(out == "prefix*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n");
}

BOOST_AUTO_TEST_CASE(encoded_size_matches) {
  // Sizes around the digit-count boundaries of the length prefixes.
  for (const std::size_t n : {0u, 1u, 9u, 10u, 11u, 99u, 100u, 101u, 999u, 1000u, 10000u}) {
    BOOST_TEST_CONTEXT("argument of " << n << " bytes") {
      const std::string arg(n, 'a');
      const std::vector<std::string_view> args{"SET", arg};
      BOOST_TEST(resp::encoded_size(args) == encode(args).size());
      BOOST_TEST(encode(args) ==
                 "*2\r\n$3\r\nSET\r\n$" + std::to_string(n) + "\r\n" + arg + "\r\n");
    }
  }
  for (const std::size_t count : {9u, 10u, 11u, 100u, 1000u}) {
    BOOST_TEST_CONTEXT(count << " arguments") {
      const std::vector<std::string_view> args(count, "x");
      const std::string out = encode(args);
      BOOST_TEST(resp::encoded_size(args) == out.size());
      BOOST_TEST(out.starts_with("*" + std::to_string(count) + "\r\n"));
    }
  }
}

BOOST_AUTO_TEST_CASE(round_trip_through_parser) {
  for (const encode_case& c : encode_cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const std::vector<std::string> back = parse_back(encode(c.args));
      BOOST_TEST_REQUIRE(back.size() == c.args.size());
      for (std::size_t i = 0; i < back.size(); ++i)
        BOOST_TEST(back[i] == c.args[i]);
    }
  }
  // Every byte value in one argument.
  std::string all_bytes;
  for (int b = 0; b < 256; ++b)
    all_bytes += static_cast<char>(b);
  const std::string twice = all_bytes + all_bytes;
  const std::vector<std::string_view> args{"SET", all_bytes, twice};
  const std::vector<std::string> back = parse_back(encode(args));
  BOOST_TEST_REQUIRE(back.size() == 3u);
  BOOST_TEST(back[1] == all_bytes);
  BOOST_TEST(back[2] == twice);
}

BOOST_AUTO_TEST_CASE(pipeline_of_commands) {
  std::string out;
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "key:" + std::to_string(i);
    resp::encode_command(out, {"SET", key, "value", "NX", "PX", "10000"});
  }
  resp::parser p;
  boost::system::error_code ec;
  BOOST_TEST_REQUIRE(p.feed(out));
  int n = 0;
  while (std::optional<resp::value> v = p.next(ec)) {
    BOOST_TEST_REQUIRE(v->elements.size() == 6u);
    BOOST_TEST(v->elements[1].text == "key:" + std::to_string(n));
    ++n;
  }
  BOOST_TEST(!ec);
  BOOST_TEST(n == 1000);
}

// encode_words writes what encode_command writes for the same words, whatever their kind: string
// literals, strings and views (empty, binary, long), and integers of either sign at the digit-count
// boundaries of their lengths.
BOOST_AUTO_TEST_CASE(words_encode_as_the_general_encoder_does) {
  const std::string key = "lock:a";
  const std::string_view binary("a\r\n\0b", 5);
  const std::string long_word(1000, 'x');
  BOOST_TEST(resp::encode_words<std::string>("SET", key, binary, "NX", "PX", 30000) ==
             encode({"SET", key, binary, "NX", "PX", "30000"}));
  BOOST_TEST(resp::encode_words<std::string>("EVALSHA", long_word, "1", std::string_view{}) ==
             encode({"EVALSHA", long_word, "1", ""}));
  BOOST_TEST(resp::encode_words<std::string>("PING") == encode({"PING"}));
  const long long numbers[] = {0,
                               1,
                               9,
                               10,
                               99,
                               100,
                               -1,
                               -9,
                               -10,
                               1234567890,
                               std::numeric_limits<long long>::max(),
                               std::numeric_limits<long long>::min()};
  for (const long long n : numbers) {
    BOOST_TEST_CONTEXT("the number " << n) {
      BOOST_TEST(resp::encode_words<std::string>("PX", n) == encode({"PX", std::to_string(n)}));
    }
  }
  const std::uint64_t largest = std::numeric_limits<std::uint64_t>::max();
  BOOST_TEST(resp::encode_words<std::string>(largest) == encode({std::to_string(largest)}));
  // Twelve words: a count of two digits.
  BOOST_TEST(
      resp::encode_words<std::string>("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", key, 7u) ==
      encode({"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", key, "7"}));
}

// Words encoded ahead of time count as the words they are, wherever they stand, also where they
// make the command's count two digits long; a script's one-key call begins with them.
BOOST_AUTO_TEST_CASE(words_encoded_ahead_count_as_the_words_they_are) {
  const std::string key = "lock:a";
  const std::string sha(40, 'f');
  const std::string call = resp::encode_bare_words("EVALSHA", sha, "1");
  BOOST_TEST(resp::encode_words<std::string>(resp::encoded_words{call, 3}, key, "token", 30000) ==
             encode({"EVALSHA", sha, "1", key, "token", "30000"}));
  const std::string nine = resp::encode_bare_words("a", "b", "c", "d", "e", "f", "g", "h", "i");
  BOOST_TEST(resp::encode_words<std::string>(key, resp::encoded_words{nine, 9}, 7u) ==
             encode({key, "a", "b", "c", "d", "e", "f", "g", "h", "i", "7"}));
  const redlock::detail::script lua("return 1");
  BOOST_TEST(resp::encode_words<std::string>(lua.call_with_one_key(), key) ==
             redlock::detail::encode_evalsha(lua, std::vector<std::string_view>{key}, {}));
}

// Numbers are written two digits at a time: every number up to 100 000 (odd and even digit
// counts, every pair of digits in every place) and the neighbours of each power of ten read as
// std::to_string writes them.
BOOST_AUTO_TEST_CASE(every_number_is_written_as_to_string_writes_it) {
  std::size_t wrong = 0;
  const auto check = [&](std::uint64_t n) {
    if (resp::encode_words<std::string>(n) != encode({std::to_string(n)})) ++wrong;
  };
  for (std::uint64_t n = 0; n <= 100000; ++n)
    check(n);
  for (std::uint64_t power = 10; power <= 1000000000000000000u; power *= 10) {
    check(power - 1);
    check(power);
    check(power + 1);
  }
  BOOST_TEST(wrong == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
