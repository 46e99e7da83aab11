#include "redlock/node_config.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// GCC 12 at -O3 reports a false -Wrestrict (a __builtin_memcpy of 2^63 bytes that "may overlap")
// in std::string's _M_replace, inlined into `"literal" + std::string` (GCC bugs 105329 and
// 105651), which -Werror turns into a failed Release build. Ignored for this file's code only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace redlock {
// For Boost.Test's messages.
inline std::ostream& boost_test_print_type(std::ostream& out, node_kind kind) {
  switch (kind) {
    case node_kind::standalone:
      return out << "standalone";
    case node_kind::cluster:
      return out << "cluster";
    case node_kind::sentinel:
      return out << "sentinel";
  }
  return out << "node_kind(" << static_cast<unsigned>(kind) << ")";
}
}  // namespace redlock

namespace {

using redlock::node_kind;

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

// Every field, one by one (for readable failures), then all of them at once.
void check_fields(const redlock::node_config& parsed, const redlock::node_config& expected) {
  BOOST_TEST(parsed.kind == expected.kind);
  BOOST_TEST(parsed.host == expected.host);
  BOOST_TEST(parsed.port == expected.port);
  BOOST_TEST(parsed.username == expected.username);
  BOOST_TEST(parsed.password == expected.password);
  BOOST_TEST(parsed.database == expected.database);
  BOOST_TEST(parsed.unix_path == expected.unix_path);
  BOOST_TEST(parsed.seeds == expected.seeds, boost::test_tools::per_element());
  BOOST_TEST(parsed.sentinel_master == expected.sentinel_master);
  BOOST_TEST(parsed.sentinel_username == expected.sentinel_username);
  BOOST_TEST(parsed.sentinel_password == expected.sentinel_password);
  BOOST_TEST(parsed.wait_replicas == expected.wait_replicas);
  BOOST_TEST(parsed.tls.enabled == expected.tls.enabled);
  BOOST_TEST((parsed == expected));
}

struct url_case {
  std::string_view url;
  redlock::node_config expected;
};

void check_parses(const url_case& c) {
  BOOST_TEST_CONTEXT(c.url) {
    redlock::node_config parsed;
    BOOST_REQUIRE_NO_THROW(parsed = redlock::node_config::from_url(c.url));
    check_fields(parsed, c.expected);
  }
}

struct refusal_case {
  std::string_view url;
  std::string_view message_part;
};

void check_refuses(const refusal_case& c) {
  BOOST_TEST_CONTEXT(c.url) {
    const std::string message = error_of(c.url);
    BOOST_TEST(message.starts_with("redlock: bad node URL \""), message);
    BOOST_TEST(message.find(c.message_part) != std::string::npos, message);
  }
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
      {"redis://h?timeout=1",
       "unknown query parameter \"timeout\"; a \"redis://\" URL takes "
       "wait_replicas"},
      {"redis://h?ca=/x", "query parameter \"ca\" is a TLS setting, for a \"rediss://\" URL"},
      {"redis://h?db=2",
       "the database of a \"redis://\" URL is its path (\"redis://host/2\"), not ?db="},
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
      {"ftp://h",
       "scheme \"ftp://\" is not supported, expected \"redis://\", \"rediss://\", \"unix://\", "
       "\"redis+cluster://\", \"rediss+cluster://\", \"redis+sentinel://\" or "
       "\"rediss+sentinel://\""},
      {"unix:///tmp/r.sock?port=1",
       "unknown query parameter \"port\"; a \"unix://\" URL takes db and wait_replicas"},
      {"rediss://h?port=1",
       "unknown query parameter \"port\"; a \"rediss://\" URL takes ca, ca_dir, cert, key, sni, "
       "verify and wait_replicas"},
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
       "\"rediss://\", \"unix://\", \"redis+cluster://\", \"rediss+cluster://\", "
       "\"redis+sentinel://\" or \"rediss+sentinel://\""},
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

// std::getenv returns a null pointer for a variable that is not set; the recipe in
// docs/configuration.md passes that straight in. It must be refused with a message, not read (a
// string_view of a null pointer is undefined behaviour, in practice a crash).
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

// A config written by hand names only what it needs; the rest keeps its default, so a standalone
// node built before cluster and sentinel nodes existed means the same thing.
BOOST_AUTO_TEST_CASE(new_fields_have_defaults) {
  const redlock::node_config plain{.host = "h", .port = 7000};
  BOOST_TEST(plain.kind == node_kind::standalone);
  BOOST_TEST(plain.seeds.empty());
  BOOST_TEST(plain.sentinel_master.empty());
  BOOST_TEST(plain.sentinel_username.empty());
  BOOST_TEST(plain.sentinel_password.empty());
  BOOST_TEST(plain.wait_replicas == 0u);
  BOOST_TEST((plain == make("h", 7000)));

  const redlock::node_config grouped{.host = "h",
                                     .port = 7000,
                                     .kind = node_kind::cluster,
                                     .seeds = {"h2:7001"},
                                     .wait_replicas = 1};
  BOOST_TEST((grouped == redlock::node_config::from_url(
                             "redis+cluster://h:7000?seed=h2:7001&wait_replicas=1")));
  BOOST_TEST(!(grouped == plain));
  // address() names the first member, never a seed.
  BOOST_TEST(grouped.address() == "h:7000");
}

BOOST_AUTO_TEST_CASE(cluster_urls) {
  const url_case cases[] = {
      {"redis+cluster://h:7000", {.host = "h", .port = 7000, .kind = node_kind::cluster}},
      {"redis+cluster://h", {.host = "h", .port = 6379, .kind = node_kind::cluster}},
      {"REDIS+Cluster://h:7000", {.host = "h", .port = 7000, .kind = node_kind::cluster}},
      {"redis+cluster://h:7000/", {.host = "h", .port = 7000, .kind = node_kind::cluster}},
      {"redis+cluster://h:7000/0", {.host = "h", .port = 7000, .kind = node_kind::cluster}},
      {"redis+cluster://h:7000?seed=h2:7001&seed=h3:7002",
       {.host = "h", .port = 7000, .kind = node_kind::cluster, .seeds = {"h2:7001", "h3:7002"}}},
      // A seed without a port gets the default one; leading zeros are dropped.
      {"redis+cluster://alice:pw@10.0.0.1:7000?seed=10.0.0.2&seed=10.0.0.3:07000&wait_replicas=1",
       {.host = "10.0.0.1",
        .port = 7000,
        .username = "alice",
        .password = "pw",
        .kind = node_kind::cluster,
        .seeds = {"10.0.0.2:6379", "10.0.0.3:7000"},
        .wait_replicas = 1}},
      // IPv6 seeds keep their brackets; escapes are decoded before the seed is read.
      {"redis+cluster://[::1]:7000?seed=[::1]:7001&seed=%5B2001:db8::1%5D:7002",
       {.host = "::1",
        .port = 7000,
        .kind = node_kind::cluster,
        .seeds = {"[::1]:7001", "[2001:db8::1]:7002"}}},
      // The URL's own node may be listed again; seeds are kept as given, in order.
      {"redis+cluster://h:7000?seed=h3:1&seed=h:7000&seed=h3:1",
       {.host = "h",
        .port = 7000,
        .kind = node_kind::cluster,
        .seeds = {"h3:1", "h:7000", "h3:1"}}},
      // Empty parts of a query are skipped.
      {"redis+cluster://:pw@h:7000?&seed=a:1&&seed=b:2&",
       {.host = "h",
        .port = 7000,
        .password = "pw",
        .kind = node_kind::cluster,
        .seeds = {"a:1", "b:2"}}},
      {"rediss+cluster://h:7000?ca=/ca.pem&seed=h2:7001&sni=redis.int&verify=no&cert=/c&key=/k",
       {.host = "h",
        .port = 7000,
        .tls = {.enabled = true,
                .ca_file = "/ca.pem",
                .cert_file = "/c",
                .key_file = "/k",
                .server_name = "redis.int",
                .verify_peer = false},
        .kind = node_kind::cluster,
        .seeds = {"h2:7001"}}},
      {"RedisS+Cluster://h", {.host = "h", .tls = {.enabled = true}, .kind = node_kind::cluster}},
  };
  for (const auto& c : cases)
    check_parses(c);
}

BOOST_AUTO_TEST_CASE(sentinel_urls) {
  const url_case cases[] = {
      // Sentinels listen on 26379 unless told otherwise.
      {"redis+sentinel://s1?master=mymaster",
       {.host = "s1", .port = 26379, .kind = node_kind::sentinel, .sentinel_master = "mymaster"}},
      {"Redis+Sentinel://s1:5000?master=m&seed=s2&seed=s3:26380",
       {.host = "s1",
        .port = 5000,
        .kind = node_kind::sentinel,
        .seeds = {"s2:26379", "s3:26380"},
        .sentinel_master = "m"}},
      // The authority logs in to the master, sentinel_user/sentinel_password to the sentinels;
      // the path is the master's database.
      {"redis+sentinel://alice:pw@s1/2?master=m&sentinel_user=sen&sentinel_password=spw"
       "&wait_replicas=2",
       {.host = "s1",
        .port = 26379,
        .username = "alice",
        .password = "pw",
        .database = 2,
        .kind = node_kind::sentinel,
        .sentinel_master = "m",
        .sentinel_username = "sen",
        .sentinel_password = "spw",
        .wait_replicas = 2}},
      // Parameters in any order; escapes decoded.
      {"redis+sentinel://s1?sentinel_password=s%26p%40ss&master=my%20master",
       {.host = "s1",
        .port = 26379,
        .kind = node_kind::sentinel,
        .sentinel_master = "my master",
        .sentinel_password = "s&p@ss"}},
      // An unescaped '@' in the query (RFC 3986 allows it) is not the end of user info.
      {"redis+sentinel://s1?master=m&sentinel_password=p@ss",
       {.host = "s1",
        .port = 26379,
        .kind = node_kind::sentinel,
        .sentinel_master = "m",
        .sentinel_password = "p@ss"}},
      {"redis+sentinel://:pw@s1?master=m&sentinel_password=p@ss:x",
       {.host = "s1",
        .port = 26379,
        .password = "pw",
        .kind = node_kind::sentinel,
        .sentinel_master = "m",
        .sentinel_password = "p@ss:x"}},
      // A '?' in the password before a query still works unescaped.
      {"redis+sentinel://:a?b@s1?master=m",
       {.host = "s1",
        .port = 26379,
        .password = "a?b",
        .kind = node_kind::sentinel,
        .sentinel_master = "m"}},
      // An unescaped '&' stays in the sentinel password unless a parameter follows it.
      {"redis+sentinel://s1?master=m&sentinel_password=a&b&c=d&wait_replicas=1",
       {.host = "s1",
        .port = 26379,
        .kind = node_kind::sentinel,
        .sentinel_master = "m",
        .sentinel_password = "a&b&c=d",
        .wait_replicas = 1}},
      {"redis+sentinel://s1?master=m&sentinel_password=a&",
       {.host = "s1",
        .port = 26379,
        .kind = node_kind::sentinel,
        .sentinel_master = "m",
        .sentinel_password = "a"}},
      {"redis+sentinel://[::1]:26380?master=m&seed=[::2]",
       {.host = "::1",
        .port = 26380,
        .kind = node_kind::sentinel,
        .seeds = {"[::2]:26379"},
        .sentinel_master = "m"}},
      {"rediss+sentinel://s1:26380/1?master=m&ca=/ca.pem&seed=s2:26380",
       {.host = "s1",
        .port = 26380,
        .database = 1,
        .tls = {.enabled = true, .ca_file = "/ca.pem"},
        .kind = node_kind::sentinel,
        .seeds = {"s2:26380"},
        .sentinel_master = "m"}},
  };
  for (const auto& c : cases)
    check_parses(c);
}

BOOST_AUTO_TEST_CASE(wait_replicas_on_every_scheme) {
  const url_case cases[] = {
      {"redis://h?wait_replicas=1", {.host = "h", .wait_replicas = 1}},
      {"redis://h:7000/3?wait_replicas=0", {.host = "h", .port = 7000, .database = 3}},
      {"rediss://h?verify=no&wait_replicas=64",
       {.host = "h", .tls = {.enabled = true, .verify_peer = false}, .wait_replicas = 64}},
      {"unix:///tmp/r.sock?db=1&wait_replicas=3",
       {.host = "", .port = 0, .database = 1, .unix_path = "/tmp/r.sock", .wait_replicas = 3}},
      {"redis+cluster://h?wait_replicas=2",
       {.host = "h", .kind = node_kind::cluster, .wait_replicas = 2}},
      {"redis+sentinel://s?master=m&wait_replicas=5",
       {.host = "s",
        .port = 26379,
        .kind = node_kind::sentinel,
        .sentinel_master = "m",
        .wait_replicas = 5}},
      {"redis://h?wait_replicas=007", {.host = "h", .wait_replicas = 7}},
      {"redis://h?wait_replicas=00000000000000000000064", {.host = "h", .wait_replicas = 64}},
      {"redis://h?wait_replicas=%36", {.host = "h", .wait_replicas = 6}},
  };
  for (const auto& c : cases)
    check_parses(c);
}

BOOST_AUTO_TEST_CASE(bad_cluster_and_sentinel_urls_name_the_problem) {
  const refusal_case cases[] = {
      // A cluster has only database 0.
      {"redis+cluster://h:7000/1", "a cluster has only database 0, not 1"},
      {"redis+cluster://h?db=1", "a cluster has only database 0; ?db= is not taken"},
      {"redis+cluster://h:7000/x", "database \"x\" is not a non-negative decimal number"},
      // The URL's own host and port as for redis://.
      {"redis+cluster://", "host is empty"},
      {"redis+cluster://h:0", "port 0 is out of range 1-65535"},
      {"redis+cluster://::1:7000",
       "host looks like an IPv6 address; write it in brackets: \"redis+cluster://[::1]:6379\""},
      {"redis+sentinel://::1?master=m", "write it in brackets: \"redis+sentinel://[::1]:26379\""},
      // Seeds.
      {"redis+cluster://h?seed=", "query parameter \"seed\" is empty"},
      {"redis+cluster://h?seed", "query parameter \"seed\" has no value"},
      {"redis+cluster://h?seed=:7000", "seed \":7000\": host is empty"},
      {"redis+cluster://h?seed=a:0", "seed \"a:0\": port 0 is out of range 1-65535"},
      {"redis+cluster://h?seed=a:65536", "seed \"a:65536\": port 65536 is out of range 1-65535"},
      {"redis+cluster://h?seed=a:", "seed \"a:\": port is empty"},
      {"redis+cluster://h?seed=a:x", "seed \"a:x\": port \"x\" is not a decimal number"},
      // A port without its host is not taken for a host called "7972" (on port 6379).
      {"redis+cluster://h?seed=7972",
       "seed \"7972\": host \"7972\" is a number: a port without its host? write HOST:PORT, "
       "e.g. \"127.0.0.1:7972\""},
      {"redis+sentinel://s?master=m&seed=26380", "seed \"26380\": host \"26380\" is a number"},
      {"redis+cluster://7000", "host \"7000\" is a number: a port without its host?"},
      {"redis://6380/1", "host \"6380\" is a number"},
      {"redis+cluster://h?seed=::1:7000",
       "seed \"::1:7000\": host looks like an IPv6 address; write it in brackets: "
       "\"seed=[::1]:7000\""},
      {"redis+cluster://h?seed=[::1", "seed \"[::1\": IPv6 host is missing its closing ']'"},
      {"redis+cluster://h?seed=[nope]:1", "seed \"[nope]:1\": host \"[nope]\" is not an IPv6"},
      {"redis+cluster://h?seed=[::1]x", "seed \"[::1]x\": unexpected \"x\" after the IPv6 host"},
      {"redis+cluster://h?seed=a%20b:1", "seed \"a%20b:1\": host \"a b\" has an invalid character"},
      {"redis+cluster://h?seed=a:1&seed=%zz",
       "bad percent-escape \"%zz\" in the query parameter \"seed\""},
      {"redis+sentinel://s?master=m&seed=s2:0", "seed \"s2:0\": port 0 is out of range 1-65535"},
      // Parameters a scheme does not take.
      {"redis+cluster://h?master=m",
       "query parameter \"master\" is for \"redis+sentinel://\" URLs"},
      {"redis+cluster://h?sentinel_password=x",
       "query parameter \"sentinel_password\" is for \"redis+sentinel://\" URLs"},
      {"redis+cluster://h?ca=/x",
       "query parameter \"ca\" is a TLS setting, for a \"rediss+cluster://\" URL"},
      {"redis+sentinel://s?master=m&verify=no",
       "query parameter \"verify\" is a TLS setting, for a \"rediss+sentinel://\" URL"},
      {"redis+cluster://h?timeout=1",
       "unknown query parameter \"timeout\"; a \"redis+cluster://\" URL takes seed and "
       "wait_replicas"},
      {"rediss+cluster://h?timeout=1",
       "unknown query parameter \"timeout\"; a \"rediss+cluster://\" URL takes ca, ca_dir, cert, "
       "key, sni, verify, seed and wait_replicas"},
      {"redis+sentinel://s?master=m&port=1",
       "unknown query parameter \"port\"; a \"redis+sentinel://\" URL takes master, sentinel_user, "
       "sentinel_password, seed and wait_replicas"},
      {"rediss+sentinel://s?master=m&port=1",
       "a \"rediss+sentinel://\" URL takes ca, ca_dir, cert, key, sni, verify, master, "
       "sentinel_user, sentinel_password, seed and wait_replicas"},
      {"redis+sentinel://s?master=m&db=2",
       "the database of a \"redis+sentinel://\" URL is its path (\"redis+sentinel://host/2\"), "
       "not ?db="},
      {"redis://h?seed=a:1",
       "query parameter \"seed\" is for \"redis+cluster://\" and \"redis+sentinel://\" URLs"},
      {"rediss://h?seed=a:1", "query parameter \"seed\" is for \"redis+cluster://\""},
      {"unix:///tmp/r.sock?seed=a:1", "query parameter \"seed\" is for \"redis+cluster://\""},
      {"rediss://h?master=m", "query parameter \"master\" is for \"redis+sentinel://\" URLs"},
      {"unix:///tmp/r.sock?sentinel_user=u",
       "query parameter \"sentinel_user\" is for \"redis+sentinel://\" URLs"},
      // TLS settings of a TLS cluster or sentinel URL are checked as for rediss://.
      {"rediss+cluster://h?cert=/c.pem", "a client certificate needs both cert= and key="},
      {"rediss+sentinel://s?master=m&verify=maybe", "verify=\"maybe\" is neither yes nor no"},
      {"rediss+cluster://h?ca=", "query parameter \"ca\" is empty"},
      // Repeated parameters: only seed may be.
      {"redis+cluster://h?wait_replicas=1&wait_replicas=2",
       "query parameter \"wait_replicas\" is repeated"},
      {"redis+sentinel://s?master=a&master=b", "query parameter \"master\" is repeated"},
      {"redis+sentinel://s?master=m&sentinel_user=u&sentinel_user=v",
       "query parameter \"sentinel_user\" is repeated"},
      {"redis+sentinel://s?master=m&sentinel_password=a&sentinel_password=b",
       "query parameter \"sentinel_password\" is repeated"},
      {"rediss+cluster://h?sni=a&sni=b", "query parameter \"sni\" is repeated"},
      // Sentinel requirements.
      {"redis+sentinel://s",
       "a \"redis+sentinel://\" URL needs master=NAME, the name the sentinels know the master by"},
      {"rediss+sentinel://s?ca=/x", "a \"rediss+sentinel://\" URL needs master=NAME"},
      {"redis+sentinel://s?seed=s2", "a \"redis+sentinel://\" URL needs master=NAME"},
      {"redis+sentinel://s?master=", "query parameter \"master\" is empty"},
      {"redis+sentinel://s?master", "query parameter \"master\" has no value"},
      {"redis+sentinel://s?master=m&sentinel_user=u",
       "sentinel_user \"u\" is given without sentinel_password"},
      {"redis+sentinel://s?master=m&sentinel_password=",
       "query parameter \"sentinel_password\" is "
       "empty"},
      {"redis+sentinel://s?master=m&sentinel_user=", "query parameter \"sentinel_user\" is empty"},
      {"redis+sentinel://s?master=m#x", "a fragment is not supported"},
      // Schemes.
      {"redis+clusters://h", "scheme \"redis+clusters://\" is not supported, expected"},
      {"redis+unix:///tmp/r.sock", "scheme \"redis+unix://\" is not supported"},
      {"rediss+unix:///tmp/r.sock", "TLS over a Unix socket is not supported"},
  };
  for (const auto& c : cases)
    check_refuses(c);
}

BOOST_AUTO_TEST_CASE(bad_wait_replicas_are_refused_by_name) {
  const refusal_case cases[] = {
      {"redis://h?wait_replicas=", "query parameter \"wait_replicas\" is empty"},
      {"redis://h?wait_replicas", "query parameter \"wait_replicas\" has no value"},
      {"redis://h?wait_replicas=-1", "wait_replicas=\"-1\" is not a decimal number"},
      {"redis://h?wait_replicas=+1", "wait_replicas=\"+1\" is not a decimal number"},
      {"redis://h?wait_replicas=1.5", "wait_replicas=\"1.5\" is not a decimal number"},
      {"redis://h?wait_replicas=two", "wait_replicas=\"two\" is not a decimal number"},
      {"redis://h?wait_replicas=%zz",
       "bad percent-escape \"%zz\" in the query parameter \"wait_replicas\""},
      {"redis://h?wait_replicas=65", "wait_replicas=65 is out of range 0-64"},
      {"redis://h?wait_replicas=100", "wait_replicas=100 is out of range 0-64"},
      {"redis://h?wait_replicas=99999999999999999999999",
       "wait_replicas=99999999999999999999999 is out of range 0-64"},
      {"rediss://h?wait_replicas=65", "wait_replicas=65 is out of range 0-64"},
      {"unix:///tmp/r.sock?wait_replicas=65", "wait_replicas=65 is out of range 0-64"},
      {"redis+cluster://h?wait_replicas=x", "wait_replicas=\"x\" is not a decimal number"},
      {"redis+sentinel://s?master=m&wait_replicas=65", "wait_replicas=65 is out of range 0-64"},
      {"redis://h?wait_replicas=1&wait_replicas=1",
       "query parameter \"wait_replicas\" is repeated"},
  };
  for (const auto& c : cases)
    check_refuses(c);
}

// The sentinel password is masked in the quoted URL as the node password is, wherever the
// message comes from, also when it holds an unescaped '@', '&' or '#'.
BOOST_AUTO_TEST_CASE(messages_never_contain_the_sentinel_password) {
  const struct {
    std::string_view url;
    std::string_view masked_url;
  } cases[] = {
      {"redis+sentinel://s1?master=m&sentinel_password=hunter2&wait_replicas=x",
       "redis+sentinel://s1?master=m&sentinel_password=***&wait_replicas=x"},
      {"redis+sentinel://s1?sentinel_password=hunter2",
       "redis+sentinel://s1?sentinel_password=***"},
      {"redis+sentinel://alice:hunter2@s1?master=m&sentinel_user=u&sentinel_password=hunter3"
       "&wait_replicas=x",
       "redis+sentinel://alice:***@s1?master=m&sentinel_user=u&sentinel_password=***"
       "&wait_replicas=x"},
      {"redis+sentinel://s1?master=m&sentinel_password=hunter2%zz",
       "redis+sentinel://s1?master=m&sentinel_password=***"},
      {"redis+sentinel://s1?master=m&sentinel_password=hunter2#frag",
       "redis+sentinel://s1?master=m&sentinel_password=***"},
      {"redis+sentinel://s1?master=m&sentinel_password=hunter2&sentinel_password=hunter3",
       "redis+sentinel://s1?master=m&sentinel_password=***&sentinel_password=***"},
      // An unescaped '&' in the password: the rest is not taken for a parameter and quoted.
      {"redis+sentinel://s1?master=m&sentinel_password=hun&ter2&wait_replicas=x",
       "redis+sentinel://s1?master=m&sentinel_password=***&wait_replicas=x"},
      {"redis+sentinel://s1?master=m&sentinel_password=hun&ter2=x&wait_replicas=x",
       "redis+sentinel://s1?master=m&sentinel_password=***&wait_replicas=x"},
      // An unescaped '@' in the password: whatever could be user info is hidden too.
      {"redis+sentinel://s1?master=m&sentinel_password=hun@ter2&wait_replicas=x",
       "redis+sentinel://***&wait_replicas=x"},
      // Parameters that are not the scheme's, or not known at all, but look like passwords.
      {"redis://h?sentinel_password=hunter2", "redis://h?sentinel_password=***"},
      {"redis://h?password=hunter2", "redis://h?password=***"},
      {"redis://h?Sentinel%5FPass=hunter2", "redis://h?Sentinel%5FPass=***"},
      // A node password holding "?ca=", taken for a query: still hidden.
      {"redis://:hun?ca=ter2@h", "redis://:***@h"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.url) {
      const std::string message = error_of(c.url);
      BOOST_TEST(message != "<no exception>");
      BOOST_TEST(message.find("hun") == std::string::npos, message);
      BOOST_TEST(message.find("ter2") == std::string::npos, message);
      const std::string quoted = "\"" + std::string(c.masked_url) + "\"";
      BOOST_TEST(message.find(quoted) != std::string::npos, message);
    }
  }
}

BOOST_AUTO_TEST_CASE(cluster_and_sentinel_nodes_in_a_list) {
  const auto nodes = redlock::node_config::from_url_list(
      "redis+cluster://a:7000?seed=b:7000&seed=c:7000, "
      "redis+sentinel://s1?master=m&seed=s2, redis://d:6379?wait_replicas=1");
  BOOST_TEST_REQUIRE(nodes.size() == 3u);
  check_fields(
      nodes[0],
      {.host = "a", .port = 7000, .kind = node_kind::cluster, .seeds = {"b:7000", "c:7000"}});
  check_fields(nodes[1], {.host = "s1",
                          .port = 26379,
                          .kind = node_kind::sentinel,
                          .seeds = {"s2:26379"},
                          .sentinel_master = "m"});
  check_fields(nodes[2], {.host = "d", .wait_replicas = 1});
  BOOST_TEST(nodes[0].address() == "a:7000");
  BOOST_TEST(nodes[1].address() == "s1:26379");

  const struct {
    std::string_view urls;
    std::string_view expected;
  } cases[] = {
      // Duplicates are found by address(), the first member of a cluster or sentinel group.
      {"redis+cluster://a:7000?seed=b:7000,redis://a:7000",
       "redlock: node a:7000 is listed twice in the node list"},
      {"redis+sentinel://s1?master=m1,redis+sentinel://s1:26379?master=m2",
       "redlock: node s1:26379 is listed twice in the node list"},
      // A comma always separates nodes, also right after a seed.
      {"redis+cluster://a:7000?seed=b:7000,c:7000",
       "redlock: bad node URL \"c:7000\": missing scheme, expected \"redis://\", \"rediss://\", "
       "\"unix://\", \"redis+cluster://\", \"rediss+cluster://\", \"redis+sentinel://\" or "
       "\"rediss+sentinel://\""},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT("\"" << c.urls << "\"") {
      BOOST_TEST(list_error_of(c.urls) == c.expected);
    }
  }
  const auto message = list_error_of("redis+sentinel://s1?master=m&sentinel_password=hunter2,");
  BOOST_TEST(message == "redlock: entry 2 of the node list is empty");
}

BOOST_AUTO_TEST_SUITE_END()

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
