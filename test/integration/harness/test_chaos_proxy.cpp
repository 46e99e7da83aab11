// The chaos proxy in front of a real redis-server: each toxic must have exactly its documented
// effect, observed from the client's side (a raw POSIX socket shows what sync_client hides: a
// connection that stays open, an RST versus a FIN, exact byte counts). Timing assertions are lower
// bounds that sleeping guarantees, plus generous upper bounds only.

#include "integration/prelude.hpp"
#include "resp/encoder.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <optional>
#include <ostream>
#include <poll.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

// GCC 12 at -O3 reports a false -Wrestrict (a __builtin_memcpy of 2^63 bytes that "may overlap")
// in std::string's _M_replace, inlined into `"literal" + std::string` (GCC bugs 105329 and
// 105651), which -Werror turns into a failed Release build. Ignored for this file's code only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace {

using redlock::test::eventually_blocking;
using redlock::test::redis_server;
using chaos = redlock::test::chaos_proxy;
using dir = chaos::direction;
using clock_type = std::chrono::steady_clock;

std::string encode(std::initializer_list<std::string_view> args) {
  std::string out;
  redlock::resp::encode_command(out, args);
  return out;
}

const std::string ping = encode({"PING"});
const std::string pong = "+PONG\r\n";

// How a read on a raw_socket ended.
enum class ending { complete, timed_out, eof, reset, error };

std::ostream& operator<<(std::ostream& out, ending e) {
  constexpr const char* names[] = {"complete", "timed_out", "eof", "reset", "error"};
  return out << names[static_cast<int>(e)];
}

struct read_result {
  std::string bytes;
  ending end = ending::error;
};

// A blocking loopback client socket with explicit deadlines.
class raw_socket {
 public:
  explicit raw_socket(std::uint16_t port) {
    fd_ = open_and_connect(port);
    if (fd_ < 0) throw std::runtime_error("raw_socket: connect: " + std::string(strerror(-fd_)));
  }
  ~raw_socket() { ::close(fd_); }
  raw_socket(const raw_socket&) = delete;
  raw_socket& operator=(const raw_socket&) = delete;

  // 0 when a connection to the port is established, else the errno of connect().
  static int connect_error(std::uint16_t port) {
    const int fd = open_and_connect(port);
    if (fd < 0) return -fd;
    ::close(fd);
    return 0;
  }

  // False when the connection is already broken.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Reads until `want` bytes have arrived (complete), the peer closed, or `limit` has passed
  // (timed_out: the connection is still open).
  read_result read(std::size_t want, std::chrono::milliseconds limit) {
    read_result result;
    const auto deadline = clock_type::now() + limit;
    while (result.bytes.size() < want) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
      if (left <= 0ms) {
        result.end = ending::timed_out;
        return result;
      }
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(left.count()) + 1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return result;
      if (ready == 0) continue;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n > 0) {
        result.bytes.append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0) {
        result.end = ending::eof;
        return result;
      } else if (errno == ECONNRESET) {
        result.end = ending::reset;
        return result;
      } else if (errno != EINTR) {
        return result;
      }
    }
    result.end = ending::complete;
    return result;
  }

  // Everything until the peer closes (or `limit`).
  read_result read_to_end(std::chrono::milliseconds limit = 3s) { return read(1 << 20, limit); }

 private:
  // The fd, or minus the errno.
  static int open_and_connect(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      const int error = errno;
      ::close(fd);
      return -error;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }

  int fd_ = -1;
};

// Sends PING and expects exactly PONG back.
bool ping_pong(raw_socket& s) {
  if (!s.send(ping)) return false;
  const read_result r = s.read(pong.size(), 3s);
  return r.end == ending::complete && r.bytes == pong;
}

long long timed_ping_ms(sync_client& client) {
  const auto start = clock_type::now();
  const auto reply = client.command({"PING"});
  BOOST_TEST(reply.text == "PONG");
  return ms_since(start);
}

// A real server, and the proxy in front of it. The proxy is destroyed first.
struct proxied_redis {
  redis_server server;
  chaos proxy{server.port()};

  // A direct connection to the server, bypassing the proxy.
  sync_client direct() { return sync_client(server.port()); }

