#include "redlock/node_config.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

// GCC 12 at -O3 reports a false -Wrestrict (a __builtin_memcpy of 2^63 bytes that "may overlap")
// in std::string's _M_replace, inlined into `"literal" + std::string` (GCC bugs 105329 and
// 105651), which -Werror turns into a failed Release build. Ignored for this file's code only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace {

redlock::node_config make(std::string host, std::uint16_t port, std::string username = {},
                          std::string password = {}, int database = 0) {
  redlock::node_config c;
  c.host = std::move(host);
  c.port = port;
  c.username = std::move(username);
  c.password = std::move(password);
  c.database = database;
  return c;
}

// The message of the std::invalid_argument that `parse` throws, or a note that it did not throw.
template <class Parse>
std::string message_of(Parse parse) {
  try {
    parse();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no exception>";
}

std::string error_of(std::string_view url) {
  return message_of([&] { (void)redlock::node_config::from_url(url); });
}

std::string list_error_of(std::string_view urls) {
  return message_of([&] { (void)redlock::node_config::from_url_list(urls); });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(node_config)

BOOST_AUTO_TEST_CASE(valid_urls) {
  const struct {
    std::string_view url;
    redlock::node_config expected;
  } cases[] = {
      {"redis://localhost", make("localhost", 6379)},
      {"redis://127.0.0.1:6380", make("127.0.0.1", 6380)},
      {"redis://h:1", make("h", 1)},
      {"redis://h:65535", make("h", 65535)},
      {"redis://h:06379", make("h", 6379)},
      {"redis://redis-1.example.com:7000/3", make("redis-1.example.com", 7000, "", "", 3)},
      {"redis://h/", make("h", 6379)},
      {"redis://h:6379/", make("h", 6379)},
      {"redis://h/0", make("h", 6379)},
      {"redis://h/15", make("h", 6379, "", "", 15)},
      {"redis://h/2147483647", make("h", 6379, "", "", 2147483647)},
      {"REDIS://h", make("h", 6379)},
      {"redis://[::1]", make("::1", 6379)},
      {"redis://[::1]:6380/2", make("::1", 6380, "", "", 2)},
      {"redis://[2001:db8::7]:7000", make("2001:db8::7", 7000)},
      {"redis://[::ffff:127.0.0.1]:7000", make("::ffff:127.0.0.1", 7000)},
      {"redis://:secret@h", make("h", 6379, "", "secret")},
      {"redis://alice:secret@h:7000/1", make("h", 7000, "alice", "secret", 1)},
      {"redis://:@h", make("h", 6379)},
      {"redis://:p%40ss%3Aw%2Fd@h", make("h", 6379, "", "p@ss:w/d")},
      {"redis://al%69ce:%2a%2A@h", make("h", 6379, "alice", "**")},
      // An unescaped '@', ':' or '/' in the password: the last '@' ends the user info.
      {"redis://bob:a@b:c/d@h:7001/4", make("h", 7001, "bob", "a@b:c/d", 4)},
      {"redis://:pw%00x@h", make("h", 6379, "", std::string("pw\0x", 4))},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.url) {
      redlock::node_config parsed;
      BOOST_REQUIRE_NO_THROW(parsed = redlock::node_config::from_url(c.url));
      BOOST_TEST(parsed.host == c.expected.host);
      BOOST_TEST(parsed.port == c.expected.port);
      BOOST_TEST(parsed.username == c.expected.username);
      BOOST_TEST(parsed.password == c.expected.password);
      BOOST_TEST(parsed.database == c.expected.database);
      BOOST_TEST((parsed == c.expected));
    }
  }
}

BOOST_AUTO_TEST_CASE(invalid_urls_name_the_bad_part) {
  const struct {
    std::string_view url;
    std::string_view message_part;
  } cases[] = {
      {"", "missing scheme"},
      {"localhost:6379", "missing scheme"},
      {"http://h", "scheme \"http://\" is not supported"},
      {"redis://", "host is empty"},
      {"redis://:6379", "host is empty"},
      {"redis:///0", "host is empty"},
      {"redis://ho st", "host \"ho st\" has an invalid character"},
      {"redis://h%41", "host \"h%41\" has an invalid character"},
      {"redis://::1:6379", "IPv6 address; write it in brackets"},
      {"redis://[::1", "missing its closing ']'"},
      {"redis://[]:6379", "host is empty"},
      {"redis://[not-v6]:6379", "host \"[not-v6]\" is not an IPv6 address"},
      {"redis://[::1]6379", "unexpected \"6379\" after the IPv6 host"},
      {"redis://h:", "port is empty"},
      {"redis://h:0", "port 0 is out of range 1-65535"},
      {"redis://h:65536", "port 65536 is out of range 1-65535"},
      {"redis://h:99999", "port 99999 is out of range 1-65535"},
      {"redis://h:123456789012345678901234567890",
       "port 123456789012345678901234567890 is out of range 1-65535"},
      {"redis://h:-1", "port \"-1\" is not a decimal number"},
      {"redis://h:+80", "port \"+80\" is not a decimal number"},
      {"redis://h:0x50", "port \"0x50\" is not a decimal number"},
      {"redis://h:63 79", "port \"63 79\" is not a decimal number"},
      {"redis://h/-1", "database \"-1\" is not a non-negative decimal number"},
      {"redis://h/one", "database \"one\" is not a non-negative decimal number"},
      {"redis://h/1/2", "database \"1/2\" is not a non-negative decimal number"},
      {"redis://h/2147483648", "database 2147483648 is out of range 0-2147483647"},
      {"redis://h?timeout=1", "query parameters are only accepted in \"rediss://\" and"},
      {"redis://h?ca=/x", "query parameters are only accepted in \"rediss://\" and"},
      {"redis://h#x", "a fragment is not supported"},
      {"redis://alice@h", "user info without ':' is ambiguous"},
      {"redis://alice:@h", "user \"alice\" is given without a password"},
      {"redis://al%4gce:pw@h", "bad percent-escape \"%4g\" in the user name"},
      {"redis://alice:pw%@h", "bad percent-escape in the password"},
      {"redis://alice:pw%4@h", "bad percent-escape in the password"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.url) {
      const std::string message = error_of(c.url);
      BOOST_TEST(message.starts_with("redlock: bad node URL \""));
      BOOST_TEST(message.find(c.message_part) != std::string::npos, message);
    }
  }
}

BOOST_AUTO_TEST_CASE(tls_urls) {
  auto node = redlock::node_config::from_url("rediss://alice:pw@redis.example:6380/2");
  BOOST_TEST(node.tls.enabled);
  BOOST_TEST(node.tls.verify_peer);
  BOOST_TEST(node.host == "redis.example");
  BOOST_TEST(node.port == 6380);
  BOOST_TEST(node.database == 2);
  BOOST_TEST(node.username == "alice");
  BOOST_TEST(node.tls.ca_file.empty());
  BOOST_TEST(node.unix_path.empty());
  BOOST_TEST(node.address() == "redis.example:6380");
  BOOST_TEST(!redlock::node_config::from_url("REDIS://h").tls.enabled);
  BOOST_TEST(redlock::node_config::from_url("RedisS://h").tls.enabled);

  node = redlock::node_config::from_url(
      "rediss://h/1?ca=/etc/ca%20dir/ca.pem&ca_dir=/etc/certs&cert=/c.pem&key=/k.pem&sni=redis.int"
      "&verify=no");
  BOOST_TEST(node.tls.ca_file == "/etc/ca dir/ca.pem");
  BOOST_TEST(node.tls.ca_dir == "/etc/certs");
  BOOST_TEST(node.tls.cert_file == "/c.pem");
  BOOST_TEST(node.tls.key_file == "/k.pem");
  BOOST_TEST(node.tls.server_name == "redis.int");
  BOOST_TEST(!node.tls.verify_peer);
  BOOST_TEST(node.database == 1);
  // Empty parts of a query are skipped; verify=yes is the default spelled out.
  node = redlock::node_config::from_url("rediss://[::1]:7000?&verify=yes&");
  BOOST_TEST(node.tls.verify_peer);
  BOOST_TEST(node.host == "::1");
}

BOOST_AUTO_TEST_CASE(unix_socket_urls) {
  auto node = redlock::node_config::from_url("unix:///run/redis/redis.sock");
  BOOST_TEST(node.unix_path == "/run/redis/redis.sock");
  BOOST_TEST(!node.tls.enabled);
  BOOST_TEST(node.database == 0);
  BOOST_TEST(node.address() == "unix:/run/redis/redis.sock");

  node = redlock::node_config::from_url("unix://bob:se%40cret@/tmp/my%20redis.sock?db=3");
  BOOST_TEST(node.unix_path == "/tmp/my redis.sock");
  BOOST_TEST(node.username == "bob");
  BOOST_TEST(node.password == "se@cret");
  BOOST_TEST(node.database == 3);
}

BOOST_AUTO_TEST_CASE(bad_tls_and_unix_urls_name_the_problem) {
  const std::string too_long = "unix:///" + std::string(107, 'x');
  const struct {
    std::string url;
    std::string_view message_part;
  } cases[] = {
      {"rediss://h?ca=", "query parameter \"ca\" is empty"},
      {"rediss://h?ca", "query parameter \"ca\" has no value"},
      {"rediss://h?ca=/a&ca=/b", "query parameter \"ca\" is repeated"},
      {"rediss://h?verify=maybe", "verify=\"maybe\" is neither yes nor no"},
      {"rediss://h?cert=/c.pem", "a client certificate needs both cert= and key="},
      {"rediss://h?key=/k.pem", "a client certificate needs both cert= and key="},
      {"rediss://h?db=2", "the database of a \"rediss://\" URL is its path"},
      {"rediss://h?timeout=1", "unknown query parameter \"timeout\"; a \"rediss://\" URL takes"},
      {"rediss://h?ca=%zz", "bad percent-escape \"%zz\" in the query parameter \"ca\""},
      {"rediss://h#x", "a fragment is not supported"},
      {"rediss+unix:///tmp/r.sock", "TLS over a Unix socket is not supported"},
      {"unix:///tmp/r.sock?ca=/ca.pem", "TLS over a Unix socket is not supported"},
      {"unix:///tmp/r.sock?verify=no", "TLS over a Unix socket is not supported"},
      {"unix://", "the Unix socket path is empty"},
      {"unix://relative/r.sock", "the Unix socket path must be absolute"},
      {"unix:///tmp/r.sock?db=x", "database \"x\" is not a non-negative decimal number"},
      {"unix:///tmp/r.sock?db=", "query parameter \"db\" is empty"},
      {"unix:///tmp/r.sock?port=1", "unknown query parameter \"port\"; a \"unix://\" URL takes db"},
      {"unix:///tmp/r%00.sock", "contains a zero byte"},
      {too_long, "the Unix socket path is 108 bytes long; at most 107 fit"},
      {"ftp://h", "expected \"redis://\", \"rediss://\" or \"unix://\""},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.url) {
      const std::string message = error_of(c.url);
      BOOST_TEST(message.starts_with("redlock: bad node URL \""));
      BOOST_TEST(message.find(c.message_part) != std::string::npos, message);
    }
  }
  // The password stays hidden in these messages too.
  const std::string message = error_of("unix://bob:hunter2@/tmp/r.sock?ca=/x");
  BOOST_TEST(message.find("hunter2") == std::string::npos, message);
}

