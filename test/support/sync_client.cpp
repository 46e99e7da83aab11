#include "support/sync_client.hpp"

#include "resp/encoder.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace redlock::test {
namespace {

// Command names come from tests and may be arbitrary bytes; keep messages short and printable.
std::string printable_name(std::string_view name) {
  if (name.empty()) return "<empty name>";
  std::string out;
  for (char c : name.substr(0, 32)) {
    out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  if (name.size() > 32) out += "...";
  return out;
}

}  // namespace

sync_client::sync_client(std::uint16_t port, std::string password, std::string username,
                         std::chrono::milliseconds timeout)
    : port_(port), timeout_(timeout), socket_(io_) {
  connect();
  if (password.empty() && username.empty()) return;

  // "AUTH user password" for an ACL user, "AUTH password" for the default user. The password is
  // never put into a message: failures name only the command.
  const resp::value reply =
      username.empty() ? command({"AUTH", password}) : command({"AUTH", username, password});
  if (reply.is_error()) fail("AUTH", reply.text);
}

void sync_client::connect() {
  const auto deadline = clock::now() + timeout_;
  const boost::asio::ip::tcp::endpoint endpoint(boost::asio::ip::address_v4::loopback(), port_);
  bool done = false;
  boost::system::error_code ec;
  socket_.async_connect(endpoint, [&](const boost::system::error_code& e) {
    ec = e;
    done = true;
  });
  wait(done, deadline, "connect");
  if (ec) fail("connect", ec.message());
  socket_.set_option(boost::asio::ip::tcp::no_delay(true), ec);
}

resp::value sync_client::command(std::span<const std::string_view> args) {
  // Redis ignores an empty multi-bulk request without replying, so it could only time out.
  if (args.empty()) throw std::invalid_argument("sync_client: empty command");
  const std::string name = printable_name(args.front());
  if (!socket_.is_open()) fail(name, "not connected (an earlier call failed)");
  const auto deadline = clock::now() + timeout_;

  std::string request;
  resp::encode_command(request, args);

  bool done = false;
  boost::system::error_code ec;
  boost::asio::async_write(socket_, boost::asio::buffer(request),
                           [&](const boost::system::error_code& e, std::size_t) {
                             ec = e;
                             done = true;
                           });
  wait(done, deadline, name);
  if (ec) fail(name, fmt::format("write: {}", ec.message()));

  // One request at a time, so the first complete reply is the answer to this request.
  return read_reply(name, deadline);
}

resp::value sync_client::next_reply() {
  if (!socket_.is_open()) fail("next_reply", "not connected (an earlier call failed)");
  return read_reply("next_reply", clock::now() + timeout_);
}

resp::value sync_client::read_reply(const std::string& name, clock::time_point deadline) {
  bool done = false;
  boost::system::error_code ec;
  for (;;) {
    boost::system::error_code parse_ec;
    if (auto reply = parser_.next(parse_ec)) return std::move(*reply);
    if (parse_ec) fail(name, fmt::format("protocol error: {}", parser_.error_message()));

    const std::span<char> space = parser_.prepare(4096);
    if (space.empty()) fail(name, fmt::format("protocol error: {}", parser_.error_message()));
    std::size_t received = 0;
    done = false;
    socket_.async_read_some(boost::asio::buffer(space.data(), space.size()),
                            [&](const boost::system::error_code& e, std::size_t n) {
                              ec = e;
                              received = n;
                              done = true;
                            });
    wait(done, deadline, name);
    parser_.commit(received);
    if (ec == boost::asio::error::eof) fail(name, "connection closed by the server");
    if (ec) fail(name, fmt::format("read: {}", ec.message()));
  }
}

void sync_client::wait(const bool& done, clock::time_point deadline, std::string_view what) {
  io_.restart();
  while (!done) {
    const auto now = clock::now();
    if (now >= deadline) {
      boost::system::error_code ignored;
      socket_.close(ignored);
      io_.restart();
      io_.run();
      fail(what, fmt::format("timed out after {} ms", timeout_.count()));
    }
    io_.run_one_for(deadline - now);
  }
}

void sync_client::fail(std::string_view what, std::string_view reason) {
  boost::system::error_code ignored;
  socket_.close(ignored);
  parser_.reset();
  throw std::runtime_error(fmt::format("sync_client 127.0.0.1:{}: {}: {}", port_, what, reason));
}

}  // namespace redlock::test
