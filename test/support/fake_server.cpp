#include "support/fake_server.hpp"

#include "lock/scripts.hpp"
#include "resp/parser.hpp"
#include "resp/script.hpp"
#include "resp/value.hpp"
#include "support/async_test.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <list>
#include <map>
#include <mutex>
#include <utility>

namespace redlock::test {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr std::size_t read_chunk = 4096;
// What a connection of the fake server may hold unread in the kernel (Linux doubles it).
constexpr int fixed_receive_buffer = 256 * 1024;

std::string upper(std::string_view word) {
  std::string out(word);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

// A client's command is an array of bulk strings; anything else is not a command.
std::optional<fake_command> to_command(const resp::value& v) {
  if (v.kind != resp::type::array || v.elements.empty()) return std::nullopt;
  fake_command command;
  command.reserve(v.elements.size());
  for (const auto& element : v.elements) {
    if (element.kind != resp::type::bulk_string) return std::nullopt;
    command.push_back(element.text);
  }
  return command;
}

}  // namespace

namespace fake {

std::string ok() {
  return "+OK\r\n";
}
std::string pong() {
  return "+PONG\r\n";
}
std::string simple(std::string_view text) {
  return "+" + std::string(text) + "\r\n";
}
std::string error(std::string_view text) {
  return "-" + std::string(text) + "\r\n";
}
std::string integer(long long n) {
  return ":" + std::to_string(n) + "\r\n";
}
std::string bulk(std::string_view payload) {
  return "$" + std::to_string(payload.size()) + "\r\n" + std::string(payload) + "\r\n";
}
std::string null_bulk() {
  return "$-1\r\n";
}

std::string noscript() {
  return error("NOSCRIPT No matching script. Please use EVAL.");
}
std::string loading() {
  return error("LOADING Redis is loading the dataset in memory");
}
std::string busy() {
  return error(
      "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.");
}
std::string readonly() {
  return error("READONLY You can't write against a read only replica.");
}
std::string oom() {
  return error("OOM command not allowed when used memory > 'maxmemory'.");
}
std::string noauth() {
  return error("NOAUTH Authentication required.");
}

std::string wrong_type_for_set() {
  return integer(1);
}

std::string resp3_null() {
  return "_\r\n";
}
std::string resp3_map() {
  return "%1\r\n+key\r\n:1\r\n";
}
std::string resp3_push(std::string_view message) {
  return ">2\r\n+message\r\n" + simple(message);
}

std::string negative_length() {
  return "$-5\r\n";
}
std::string huge_length() {
  return "$99999999999\r\n";
}
std::string missing_crlf() {
  return "$2\r\nOKxx";
}
std::string bare_cr() {
  return "+OK\rX\n";
}
std::string garbage() {
  return "?garbage\r\n";
}
std::string unterminated() {
  return "+OK";
}

fake_reply one_byte_at_a_time(std::string bytes, std::chrono::milliseconds interval) {
  fake_reply r(std::move(bytes));
  r.one_byte_at_a_time = true;
  r.byte_interval = interval;
  return r;
}

fake_reply delayed(std::string bytes, std::chrono::milliseconds delay) {
  fake_reply r(std::move(bytes));
  r.delay = delay;
  return r;
}

fake_reply then_close(std::string bytes) {
  fake_reply r(std::move(bytes));
  r.after = fake_reply::then::close;
  return r;
}

fake_reply then_reset(std::string bytes) {
  fake_reply r(std::move(bytes));
  r.after = fake_reply::then::reset;
  return r;
}

fake_reply no_reply() {
  return {};
}

bool is(const fake_command& command, std::string_view name) {
  return !command.empty() && upper(command.front()) == upper(name);
}

std::optional<fake_reply> handshake_reply(const fake_command& command) {
  if (is(command, "CLIENT") || is(command, "AUTH") || is(command, "SELECT")) return ok();
  if (is(command, "PING")) return pong();
  // A client that checks what kind of server it reached asks HELLO 2 (HELLO 3 switches to RESP3,
  // which is the script's business): a plain Redis 7 server.
  if (is(command, "HELLO") && command.size() == 2 && command[1] == "2") {
    return "*14\r\n" + bulk("server") + bulk("redis") + bulk("version") + bulk("7.0.15") +
           bulk("proto") + integer(2) + bulk("id") + integer(1) + bulk("mode") +
           bulk("standalone") + bulk("role") + bulk("master") + bulk("modules") + "*0\r\n";
  }
  if (is(command, "SCRIPT") && command.size() == 3)
    return bulk(redlock::detail::sha1_hex(command[2]));
  // The permission probes touch a key of their own that never exists: SET XX sets nothing, the
  // others find nothing to do.
  if (is_permission_probe(command)) return is(command, "SET") ? null_bulk() : integer(0);
  return std::nullopt;
}

bool is_permission_probe(const fake_command& command) {
  return std::any_of(command.begin(), command.end(), [](const std::string& part) {
    return part.starts_with("redlock:acl-probe:");
  });
}

// EVALSHA sha 1 key token ttl (or EVAL source ...) of the client's acquire script, as the SET it
// makes: "SET key token NX PX ttl". Anything else is returned as it is.
fake_command as_acquire_set(const fake_command& command) {
  const auto& lua = redlock::detail::acquire_script();
  const bool calls_it = command.size() == 6 && command[2] == "1" &&
                        ((is(command, "EVALSHA") && command[1] == lua.sha1()) ||
                         (is(command, "EVAL") && command[1] == lua.source()));
  if (!calls_it) return command;
  return {"SET", command[3], command[4], "NX", "PX", command[5]};
}

fake_script with_handshake(fake_script rest) {
  return [rest = std::move(rest)](const fake_command& command, std::size_t connection) {
    if (auto reply = handshake_reply(command)) return *reply;
    if (rest) return rest(as_acquire_set(command), connection);
    return fake_reply(error("ERR unknown command '" + command.front() + "'"));
  };
}

}  // namespace fake

struct fake_server::state {
  // Declared first, destroyed last: the acceptor and the sockets below need it, and destroying it
  // destroys the frames of the session coroutines that are still suspended.
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
  std::uint16_t port = acceptor.local_endpoint().port();