BOOST_AUTO_TEST_CASE(unix_and_tcp_nodes_in_one_list) {
  const auto nodes = redlock::node_config::from_url_list(
      "unix:///tmp/a.sock, rediss://h:6380?ca=/ca.pem, redis://h:6379");
  BOOST_TEST_REQUIRE(nodes.size() == 3u);
  BOOST_TEST(nodes[0].unix_path == "/tmp/a.sock");
  BOOST_TEST(nodes[1].tls.enabled);
  BOOST_TEST(!nodes[2].tls.enabled);
  BOOST_TEST(list_error_of("unix:///tmp/a.sock,unix:///tmp/a.sock?db=1") ==
             "redlock: node unix:/tmp/a.sock is listed twice in the node list");
}

BOOST_AUTO_TEST_CASE(message_quotes_the_url) {
  BOOST_TEST(error_of("redis://h:99999") ==
             "redlock: bad node URL \"redis://h:99999\": port 99999 is out of range 1-65535");
}

// Whatever part is wrong, the password never reaches the message: it is masked as "***".
BOOST_AUTO_TEST_CASE(messages_never_contain_the_password) {
  const struct {
    std::string_view url;
    std::string_view masked_url;
  } cases[] = {
      {"redis://alice:hunter2@h:99999", "redis://alice:***@h:99999"},
      {"redis://:hunter2@h:99999", "redis://:***@h:99999"},
      {"rediss://alice:hunter2@h?verify=maybe", "rediss://alice:***@h?verify=maybe"},
      {"unix://alice:hunter2@relative", "unix://alice:***@relative"},
      {"http://:hunter2@h", "http://:***@h"},
      {"redis://alice:hunter2@", "redis://alice:***@"},
      {"redis://alice:hunter2@h/x", "redis://alice:***@h/x"},
      {"redis://alice:hunter2@h?x=1", "redis://alice:***@h?x=1"},
      {"redis://alice:hunter2%zz@h", "redis://alice:***@h"},
      {"redis://alice:hunter2%@h", "redis://alice:***@h"},
      {"redis://alice%zz:hunter2@h", "redis://alice%zz:***@h"},
      // Unescaped '/', '?' and ':' in the password do not split it into host, port or path.
      {"redis://:hun/ter2@h:0", "redis://:***@h:0"},
      {"redis://:hun?ter2@h:0", "redis://:***@h:0"},
      {"redis://:hunter2:x@h:0", "redis://:***@h:0"},
      // Without ':' the user info might be a password, so all of it is masked.
      {"redis://hunter2@h", "redis://***@h"},
      // No scheme: everything before the last '@' is still masked.
      {":hunter2@h:6379", ":***@h:6379"},
      {"x:hunter2@h:6379", "x:***@h:6379"},
      {"1x://:hunter2@h", "1x:***@h"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.url) {
      const std::string message = error_of(c.url);
      BOOST_TEST(message.find("hunter2") == std::string::npos, message);
      BOOST_TEST(message.find("hun") == std::string::npos, message);
      const std::string quoted = "\"" + std::string(c.masked_url) + "\"";
      BOOST_TEST(message.find(quoted) != std::string::npos, message);
    }
  }
}

