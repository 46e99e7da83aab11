#ifndef REDLOCK_TEST_SUPPORT_CHAOS_PROXY_HPP
#define REDLOCK_TEST_SUPPORT_CHAOS_PROXY_HPP

#include "redlock/node_config.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

namespace redlock::test {

// A fault-injecting TCP proxy, in the spirit of Toxiproxy: it listens on a free 127.0.0.1 port and
// forwards every accepted connection to 127.0.0.1:target_port, applying "toxics" to the bytes in
// flight. Toxics are configured independently per direction and apply to the connections that are
// open when they are set as well as to every later one.
//
// Directions. `upstream` is the client -> server stream, `downstream` the server -> client one.
// Every setter has a form taking a direction and a form without one that sets both directions.
//
// Toxics (all off by default; several may be combined, see "Precedence"):
//   latency     Each chunk read from the source is held until its arrival time + delay + a jitter
//               drawn once per chunk, uniformly in [-jitter, +jitter] (never earlier than its
//               arrival). Chunks leave in arrival order, so a chunk due earlier than the one before
//               it waits for it: byte order is always kept. A changed delay re-times held chunks.
//   blackhole   Connections stay open and the source keeps being read, but nothing is forwarded in
//               that direction: data is DROPPED (counted in bytes_dropped()), not held; it is not
//               delivered when the toxic is removed. An end of stream is held back while the
//               blackhole is set. A connection that lost bytes this way (or to a timeout) is reset
//               (RST to both peers) when the toxic is removed: a TCP stream never skips bytes, so
//               a peer must not go on reading what follows a hole as if it followed what came
//               before (replies matched to the wrong requests). Connections that lost nothing go
//               on.
//   timeout(N)  Like blackhole (data is dropped), and in addition each connection is closed (FIN to
//               both peers) N after the toxic was set or, for a later connection, after it was
//               accepted. Removing the toxic before then keeps the connection open; setting it
//               again restarts the countdown.
//   reset_peer  Connections are closed at once with a TCP RST (SO_LINGER 0) towards the receiver of
//               that direction (upstream: the server, downstream: the client) and a FIN towards the
//               other peer; existing connections when it is set, new ones as soon as they are
//               accepted (before the server is dialled), for as long as it stays set. Use
//               `downstream` (or both) to make the client see "connection reset by peer".
//   limit_data(N) Forwards N more bytes in that direction, counted per connection from when the
//               toxic was set (or from the accept), then closes the connection (FIN to both peers)
//               right after the N-th byte; a chunk that crosses the limit is cut. N == 0 closes at
//               once. Setting it again restarts the count.
//   slicer      Forwards each chunk in pieces of a size drawn uniformly in [min_bytes, max_bytes],
//               written one by one with at least `delay` between two pieces (TCP_NODELAY is set,
//               so pieces usually reach the peer as separate segments).
//
// Durations are clamped to [0, 24 h]; a slicer's min_bytes is at least 1 and max_bytes at least
// min_bytes. get_toxics() returns the clamped values.
//
// Precedence within one direction: reset_peer, then timeout, then blackhole; otherwise a chunk is
// held for its latency, then cut by the slicer, then by limit_data.
//
// down() / up(). down() closes every connection (FIN to both peers) and stops accepting: the
// listening socket is closed while a bound, non-listening socket keeps the port reserved, so a
// connect is refused (ECONNREFUSED) and the port cannot be bound by anyone else (short of a socket
// of the same user that also sets SO_REUSEPORT). up() listens on the same port again and throws
// std::system_error if it cannot. Both are idempotent. Toxics are kept across down()/up().
//
// Threading. The proxy runs on its own thread with its own io_context, so it keeps forwarding while
// the test's thread blocks. Every member function may be called from any thread at any time, also
// while connections are open. Setters, clear(), down() and up() are synchronous: when they return,
// the change is in effect for every open connection (a connection reset by reset_peer or closed by
// down() has been closed) and for every later one. Counters are atomics and may lag a completed
// write by a moment: poll them with a deadline.
//
// The destructor closes the listener and every connection and joins the thread.
class chaos_proxy {
 public:
  enum class direction { upstream /* client -> server */, downstream /* server -> client */ };

  struct slicer_toxic {
    std::size_t min_bytes = 1;
    std::size_t max_bytes = 8;
    std::chrono::microseconds delay{0};  // between two pieces
  };

  // The toxics of one direction, as a whole.
  struct toxics {
    std::chrono::milliseconds latency{0};
    std::chrono::milliseconds jitter{0};
    bool blackhole = false;
    std::optional<std::chrono::milliseconds> timeout;
    bool reset_peer = false;
    std::optional<std::size_t> limit_data;
    std::optional<slicer_toxic> slicer;
  };

  explicit chaos_proxy(std::uint16_t target_port);
  ~chaos_proxy();
  chaos_proxy(const chaos_proxy&) = delete;
  chaos_proxy& operator=(const chaos_proxy&) = delete;

  // The port the proxy listens on; it stays the same across down() and up().
  std::uint16_t port() const noexcept;

  // 127.0.0.1 and port(): the node as a client should see it.
  node_config config() const;

  // Replaces all toxics of one direction. A timeout or limit_data given here restarts its countdown
  // only when its value differs from the current one.
  void set_toxics(direction d, const toxics& t);
  toxics get_toxics(direction d) const;

  // One toxic at a time; the others of that direction are kept. Passing zero / false / nullopt
  // removes the toxic.
  void set_latency(direction d, std::chrono::milliseconds delay,
                   std::chrono::milliseconds jitter = std::chrono::milliseconds(0));
  void set_latency(std::chrono::milliseconds delay,
                   std::chrono::milliseconds jitter = std::chrono::milliseconds(0));
  void set_blackhole(direction d, bool on = true);
  void set_blackhole(bool on = true);
  void set_timeout(direction d, std::optional<std::chrono::milliseconds> after);
  void set_timeout(std::optional<std::chrono::milliseconds> after);
  void set_reset_peer(direction d, bool on = true);
  void set_reset_peer(bool on = true);
  void set_limit_data(direction d, std::optional<std::size_t> bytes);
  void set_limit_data(std::optional<std::size_t> bytes);
  void set_slicer(direction d, std::optional<slicer_toxic> slicer);
  void set_slicer(std::optional<slicer_toxic> slicer);

  // Which connections the toxics apply to: every one (nullopt, the default), or only the one
  // accepted `only_connection`-th, counting from 0 in accept order as connections_accepted()
  // does; the others forward untouched, as if no toxic were set. For a client that opens several
  // connections to one node in a known order (a lock client's command connection first, its
  // release subscription next), so that one of them can be slowed down alone. Takes effect like
  // a setter.
  void set_scope(std::optional<std::uint64_t> only_connection);

  // Removes every toxic of one direction, or of both. Does not bring a down() proxy back up.
  void clear(direction d);
  void clear();

  void down();
  void up();
  bool is_down() const noexcept;

  // Connections accepted since construction (including those reset by reset_peer at once).
  std::uint64_t connections_accepted() const noexcept;
  // Connections the proxy holds: accepted and not yet released. A connection is released when the
  // proxy closes it, or once both peers have ended their stream (a half-closed one is still open).
  std::uint64_t connections_open() const noexcept;
  // Bytes written to the receiving peer, and bytes discarded by blackhole or timeout, per
  // direction.
  std::uint64_t bytes_forwarded(direction d) const noexcept;
  std::uint64_t bytes_dropped(direction d) const noexcept;

 private:
  struct state;
  std::unique_ptr<state> state_;
  std::thread thread_;
};

}  // namespace redlock::test

#endif