  // Open sessions' sockets, touched only on the server thread; closed at shutdown.
  std::list<std::shared_ptr<tcp::socket>> sockets;

  std::atomic<std::size_t> accepted{0};
  std::atomic<std::size_t> open{0};
  std::atomic<std::size_t> commands{0};
  std::atomic<std::size_t> protocol_errors{0};

  mutable std::mutex mutex;  // guards script, per_name and log
  fake_script script;
  std::map<std::string, std::size_t, std::less<>> per_name;
  std::vector<received> log;

  fake_script current_script() const {
    std::lock_guard lock(mutex);
    return script;
  }

  void record(const fake_command& command, std::size_t connection) {
    const bool counted = !fake::is_permission_probe(command);
    {
      std::lock_guard lock(mutex);
      log.push_back({command, connection});
      if (counted) ++per_name[upper(command.front())];
    }
    // Counted after the log entry, so a test that sees the count also sees the entry.
    if (counted) commands.fetch_add(1);
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
      if (ec) co_return;  // closed at shutdown
      const auto index = accepted.fetch_add(1);
      auto shared = std::make_shared<tcp::socket>(std::move(socket));
      boost::system::error_code ignored;
      shared->set_option(tcp::no_delay(true), ignored);
      // A fixed receive buffer: Linux would otherwise grow it (up to tcp_rmem's maximum, 32 MB
      // on some hosts), and a test whose server stops reading must be able to fill the path
      // with a request of a size that does not depend on the host's settings.
      shared->set_option(asio::socket_base::receive_buffer_size(fixed_receive_buffer), ignored);
      const auto where = sockets.insert(sockets.end(), shared);
      open.fetch_add(1);
      asio::co_spawn(
          io, [this, shared, index]() { return serve(shared, index); },
          [this, where](std::exception_ptr) {
            sockets.erase(where);
            open.fetch_sub(1);
          });
    }
  }