BOOST_AUTO_TEST_CASE(address) {
  const struct {
    redlock::node_config config;
    std::string_view expected;
  } cases[] = {
      {make("127.0.0.1", 6379), "127.0.0.1:6379"},
      {make("redis.example.com", 7000, "alice", "secret", 3), "redis.example.com:7000"},
      {make("::1", 6380), "[::1]:6380"},
      {make("2001:db8::7", 1), "[2001:db8::7]:1"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.expected) {
      BOOST_TEST(c.config.address() == c.expected);
    }
  }
  BOOST_TEST(redlock::node_config::from_url("redis://alice:secret@[::1]:7000/2").address() ==
             "[::1]:7000");
  BOOST_TEST(redlock::node_config{}.address() == "127.0.0.1:6379");
}

BOOST_AUTO_TEST_CASE(url_lists) {
  const auto nodes = redlock::node_config::from_url_list(
      "redis://127.0.0.1:7001, redis://:secret@127.0.0.1:7002/2,\tredis://localhost ");
  BOOST_TEST_REQUIRE(nodes.size() == 3u);
  BOOST_TEST((nodes[0] == make("127.0.0.1", 7001)));
  BOOST_TEST((nodes[1] == make("127.0.0.1", 7002, "", "secret", 2)));
  BOOST_TEST((nodes[2] == make("localhost", 6379)));
  BOOST_TEST(redlock::node_config::from_url_list("redis://[::1]:7000").size() == 1u);

  const struct {
    std::string_view urls;
    std::string_view expected;
  } cases[] = {
      {"", "redlock: the node list is empty"},
      {" \t", "redlock: the node list is empty"},
      {",redis://a", "redlock: entry 1 of the node list is empty"},
      {"redis://a,,redis://b", "redlock: entry 2 of the node list is empty"},
      {"redis://a,redis://b, ", "redlock: entry 3 of the node list is empty"},
      {"redis://a:1,redis://b:2,redis://a:1", "redlock: node a:1 is listed twice in the node list"},
      // The same node under another spelling of its port is still the same node.
      {"redis://a,redis://a:6379", "redlock: node a:6379 is listed twice in the node list"},
      {"redis://a,127.0.0.1:6379",
       "redlock: bad node URL \"127.0.0.1:6379\": missing scheme, expected \"redis://\", "
       "\"rediss://\" or \"unix://\""},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT("\"" << c.urls << "\"") {
      BOOST_TEST(list_error_of(c.urls) == c.expected);
    }
  }
  // No message shows a password: neither the bad entry's nor another entry's.
  for (const std::string_view urls :
       {"redis://:hunter2@a,,redis://b", "redis://:hunter2@a,redis://:hunter2@a",
        "redis://:hunter2@a,redis://u:hunter2@b:0"}) {
    const auto message = list_error_of(urls);
    BOOST_TEST(message.find("hunter2") == std::string::npos, message);
    BOOST_TEST(message != "<no exception>");
  }
}

