#ifndef REDLOCK_TEST_SUPPORT_FAKE_SERVER_HPP
#define REDLOCK_TEST_SUPPORT_FAKE_SERVER_HPP

#include "redlock/node_config.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace redlock::test {

// One command as the fake server received it: its words, e.g. {"SET", "key", "token", "NX", "PX",
// "10000"}. The name keeps the case the client sent.
using fake_command = std::vector<std::string>;

// What the fake server does in answer to one command. Implicitly made from the raw bytes to send,
// so a script can simply `return "+OK\r\n";`.
//
// Replies on one connection go out strictly in the order of the commands, like a real server's: a
// reply that is delayed (or sent one byte at a time) holds back the replies of the commands after
// it, and no further command is read from that connection meanwhile.
struct fake_reply {
  enum class then : std::uint8_t {
    stay_open,  // keep serving the connection
    close,      // after the bytes, shut the connection down gracefully (FIN)
    reset,      // after the bytes, abort the connection (RST: SO_LINGER 0, then close)
  };

  fake_reply() = default;
  fake_reply(std::string bytes) : bytes(std::move(bytes)) {}  // NOLINT: implicit by design
  fake_reply(const char* bytes) : bytes(bytes) {}             // NOLINT: implicit by design

  std::string bytes;                           // sent exactly as given; empty: nothing is sent
  std::chrono::milliseconds delay{0};          // waited before the first byte
  bool one_byte_at_a_time = false;             // each byte in its own write (TCP_NODELAY is on)
  std::chrono::milliseconds byte_interval{1};  // pause between two one-byte writes
  then after = then::stay_open;
};

// Called once per command received, on the fake server's own thread, with the command and the
// zero-based index of the connection it came on (connections are numbered in accept order).
// A script shared with the test thread must synchronise what it captures (atomics suffice).
using fake_script = std::function<fake_reply(const fake_command& command, std::size_t connection)>;

// Ready-made replies and behaviours for scripts. Each returns the raw RESP bytes (or a
// fake_reply), so they can be concatenated to send several replies at once.
namespace fake {

// Well-formed RESP2 replies.
std::string ok();                            // +OK
std::string pong();                          // +PONG
std::string simple(std::string_view text);   // +text
std::string error(std::string_view text);    // -text   (text starts with the code word)
std::string integer(long long n);            // :n
std::string bulk(std::string_view payload);  // $len payload
std::string null_bulk();                     // $-1

// Redis error replies the library must cope with, with the texts Redis 7 sends.
std::string noscript();  // -NOSCRIPT No matching script. Please use EVAL.
std::string loading();   // -LOADING Redis is loading the dataset in memory
std::string busy();      // -BUSY Redis is busy running a script. ...
std::string readonly();  // -READONLY You can't write against a read only replica.
std::string oom();       // -OOM command not allowed when used memory > 'maxmemory'.
std::string noauth();    // -NOAUTH Authentication required.

// Well-formed replies of the wrong kind for a command.
std::string wrong_type_for_set();  // :1 (SET NX answers +OK or a null, never an integer)

// RESP3 frames, which a RESP2 client does not expect but must survive.
std::string resp3_null();                          // _
std::string resp3_map();                           // %1 with +key => :1
std::string resp3_push(std::string_view message);  // >2 with +message and +message-text

// Bytes that are not valid RESP. Each makes a RESP parser fail.
std::string negative_length();  // $-5          (only -1 is a valid negative length)
std::string huge_length();      // $99999999999 (beyond any sane bulk limit)
std::string missing_crlf();     // $2 OK followed by "xx" where the CRLF belongs
std::string bare_cr();          // +OK CR X LF  (CR not followed by LF)
std::string garbage();          // ?garbage     (unknown type byte)

// An incomplete line: "+OK" and then nothing. A parser waits for more bytes, forever.
std::string unterminated();

// `bytes` sent one byte per write, `interval` apart.
fake_reply one_byte_at_a_time(std::string bytes,
                              std::chrono::milliseconds interval = std::chrono::milliseconds(1));
// `bytes` sent after `delay`.
fake_reply delayed(std::string bytes, std::chrono::milliseconds delay);
// `bytes` (possibly empty) then the connection is closed (FIN) or reset (RST).
fake_reply then_close(std::string bytes);
fake_reply then_reset(std::string bytes);
// Nothing is sent; the command stays unanswered.
fake_reply no_reply();

// The reply a real server gives to the commands of the redlock connection's handshake:
// CLIENT ... => +OK, PING => +PONG, AUTH => +OK, SELECT => +OK, SCRIPT LOAD src => its SHA-1,
// HELLO 2 => what a plain Redis 7 server says (mode standalone).
// Nothing for other commands.
std::optional<fake_reply> handshake_reply(const fake_command& command);

// One of the commands a redlock handshake sends to learn whether the ACL user may run what the
// lock needs (on a key of their own). The server's counters leave them out; its log() has them.
bool is_permission_probe(const fake_command& command);

// A script that answers the handshake as handshake_reply() does and passes every other command
// to `rest`. Without `rest`, other commands get "-ERR unknown command".
// The client's acquire script (a SET NX PX that answers a refusal with the key's PTTL) reaches
// `rest` as the SET it makes, so that a node modelled on SET answers it: +OK, nil and errors mean
// the same from either.
fake_script with_handshake(fake_script rest = {});

// Case-insensitive comparison of a command's name (its first word) with `name`.
bool is(const fake_command& command, std::string_view name);

}  // namespace fake