  asio::awaitable<void> serve(std::shared_ptr<tcp::socket> socket, std::size_t index) {
    resp::parser parser;
    asio::steady_timer timer(io);
    boost::system::error_code ignored;
    for (;;) {
      boost::system::error_code ec;
      while (auto value = parser.next(ec)) {
        auto command = to_command(*value);
        if (!command) {
          protocol_errors.fetch_add(1);
          socket->close(ignored);
          co_return;
        }
        record(*command, index);
        const auto script = current_script();
        const fake_reply reply = script ? script(*command, index) : fake_reply();
        if (reply.delay.count() > 0) {
          timer.expires_after(reply.delay);
          co_await timer.async_wait(tuple_awaitable);
        }
        if (reply.one_byte_at_a_time) {
          for (std::size_t i = 0; i < reply.bytes.size(); ++i) {
            if (i != 0 && reply.byte_interval.count() > 0) {
              timer.expires_after(reply.byte_interval);
              co_await timer.async_wait(tuple_awaitable);
            }
            auto [write_error, n] = co_await asio::async_write(
                *socket, asio::buffer(reply.bytes.data() + i, 1), tuple_awaitable);
            (void)n;
            if (write_error) co_return;
          }
        } else if (!reply.bytes.empty()) {
          auto [write_error, n] =
              co_await asio::async_write(*socket, asio::buffer(reply.bytes), tuple_awaitable);
          (void)n;
          if (write_error) co_return;
        }
        if (reply.after == fake_reply::then::close) {
          socket->shutdown(tcp::socket::shutdown_both, ignored);
          socket->close(ignored);
          co_return;
        }
        if (reply.after == fake_reply::then::reset) {
          socket->set_option(asio::socket_base::linger(true, 0), ignored);
          socket->close(ignored);
          co_return;
        }
      }
      if (ec) {
        protocol_errors.fetch_add(1);
        socket->close(ignored);
        co_return;
      }
      auto space = parser.prepare(read_chunk);
      if (space.empty()) {
        protocol_errors.fetch_add(1);
        socket->close(ignored);
        co_return;
      }
      auto [read_error, n] = co_await socket->async_read_some(
          asio::buffer(space.data(), space.size()), tuple_awaitable);
      if (read_error) co_return;  // the client went away, or shutdown closed the socket
      parser.commit(n);
    }
  }

  void shutdown() {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    for (auto& socket : sockets)
      socket->close(ignored);
  }
};

fake_server::fake_server(fake_script script) : state_(std::make_unique<state>()) {
  state_->script = std::move(script);
  asio::co_spawn(
      state_->io, [s = state_.get()]() { return s->accept_loop(); }, asio::detached);
  thread_ = std::thread([s = state_.get()] { s->io.run(); });
}

fake_server::~fake_server() {
  // Closing makes every pending read and accept complete, so the coroutines end and run() returns
  // by itself; stop() covers a session that is sleeping in a delay.
  asio::post(state_->io, [s = state_.get()] {
    s->shutdown();
    s->io.stop();
  });
  thread_.join();
}

std::uint16_t fake_server::port() const noexcept {
  return state_->port;
}

node_config fake_server::config() const {
  node_config node;
  node.host = "127.0.0.1";
  node.port = state_->port;
  return node;
}

void fake_server::set_script(fake_script script) {
  std::lock_guard lock(state_->mutex);
  state_->script = std::move(script);
}

std::size_t fake_server::connections_accepted() const noexcept {
  return state_->accepted.load();
}
std::size_t fake_server::connections_open() const noexcept {
  return state_->open.load();
}
std::size_t fake_server::commands_received() const noexcept {
  return state_->commands.load();
}
std::size_t fake_server::protocol_errors() const noexcept {
  return state_->protocol_errors.load();
}

std::size_t fake_server::commands_received(std::string_view name) const {
  std::lock_guard lock(state_->mutex);
  const auto found = state_->per_name.find(upper(name));
  return found == state_->per_name.end() ? 0 : found->second;
}

std::vector<fake_server::received> fake_server::log() const {
  std::lock_guard lock(state_->mutex);
  return state_->log;
}

}  // namespace redlock::test