// std::getenv returns a null pointer for a variable that is not set; the README's recipe passes
// that straight in. It must be refused with a message, not read (a string_view of a null pointer
// is undefined behaviour, in practice a crash).
BOOST_AUTO_TEST_CASE(a_null_pointer_is_refused_not_read) {
  const std::string list_message =
      "redlock: no node list given (a null pointer: is the environment variable set?)";
  const std::string url_message =
      "redlock: no node URL given (a null pointer: is the environment variable set?)";
  constexpr const char* unset = "REDLOCK_TEST_NODES_THAT_ARE_NEVER_SET";
  ::unsetenv(unset);

  BOOST_TEST(message_of([] {
               (void)redlock::node_config::from_url_list(static_cast<const char*>(nullptr));
             }) == list_message);
  BOOST_TEST(message_of([&] { (void)redlock::node_config::from_url_list(std::getenv(unset)); }) ==
             list_message);
  BOOST_TEST(message_of([] { (void)redlock::node_config::from_url_list(nullptr); }) ==
             list_message);
  BOOST_TEST(message_of([] {
               (void)redlock::node_config::from_url(static_cast<const char*>(nullptr));
             }) == url_message);
  BOOST_TEST(message_of([&] { (void)redlock::node_config::from_url(std::getenv(unset)); }) ==
             url_message);
}