  bool settles(std::uint64_t open) {
    return eventually_blocking([&] { return proxy.connections_open() == open; }, 3000ms);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(chaos_proxy_fixture, proxied_redis)

BOOST_AUTO_TEST_CASE(forwards_requests_and_counts_connections_and_bytes) {
  BOOST_TEST(proxy.config().host == "127.0.0.1");
  BOOST_TEST(proxy.config().port == proxy.port());
  BOOST_TEST(proxy.port() != server.port());
  BOOST_TEST(proxy.connections_accepted() == 0u);

  const std::string big(200'000, 'x');  // many chunks in both directions
  {
    sync_client client(proxy.port());
    BOOST_TEST(client.command({"PING"}).text == "PONG");
    BOOST_TEST(client.command({"SET", "big", big}).text == "OK");
    BOOST_TEST(client.command({"GET", "big"}).text == big);
    BOOST_TEST(proxy.connections_accepted() == 1u);
    BOOST_TEST(proxy.connections_open() == 1u);

    const std::size_t up =
        ping.size() + encode({"SET", "big", big}).size() + encode({"GET", "big"}).size();
    const std::size_t down =
        pong.size() + std::string("+OK\r\n").size() + ("$200000\r\n" + big + "\r\n").size();
    BOOST_TEST(eventually_blocking(
        [&] {
          return proxy.bytes_forwarded(dir::upstream) == up &&
                 proxy.bytes_forwarded(dir::downstream) == down;
        },
        3000ms));
    BOOST_TEST(proxy.bytes_forwarded(dir::upstream) == up);
    BOOST_TEST(proxy.bytes_forwarded(dir::downstream) == down);
    BOOST_TEST(proxy.bytes_dropped(dir::upstream) == 0u);
    BOOST_TEST(proxy.bytes_dropped(dir::downstream) == 0u);
  }
  // The client's close is passed on, the server closes too, and the proxy releases the connection.
  BOOST_TEST(settles(0));
  BOOST_TEST(proxy.connections_accepted() == 1u);
}

BOOST_AUTO_TEST_CASE(toxics_round_trip_and_are_sanitized) {
  chaos::toxics t;
  t.latency = 5ms;
  t.jitter = 2ms;
  t.timeout = 1000ms;
  t.limit_data = 123;
  t.slicer = chaos::slicer_toxic{0, 0, 10us};
  proxy.set_toxics(dir::upstream, t);
  const chaos::toxics got = proxy.get_toxics(dir::upstream);
  BOOST_TEST(got.latency == 5ms);
  BOOST_TEST(got.jitter == 2ms);
  BOOST_TEST((got.timeout == std::optional(1000ms)));
  BOOST_TEST((got.limit_data == std::optional<std::size_t>(123)));
  BOOST_TEST_REQUIRE(got.slicer.has_value());
  BOOST_TEST(got.slicer->min_bytes == 1u);  // a zero-byte piece would never make progress
  BOOST_TEST(got.slicer->max_bytes == 1u);
  BOOST_TEST(!got.blackhole);
  BOOST_TEST(!proxy.get_toxics(dir::downstream).timeout.has_value());

  proxy.set_blackhole();
  BOOST_TEST(proxy.get_toxics(dir::upstream).blackhole);
  BOOST_TEST(proxy.get_toxics(dir::downstream).blackhole);
  proxy.clear(dir::upstream);
  BOOST_TEST(!proxy.get_toxics(dir::upstream).blackhole);
  BOOST_TEST(!proxy.get_toxics(dir::upstream).timeout.has_value());
  BOOST_TEST(proxy.get_toxics(dir::downstream).blackhole);
  proxy.clear();
  BOOST_TEST(!proxy.get_toxics(dir::downstream).blackhole);
}

BOOST_AUTO_TEST_CASE(latency_delays_each_direction_and_switches_on_an_open_connection) {
  sync_client client(proxy.port());
  const long long baseline = timed_ping_ms(client);
  BOOST_TEST_MESSAGE("round trip without latency: " << baseline << " ms");

  proxy.set_latency(dir::upstream, 150ms);
  BOOST_TEST(timed_ping_ms(client) >= 150);

  proxy.set_latency(150ms);  // both directions: the round trip pays twice
  const long long both = timed_ping_ms(client);
  BOOST_TEST(both >= 300);
  BOOST_TEST(both < 3000);

  proxy.clear();
  BOOST_TEST(timed_ping_ms(client) < 150);  // loopback takes a few ms even under sanitizers
}

BOOST_AUTO_TEST_CASE(latency_with_jitter_keeps_byte_order) {
  proxy.set_latency(40ms, 20ms);  // every chunk held 20..60 ms: later chunks may be due earlier
  raw_socket s(proxy.port());
  const auto start = clock_type::now();
  std::string expected;
  for (int i = 0; i < 30; ++i) {
    const std::string n = std::to_string(i);
    BOOST_TEST_REQUIRE(s.send(encode({"ECHO", n})));
    expected += "$" + std::to_string(n.size()) + "\r\n" + n + "\r\n";
    std::this_thread::sleep_for(2ms);  // separate chunks, each with its own jitter
  }
  const read_result r = s.read(expected.size(), 5s);
  BOOST_TEST(r.end == ending::complete);
  BOOST_TEST(r.bytes == expected);
  BOOST_TEST(ms_since(start) >= 40);  // at least 20 ms each way
}

BOOST_AUTO_TEST_CASE(blackhole_drops_data_and_resets_the_connection_once_lifted) {
  raw_socket s(proxy.port());
  BOOST_TEST_REQUIRE(ping_pong(s));

  proxy.set_blackhole(dir::upstream);
  BOOST_TEST_REQUIRE(s.send(ping));
  const read_result silent = s.read(1, 300ms);
  BOOST_TEST(silent.end == ending::timed_out);  // no reply, and no EOF or reset either
  BOOST_TEST(silent.bytes.empty());
  BOOST_TEST(proxy.connections_open() == 1u);
  BOOST_TEST(eventually_blocking([&] { return proxy.bytes_dropped(dir::upstream) == ping.size(); },
                                 3000ms));

  // A client with a deadline sees its request time out.
  {
    sync_client client(proxy.port(), {}, {}, 300ms);
    BOOST_CHECK_THROW(client.command({"PING"}), std::runtime_error);
  }

  // Dropped, not held, and the stream cannot go on past the hole: after clear() the connection
  // is reset, never answering the dropped request.
  proxy.clear();
  const read_result after_hole = s.read_to_end();
  BOOST_TEST(after_hole.end == ending::reset);
  BOOST_TEST(after_hole.bytes.empty());

  // Downstream only: the request reaches the server, its reply does not reach the client.
  raw_socket again(proxy.port());
  BOOST_TEST_REQUIRE(ping_pong(again));
  proxy.set_blackhole(dir::downstream);
  BOOST_TEST_REQUIRE(again.send(encode({"SET", "blackholed", "1"})));
  BOOST_TEST(again.read(1, 300ms).end == ending::timed_out);
  BOOST_TEST(direct().command({"GET", "blackholed"}).text == "1");
  BOOST_TEST(proxy.bytes_dropped(dir::downstream) == std::string("+OK\r\n").size());
  proxy.clear();
  BOOST_TEST(again.read_to_end().end == ending::reset);
}

BOOST_AUTO_TEST_CASE(timeout_closes_the_connection_after_the_delay) {
  raw_socket open_before(proxy.port());
  BOOST_TEST_REQUIRE(ping_pong(open_before));

  const auto start = clock_type::now();
  proxy.set_timeout(dir::upstream, 250ms);
  BOOST_TEST_REQUIRE(open_before.send(ping));  // dropped: no reply before the close
  const read_result r = open_before.read_to_end();
  BOOST_TEST(r.end == ending::eof);
  BOOST_TEST(r.bytes.empty());
  const long long closed_after = ms_since(start);
  BOOST_TEST(closed_after >= 250);
  BOOST_TEST(closed_after < 3000);

  // A new connection is closed N after its accept.
  const auto connected = clock_type::now();
  raw_socket opened_later(proxy.port());
  BOOST_TEST(opened_later.read_to_end().end == ending::eof);
  BOOST_TEST(ms_since(connected) >= 250);
  BOOST_TEST(settles(0));

  // Removed before it expires: the connection stays open and works again.
  proxy.clear();
  raw_socket survivor(proxy.port());
  BOOST_TEST_REQUIRE(ping_pong(survivor));
  proxy.set_timeout(dir::downstream, 300ms);
  std::this_thread::sleep_for(50ms);
  proxy.set_timeout(dir::downstream, std::nullopt);
  BOOST_TEST(survivor.read(1, 500ms).end == ending::timed_out);
  BOOST_TEST(ping_pong(survivor));
}

BOOST_AUTO_TEST_CASE(reset_peer_resets_open_and_new_connections) {
  raw_socket s(proxy.port());
  BOOST_TEST_REQUIRE(ping_pong(s));

  proxy.set_reset_peer(dir::downstream);
  const read_result r = s.read_to_end();
  BOOST_TEST(r.end == ending::reset);
  BOOST_TEST(settles(0));

  // New connections are reset as soon as they are accepted.
  raw_socket later(proxy.port());
  BOOST_TEST(later.read_to_end().end == ending::reset);
  {
    bool failed = false;
    try {
      sync_client client(proxy.port(), {}, {}, 2000ms);
      client.command({"PING"});
    } catch (const std::runtime_error& e) {
      failed = true;
      BOOST_TEST_MESSAGE("sync_client through reset_peer: " << e.what());
    }
    BOOST_TEST(failed);
  }
  BOOST_TEST(proxy.connections_open() == 0u);

  // Upstream only: the server gets the RST, the client a plain EOF.
  proxy.set_reset_peer(dir::downstream, false);
  raw_socket healthy(proxy.port());
  BOOST_TEST_REQUIRE(ping_pong(healthy));
  proxy.set_reset_peer(dir::upstream);
  BOOST_TEST(healthy.read_to_end().end == ending::eof);

  proxy.clear();
  sync_client client(proxy.port());
  BOOST_TEST(client.command({"PING"}).text == "PONG");
}

BOOST_AUTO_TEST_CASE(limit_data_closes_after_exactly_n_bytes) {
  const std::string value(30, 'v');
  direct().command({"SET", "k", value});
  const std::string reply = "$30\r\n" + value + "\r\n";

  // New connections get N bytes from their accept on.
  proxy.set_limit_data(dir::downstream, 10);
  {
    raw_socket s(proxy.port());
    BOOST_TEST_REQUIRE(s.send(encode({"GET", "k"})));
    const read_result r = s.read_to_end();
    BOOST_TEST(r.end == ending::eof);
    BOOST_TEST(r.bytes == reply.substr(0, 10));
  }

  // Open connections get N more bytes from when the toxic is set.
  proxy.clear();
  {
    raw_socket s(proxy.port());
    BOOST_TEST_REQUIRE(ping_pong(s));
    BOOST_TEST_REQUIRE(ping_pong(s));
    proxy.set_limit_data(dir::downstream, pong.size() + 3);
    BOOST_TEST_REQUIRE(s.send(ping + ping));
    const read_result r = s.read_to_end();
    BOOST_TEST(r.end == ending::eof);
    BOOST_TEST(r.bytes == pong + pong.substr(0, 3));
  }

  // Upstream: a request cut one byte short never reaches the server; a complete one does.
  proxy.clear();
  const std::string set_a = encode({"SET", "a", "1"});
  proxy.set_limit_data(dir::upstream, set_a.size() - 1);
  {
    raw_socket s(proxy.port());
    BOOST_TEST_REQUIRE(s.send(set_a));
    BOOST_TEST(s.read_to_end().end == ending::eof);
  }
  proxy.set_limit_data(dir::upstream, set_a.size());
  {
    raw_socket s(proxy.port());
    BOOST_TEST_REQUIRE(s.send(encode({"SET", "b", "1"})));
    BOOST_TEST(s.read_to_end().end == ending::eof);
  }
  BOOST_TEST(eventually_blocking(
      [&] {
        return direct().command({"GET", "b"}).text == "1";
      },
      3000ms));
  BOOST_TEST(direct().command({"GET", "a"}).is_null());
  BOOST_TEST(settles(0));
}

BOOST_AUTO_TEST_CASE(slicer_delivers_correct_replies_in_paced_pieces) {
  const std::string value(300, 's');
  direct().command({"SET", "sliced", value});

  // 306 reply bytes in pieces of at most 3 bytes, 2 ms apart: at least 101 gaps.
  proxy.set_slicer(dir::downstream, chaos::slicer_toxic{1, 3, 2ms});
  sync_client client(proxy.port());
  const auto start = clock_type::now();
  BOOST_TEST(client.command({"GET", "sliced"}).text == value);
  BOOST_TEST(ms_since(start) >= 200);

  // Both directions, no pause: large requests and replies survive being cut anywhere.
  proxy.set_slicer(chaos::slicer_toxic{1, 7, 0us});
  std::string payload;
  for (int i = 0; i < 2000; ++i)
    payload.push_back(static_cast<char>('a' + i % 26));
  BOOST_TEST(client.command({"SET", "sliced2", payload}).text == "OK");
  BOOST_TEST(client.command({"GET", "sliced2"}).text == payload);
  BOOST_TEST(client.command({"PING"}).text == "PONG");
}

BOOST_AUTO_TEST_CASE(down_refuses_connections_and_up_restores_service) {
  sync_client before(proxy.port());
  BOOST_TEST_REQUIRE(before.command({"PING"}).text == "PONG");
  raw_socket open_raw(proxy.port());
  BOOST_TEST_REQUIRE(ping_pong(open_raw));
  const std::uint16_t port = proxy.port();

  proxy.down();
  BOOST_TEST(proxy.is_down());
  const ending cut = open_raw.read_to_end().end;
  BOOST_TEST((cut == ending::eof || cut == ending::reset), "open connection ended by " << cut);
  BOOST_CHECK_THROW(before.command({"PING"}), std::runtime_error);
  BOOST_TEST(raw_socket::connect_error(port) == ECONNREFUSED);
  BOOST_CHECK_THROW((void)sync_client(port, {}, {}, 1000ms), std::runtime_error);
  BOOST_TEST(settles(0));
  proxy.down();  // idempotent
  BOOST_TEST(raw_socket::connect_error(port) == ECONNREFUSED);

  const auto accepted = proxy.connections_accepted();
  proxy.up();
  BOOST_TEST(!proxy.is_down());
  BOOST_TEST(proxy.port() == port);
  {
    sync_client after(port);
    BOOST_TEST(after.command({"PING"}).text == "PONG");
  }
  BOOST_TEST(proxy.connections_accepted() == accepted + 1);

  proxy.up();  // idempotent
  proxy.down();
  proxy.up();
  sync_client again(port);
  BOOST_TEST(again.command({"PING"}).text == "PONG");
}

BOOST_AUTO_TEST_CASE(toxics_switch_on_one_open_connection) {
  raw_socket s(proxy.port());
  BOOST_TEST_REQUIRE(ping_pong(s));

  proxy.set_latency(100ms);
  auto start = clock_type::now();
  BOOST_TEST(ping_pong(s));
  BOOST_TEST(ms_since(start) >= 200);

  proxy.set_latency(0ms);
  proxy.set_blackhole(dir::downstream);
  BOOST_TEST_REQUIRE(s.send(ping));
  BOOST_TEST(s.read(1, 300ms).end == ending::timed_out);

  // The reply was dropped: a stream with a hole in it is not carried on, but reset.
  proxy.set_blackhole(false);
  BOOST_TEST(s.read_to_end().end == ending::reset);

  raw_socket t(proxy.port());
  proxy.set_blackhole(dir::downstream);
  proxy.set_blackhole(false);  // nothing was lost: the connection goes on
  BOOST_TEST(ping_pong(t));

  proxy.set_slicer(chaos::slicer_toxic{1, 2, 1ms});
  BOOST_TEST(ping_pong(t));

  proxy.clear();
  proxy.set_limit_data(dir::downstream, 3);
  BOOST_TEST_REQUIRE(t.send(ping));
  const read_result r = t.read_to_end();
  BOOST_TEST(r.end == ending::eof);
  BOOST_TEST(r.bytes == pong.substr(0, 3));
  BOOST_TEST(settles(0));
}

BOOST_AUTO_TEST_SUITE_END()

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
