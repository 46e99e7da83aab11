#ifndef REDLOCK_TEST_SUPPORT_SYNC_CLIENT_HPP
#define REDLOCK_TEST_SUPPORT_SYNC_CLIENT_HPP

#include "resp/parser.hpp"
#include "resp/value.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace redlock::test {

// A blocking, single-request-at-a-time Redis client for test fixtures and assertions: it is
// deliberately independent of src/net so that tests of the connection do not check it with itself.
// Every call has a deadline (default 5 s) and throws std::runtime_error naming the port and the
// command on I/O failure, timeout or protocol error. Error replies to command() are returned, not
// thrown; a refused AUTH in the constructor throws.
class sync_client {
 public:
  explicit sync_client(std::uint16_t port, std::string password = {}, std::string username = {},
                       std::chrono::milliseconds timeout = std::chrono::seconds(5));

  resp::value command(std::span<const std::string_view> args);
  resp::value command(std::initializer_list<std::string_view> args) {
    return command(std::span<const std::string_view>(args.begin(), args.size()));
  }

  // The next reply, sending nothing: for a connection in subscribed mode, whose messages come
  // without a request (a command's reply after them is read by a later call).
  resp::value next_reply();

 private:
  using clock = std::chrono::steady_clock;

  void connect();
  // Reads one complete reply; `name` is what a failure names.
  resp::value read_reply(const std::string& name, clock::time_point deadline);
  // Runs the io_context until `done` is set by a handler. At the deadline it closes the socket,
  // drains the aborted handler (it refers to the caller's locals) and throws.
  void wait(const bool& done, clock::time_point deadline, std::string_view what);
  // Closes the socket, so that every later call fails fast, and throws.
  [[noreturn]] void fail(std::string_view what, std::string_view reason);

  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  resp::parser parser_;
};

}  // namespace redlock::test

#endif
