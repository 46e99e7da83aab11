#include "support/delay_proxy.hpp"

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

#include <atomic>
#include <deque>
#include <utility>
#include <vector>

namespace redlock::test {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using clock = std::chrono::steady_clock;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t chunk_size = 16 * 1024;

struct chunk {
  std::vector<char> bytes;
  clock::time_point arrived;
};

// One direction of a proxied connection: a reader that stamps and queues what arrives, and a
// writer that forwards the queue's front once it is due.
struct direction {
  direction(tcp::socket& from, tcp::socket& to)
      : from(from), to(to), wake(from.get_executor(), clock::time_point::max()) {}

  tcp::socket& from;
  tcp::socket& to;
  std::deque<chunk> queue;
  bool source_done = false;
  // The writer sleeps on this timer; cancelling it makes the writer look at the queue and the
  // delay again (new data, a changed delay, shutdown). A condition variable without threads.
  asio::steady_timer wake;
};

class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket client, const std::atomic<std::int64_t>& delay_ms)
      : client_(std::move(client)), server_(client_.get_executor()), delay_ms_(delay_ms) {}

  void start(std::uint16_t target_port) {
    asio::co_spawn(
        client_.get_executor(),
        [self = shared_from_this(), target_port]() { return self->run(target_port); },
        asio::detached);
  }

  void poke() {
    up_.wake.cancel();
    down_.wake.cancel();
  }

  void close() {
    closed_ = true;
    boost::system::error_code ignored;
    client_.close(ignored);
    server_.close(ignored);
    poke();
  }

 private:
  asio::awaitable<void> run(std::uint16_t target_port) {
    auto self = shared_from_this();
    const tcp::endpoint target(asio::ip::address_v4::loopback(), target_port);
    auto [ec] = co_await server_.async_connect(target, tuple_awaitable);
    if (ec || closed_) {
      close();
      co_return;
    }
    // Small requests must not wait for Nagle: the only latency here is the one configured.
    client_.set_option(tcp::no_delay(true), ec);
    server_.set_option(tcp::no_delay(true), ec);
    const auto executor = client_.get_executor();
    asio::co_spawn(
        executor, [self]() { return self->read_loop(self->up_); }, asio::detached);
    asio::co_spawn(
        executor, [self]() { return self->write_loop(self->up_); }, asio::detached);
    asio::co_spawn(
        executor, [self]() { return self->read_loop(self->down_); }, asio::detached);
    asio::co_spawn(
        executor, [self]() { return self->write_loop(self->down_); }, asio::detached);
  }

  asio::awaitable<void> read_loop(direction& d) {
    for (;;) {
      std::vector<char> bytes(chunk_size);
      auto [ec, n] = co_await d.from.async_read_some(asio::buffer(bytes), tuple_awaitable);
      if (ec) {
        // EOF or failure: what was read is still forwarded, then the other side is shut down.
        d.source_done = true;
        d.wake.cancel();
        co_return;
      }
      bytes.resize(n);
      d.queue.push_back(chunk{std::move(bytes), clock::now()});
      d.wake.cancel();
    }
  }

  asio::awaitable<void> write_loop(direction& d) {
    while (!closed_) {
      if (d.queue.empty()) {
        if (d.source_done) {
          boost::system::error_code ignored;
          d.to.shutdown(tcp::socket::shutdown_send, ignored);
          co_return;
        }
        d.wake.expires_at(clock::time_point::max());
        co_await d.wake.async_wait(tuple_awaitable);
        continue;
      }
      // The delay is read at every wake-up, so a changed delay re-times what is still held.
      const auto due = d.queue.front().arrived + std::chrono::milliseconds(delay_ms_.load());
      if (clock::now() < due) {
        d.wake.expires_at(due);
        co_await d.wake.async_wait(tuple_awaitable);
        continue;
      }
      chunk next = std::move(d.queue.front());
      d.queue.pop_front();
      auto [ec, n] = co_await asio::async_write(d.to, asio::buffer(next.bytes), tuple_awaitable);
      if (ec) {
        close();
        co_return;
      }
    }
  }

  tcp::socket client_;
  tcp::socket server_;
  const std::atomic<std::int64_t>& delay_ms_;
  bool closed_ = false;
  direction up_{client_, server_};
  direction down_{server_, client_};
};

}  // namespace

struct delay_proxy::state {
  state(std::uint16_t target, std::chrono::milliseconds delay)
      : target_port(target),
        delay_ms(delay.count()),
        acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)),
        port(acceptor.local_endpoint().port()) {}

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
      // Closed by the destructor: also a connection accepted just before must not be served.
      if (!acceptor.is_open()) co_return;
      if (ec) continue;  // a transient failure (a peer reset before accept): keep listening
      auto next = std::make_shared<session>(std::move(socket), delay_ms);
      std::erase_if(sessions, [](const std::weak_ptr<session>& s) { return s.expired(); });
      sessions.push_back(next);
      next->start(target_port);
    }
  }

  template <class F>
  void for_each_session(F f) {
    for (auto& weak : sessions) {
      if (auto s = weak.lock()) f(*s);
    }
  }

  const std::uint16_t target_port;
  std::atomic<std::int64_t> delay_ms;
  asio::io_context io;
  tcp::acceptor acceptor;
  const std::uint16_t port;
  std::vector<std::weak_ptr<session>> sessions;  // touched on the proxy's thread only
};

delay_proxy::delay_proxy(std::uint16_t target_port, std::chrono::milliseconds delay)
    : state_(std::make_unique<state>(target_port, delay)) {
  asio::co_spawn(
      state_->io, [s = state_.get()]() { return s->accept_loop(); }, asio::detached);
  // No work guard: run() returns by itself once the destructor has closed every socket and each
  // coroutine has ended, so nothing is destroyed while a handler could still run.
  thread_ = std::thread([s = state_.get()] { s->io.run(); });
}

delay_proxy::~delay_proxy() {
  asio::post(state_->io, [s = state_.get()] {
    boost::system::error_code ignored;
    s->acceptor.close(ignored);
    s->for_each_session([](session& one) { one.close(); });
  });
  thread_.join();
}

std::uint16_t delay_proxy::port() const noexcept {
  return state_->port;
}

node_config delay_proxy::config() const {
  node_config config;
  config.host = "127.0.0.1";
  config.port = state_->port;
  return config;
}

void delay_proxy::set_delay(std::chrono::milliseconds delay) {
  state_->delay_ms.store(delay.count());
  // Writers waiting for a chunk's old due time must look again.
  asio::post(state_->io,
             [s = state_.get()] { s->for_each_session([](session& one) { one.poke(); }); });
}

std::chrono::milliseconds delay_proxy::delay() const noexcept {
  return std::chrono::milliseconds(state_->delay_ms.load());
}

}  // namespace redlock::test
