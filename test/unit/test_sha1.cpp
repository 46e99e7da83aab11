// sha1_hex names Lua scripts for EVALSHA: it must be SHA-1 (not another digest OpenSSL offers),
// over the bytes as given, written as Redis writes it.

#include "resp/script.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>

namespace {

using redlock::detail::sha1_hex;

struct vector_case {
  std::string_view name;
  std::string_view input;
  std::string_view digest;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(sha1)

// FIPS 180-4 examples (NIST "SHA1ShortMsg"/"SHA1LongMsg" and the classic RFC 3174 vectors).
BOOST_AUTO_TEST_CASE(standard_vectors) {
  const vector_case cases[] = {
      {"empty", "", "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
      {"abc", "abc", "a9993e364706816aba3e25717850c26c9cd0d89d"},
      {"448 bits", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "84983e441c3bd26ebaae4aa1f95129e5e54670f1"},
      {"896 bits",
       "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmn"
       "opq"
       "rsmnopqrstnopqrstu",
       "a49b2446a02c645bf419f995b67091253a04a259"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      BOOST_TEST(sha1_hex(c.input) == c.digest);
    }
  }
}

BOOST_AUTO_TEST_CASE(one_million_a) {
  const std::string input(1'000'000, 'a');
  BOOST_TEST(sha1_hex(input) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

BOOST_AUTO_TEST_CASE(binary_input) {
  // NUL and high bytes must be hashed as bytes, not stop the input or sign-extend. Expected value
  // from `printf '\x00\xff\x80\x7f' | sha1sum`.
  const std::string input("\x00\xff\x80\x7f", 4);
  BOOST_TEST(sha1_hex(input) == "20e828176973e578f91799f8cf0f41514b3355e9");
}

// The name Redis itself gives a script: `redis-cli SCRIPT LOAD 'return redis.call("GET",
// KEYS[1])'` on redis-server 7.0.15 answered this digest.
BOOST_AUTO_TEST_CASE(matches_redis_script_load) {
  BOOST_TEST(sha1_hex(R"(return redis.call("GET", KEYS[1]))") ==
             "d1ad8397c172dc0a63e271f0c4c4250ca8d5d1fb");
}

BOOST_AUTO_TEST_CASE(lower_case_hex_of_40_characters) {
  const std::string digest = sha1_hex("redlock");
  BOOST_TEST(digest.size() == 40u);
  BOOST_TEST(digest.find_first_not_of("0123456789abcdef") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