// Every way users pass a string still compiles (no ambiguity between the overloads) and parses.
BOOST_AUTO_TEST_CASE(strings_of_every_kind_are_accepted) {
  const std::string text = "redis://h:7000";
  const std::string_view view = text;
  char writable[] = "redis://h:7000";
  char* pointer = writable;
  const auto expected = make("h", 7000);

  BOOST_TEST((redlock::node_config::from_url("redis://h:7000") == expected));
  BOOST_TEST((redlock::node_config::from_url(text) == expected));
  BOOST_TEST((redlock::node_config::from_url(view) == expected));
  BOOST_TEST((redlock::node_config::from_url(text.c_str()) == expected));
  BOOST_TEST((redlock::node_config::from_url(pointer) == expected));

  for (const auto& nodes :
       {redlock::node_config::from_url_list("redis://h:7000"),
        redlock::node_config::from_url_list(text), redlock::node_config::from_url_list(view),
        redlock::node_config::from_url_list(text.c_str()),
        redlock::node_config::from_url_list(pointer)}) {
    BOOST_TEST_REQUIRE(nodes.size() == 1u);
    BOOST_TEST((nodes.front() == expected));
  }
}

// A list written with blanks instead of commas used to get the IPv6 hint ("redis://a:1 redis:"
// has a port with a ':'), or was taken silently as one node when the second URL had a password
// (the first URL became user info). It is refused by the position of the blank, without quoting
// the entry.
BOOST_AUTO_TEST_CASE(whitespace_between_urls_asks_for_commas) {
  const struct {
    std::string_view urls;
    std::string_view expected;
  } list_cases[] = {
      {"redis://a:1 redis://b:2",
       "redlock: entry 1 of the node list has whitespace at character 12 followed by another URL; "
       "separate node URLs with commas, not whitespace"},
      {"redis://a:1,redis://b:2\t redis://c:3",
       "redlock: entry 2 of the node list has whitespace at character 12 followed by another URL; "
       "separate node URLs with commas, not whitespace"},
      {"redis://:hunter2@a:1 redis://:hunter3@b:2",
       "redlock: entry 1 of the node list has whitespace at character 21 followed by another URL; "
       "separate node URLs with commas, not whitespace"},
      {"unix:///tmp/a.sock\nrediss://b",
       "redlock: entry 1 of the node list has whitespace at character 19 followed by another URL; "
       "separate node URLs with commas, not whitespace"},
  };
  for (const auto& c : list_cases) {
    BOOST_TEST_CONTEXT(c.urls) {
      BOOST_TEST(list_error_of(c.urls) == c.expected);
    }
  }

  const struct {
    std::string_view url;
    std::string_view expected;
  } url_cases[] = {
      {"redis://a:1 redis://b:2",
       "redlock: bad node URL: whitespace at character 12 is followed by another URL; separate "
       "node URLs with commas, not whitespace"},
      {"redis://u:hunter2@a redis://v:hunter3@b",
       "redlock: bad node URL: whitespace at character 20 is followed by another URL; separate "
       "node URLs with commas, not whitespace"},
  };
  for (const auto& c : url_cases) {
    BOOST_TEST_CONTEXT(c.url) {
      BOOST_TEST(error_of(c.url) == c.expected);
    }
  }

  // Host:port pairs after one scheme: no IPv6 hint either, and the same advice.
  for (const std::string_view url : {"redis://a:1 b:2", "redis://a:1\tb:2/0"}) {
    BOOST_TEST_CONTEXT(url) {
      const std::string message = error_of(url);
      BOOST_TEST(message.find("IPv6") == std::string::npos, message);
      BOOST_TEST(message.find("separate node URLs with commas") != std::string::npos, message);
    }
  }
  // Whitespace not followed by a URL is left to the parts' own checks, and leading whitespace
  // is not mistaken for a second URL.
  BOOST_TEST(error_of("redis://ho st").find("host \"ho st\" has an invalid character") !=
             std::string::npos);
  BOOST_TEST(error_of(" redis://h").find("missing scheme") != std::string::npos);
  BOOST_TEST(redlock::node_config::from_url("redis://:pass word@h").password == "pass word");
}

BOOST_AUTO_TEST_SUITE_END()

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