// A scripted RESP server for fault tests: it listens on a free 127.0.0.1 port, parses each
// command sent to it (RESP arrays of bulk strings, pipelined or not, split at any byte), and
// answers it with whatever its script returns: valid replies, error replies, several replies,
// none, garbage, bytes one at a time, or a close or reset of the connection.
//
// It runs on its own thread with its own io_context, so a test may block while it serves. It
// counts connections and commands, so a test can assert that a client reconnected, and which
// commands reached the server and on which connection. A client that sends something other than
// a command (not an array of bulk strings, or bytes the parser rejects) has its connection closed
// and counted in protocol_errors().
//
// Every member function may be called from any thread. The destructor closes the listener and
// every connection and joins the thread; it never throws.
class fake_server {
 public:
  // One command, as received.
  struct received {
    fake_command command;
    std::size_t connection = 0;  // zero-based, in accept order
  };

  // Starts listening at once. The default script answers the handshake and nothing else (other
  // commands get "-ERR unknown command").
  explicit fake_server(fake_script script = fake::with_handshake());
  ~fake_server();
  fake_server(const fake_server&) = delete;
  fake_server& operator=(const fake_server&) = delete;

  std::uint16_t port() const noexcept;

  // 127.0.0.1 and port(), no password, database 0: the node as a client should see it.
  node_config config() const;

  // Replaces the script; commands received from now on use the new one.
  void set_script(fake_script script);

  // Connections accepted so far (including closed ones).
  std::size_t connections_accepted() const noexcept;
  // Connections currently open.
  std::size_t connections_open() const noexcept;
  // Commands received so far on all connections, permission probes (see is_permission_probe)
  // not counted; so for the counts below.
  std::size_t commands_received() const noexcept;
  // Commands received so far whose name (first word, case-insensitive) is `name`. "CLIENT"
  // counts CLIENT SETNAME.
  std::size_t commands_received(std::string_view name) const;
  // Connections closed because the client sent bytes that are not a command.
  std::size_t protocol_errors() const noexcept;
  // Every command received so far, in the order it was read (per connection; connections
  // interleave in the order their bytes arrived).
  std::vector<received> log() const;

 private:
  struct state;
  std::unique_ptr<state> state_;
  std::thread thread_;
};

// The nodes as a client should see them, in order.
inline std::vector<node_config> configs_of(const std::vector<std::unique_ptr<fake_server>>& nodes) {
  std::vector<node_config> configs;
  for (const auto& node : nodes)
    configs.push_back(node->config());
  return configs;
}

}  // namespace redlock::test

#endif
