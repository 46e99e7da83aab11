#include "support/chaos_proxy.hpp"

#include "support/async_test.hpp"
#include "support/free_port.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <exception>
#include <future>
#include <initializer_list>
#include <random>
#include <sys/socket.h>
#include <utility>
#include <vector>

namespace redlock::test {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using clock = std::chrono::steady_clock;
using direction = chaos_proxy::direction;
using toxics = chaos_proxy::toxics;
constexpr std::size_t read_size = 16 * 1024;

std::size_t index_of(direction d) {
  return d == direction::upstream ? 0 : 1;
}

// Every duration a toxic holds is kept within [0, 1 day], so that the time points computed from
// it (and the double arithmetic of the jitter) cannot overflow.
template <class Duration>
Duration clamped(Duration d) {
  return std::clamp(d, Duration::zero(),
                    std::chrono::duration_cast<Duration>(std::chrono::hours(24)));
}

// SO_REUSEPORT, which Asio has no name for. The listener and the placeholder that reserves the port
// while the proxy is down both set it, so that each can be bound while the other still holds the
// port: the port is never free for another process to take. Unlike SO_REUSEADDR it does not let a
// non-listening holder be joined by someone else's listener.
class reuse_port {
 public:
  template <class Protocol>
  int level(const Protocol&) const {
    return SOL_SOCKET;
  }
  template <class Protocol>
  int name(const Protocol&) const {
    return SO_REUSEPORT;
  }
  template <class Protocol>
  const int* data(const Protocol&) const {
    return &value_;
  }
  template <class Protocol>
  std::size_t size(const Protocol&) const {
    return sizeof(value_);
  }

 private:
  int value_ = 1;
};

struct direction_config {
  toxics current;
  // Bumped whenever a timeout countdown or a limit_data budget must (re)start; each connection
  // compares it with the generation it last saw, so connections need not be visited when it is set.
  std::uint64_t timeout_generation = 0;
  clock::time_point timeout_set_at{};
  std::uint64_t limit_generation = 0;
};

// What the sessions share. Everything but the atomics is touched on the proxy's thread only.
struct core {
  std::array<direction_config, 2> config;
  std::minstd_rand rng{20240601};  // fixed seed: a failing run can be replayed
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> open{0};
  std::array<std::atomic<std::uint64_t>, 2> forwarded{};
  std::array<std::atomic<std::uint64_t>, 2> dropped{};
  std::optional<std::uint64_t> only_connection;  // chaos_proxy::set_scope

  bool applies_to(std::uint64_t connection) const {
    return !only_connection || *only_connection == connection;
  }
  bool any_reset_peer(std::uint64_t connection) const {
    return applies_to(connection) && (config[0].current.reset_peer || config[1].current.reset_peer);
  }
};

struct chunk {
  std::vector<char> bytes;
  std::size_t offset = 0;  // already written
  clock::time_point arrived;
  double jitter_draw = 0;  // in [-1, 1]; scaled by the jitter in force whenever the chunk is timed
};

// One direction of a proxied connection: a reader that stamps and queues what arrives, and a
// writer that applies the toxics to the queue's front.
struct pipe {
  pipe(direction d, tcp::socket& from, tcp::socket& to)
      : dir(d), from(from), to(to), wake(from.get_executor(), clock::time_point::max()) {}

  const direction dir;
  tcp::socket& from;
  tcp::socket& to;
  std::deque<chunk> queue;
  bool source_done = false;
  bool finished = false;  // the end of stream has been passed on; the writer has ended
  // The writer sleeps on this timer; cancelling it makes the writer look at the queue and the
  // toxics again (new data, a changed toxic, shutdown). A condition variable without threads.
  asio::steady_timer wake;
  std::uint64_t timeout_generation = 0;
  clock::time_point timeout_at{};
  std::uint64_t limit_generation = 0;
  std::size_t limit_left = 0;
  clock::time_point next_piece_at{};  // slicer pacing
  bool lost_bytes = false;            // a blackhole or timeout dropped some: the stream has a hole
};

class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket client, core& shared, std::uint64_t index)
      : client_(std::move(client)),
        server_(client_.get_executor()),
        core_(shared),
        index_(index),
        accepted_at_(clock::now()) {
    ++core_.open;
  }

  void start(std::uint16_t target_port) {
    asio::co_spawn(
        client_.get_executor(),
        [self = shared_from_this(), target_port]() { return self->run(target_port); },
        asio::detached);
  }

  // Called on the proxy's thread after every change of the toxics.
  void poke() {
    if (closed_) return;
    if (core_.any_reset_peer(index_)) {
      reset_per_config();
      return;
    }
    up_.wake.cancel();
    down_.wake.cancel();
  }

  // The receiver of each direction with reset_peer set gets an RST, the other peer a FIN.
  void reset_per_config() {
    close(core_.config[index_of(direction::downstream)].current.reset_peer,
          core_.config[index_of(direction::upstream)].current.reset_peer);
  }

  void close(bool reset_client = false, bool reset_server = false) {
    if (closed_) return;
    closed_ = true;
    --core_.open;
    boost::system::error_code ignored;
    // SO_LINGER 0 makes close() send an RST instead of a FIN and drop unsent data.
    if (reset_client) client_.set_option(asio::socket_base::linger(true, 0), ignored);
    if (reset_server) server_.set_option(asio::socket_base::linger(true, 0), ignored);
    client_.close(ignored);
    server_.close(ignored);
    up_.wake.cancel();
    down_.wake.cancel();
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
    // Small requests must not wait for Nagle, and slicer pieces should leave one by one.
    client_.set_option(tcp::no_delay(true), ec);
    server_.set_option(tcp::no_delay(true), ec);
    const auto executor = client_.get_executor();
    for (pipe* p : {&up_, &down_}) {
      asio::co_spawn(
          executor, [self, p]() { return self->read_loop(*p); }, asio::detached);
      asio::co_spawn(
          executor, [self, p]() { return self->write_loop(*p); }, asio::detached);
    }
  }

  asio::awaitable<void> read_loop(pipe& p) {
    std::uniform_real_distribution<double> draw(-1.0, 1.0);
    for (;;) {
      std::vector<char> bytes(read_size);
      auto [ec, n] = co_await p.from.async_read_some(asio::buffer(bytes), tuple_awaitable);
      if (ec || closed_) {
        // EOF or failure: what was read is still forwarded, then the end of stream is passed on.
        p.source_done = true;
        p.wake.cancel();
        co_return;
      }
      bytes.resize(n);
      p.queue.push_back(chunk{std::move(bytes), 0, clock::now(), draw(core_.rng)});
      p.wake.cancel();
    }
  }

  // The toxics are re-read at every iteration, and every change of them cancels `wake`, so a wait
  // never outlives the configuration it was computed from. Nothing runs between reading them and
  // acting on them but this coroutine: all of it is on the proxy's one thread.
  asio::awaitable<void> write_loop(pipe& p) {
    const direction_config& config = core_.config[index_of(p.dir)];
    auto& forwarded = core_.forwarded[index_of(p.dir)];
    auto& dropped = core_.dropped[index_of(p.dir)];
    const auto drop_queue = [&] {
      for (const chunk& c : p.queue) {
        dropped += c.bytes.size() - c.offset;
        p.lost_bytes = true;
      }
      p.queue.clear();
    };
    const toxics none;
    while (!closed_) {
      const toxics t = core_.applies_to(index_) ? config.current : none;
      const auto now = clock::now();
      if (t.timeout) {
        if (p.timeout_generation != config.timeout_generation) {
          p.timeout_generation = config.timeout_generation;
          p.timeout_at = std::max(config.timeout_set_at, accepted_at_) + *t.timeout;
        }
        drop_queue();
        if (now >= p.timeout_at) {
          close();
          co_return;
        }
        co_await sleep_until(p, p.timeout_at);
        continue;
      }
      if (t.blackhole) {
        drop_queue();
        co_await sleep_until(p, clock::time_point::max());
        continue;
      }
      if (p.lost_bytes) {
        // The toxic that dropped bytes is gone, and they are missing from the middle of the
        // stream: no TCP connection carries on past such a hole (it retransmits, or dies), and a
        // peer that did would read what follows it as if it followed what came before. Reset, as
        // a connection that outlived its retransmissions would be.
        close(true, true);
        co_return;
      }
      if (t.limit_data) {
        if (p.limit_generation != config.limit_generation) {
          p.limit_generation = config.limit_generation;
          p.limit_left = *t.limit_data;
        }
        if (p.limit_left == 0) {
          close();
          co_return;
        }
      }
      if (!t.slicer) p.next_piece_at = {};
      if (p.queue.empty()) {
        if (p.source_done) {
          boost::system::error_code ignored;
          p.to.shutdown(tcp::socket::shutdown_send, ignored);
          finish(p);
          co_return;
        }
        co_await sleep_until(p, clock::time_point::max());
        continue;
      }
      const chunk& front = p.queue.front();
      const auto due = std::max(held_until(front, t), p.next_piece_at);
      if (now < due) {
        co_await sleep_until(p, due);
        continue;
      }
      std::size_t n = front.bytes.size() - front.offset;
      if (t.slicer) n = std::min(n, piece_size(*t.slicer));
      if (t.limit_data) n = std::min(n, p.limit_left);
      // The reader only appends while this write is in flight, and a deque keeps references to
      // its elements valid on push_back, so the buffer stays put.
      auto [ec, written] = co_await asio::async_write(
          p.to, asio::buffer(front.bytes.data() + front.offset, n), tuple_awaitable);
      if (ec || closed_) {
        close();
        co_return;
      }
      forwarded += written;
      chunk& sent = p.queue.front();
      sent.offset += written;
      if (sent.offset == sent.bytes.size()) p.queue.pop_front();
      // A budget exhausted here closes the connection at the top of the next iteration, unless
      // limit_data was changed during the write, which starts a new budget.
      if (t.limit_data) p.limit_left -= std::min(p.limit_left, written);
      if (t.slicer) p.next_piece_at = clock::now() + t.slicer->delay;
    }
  }

  static clock::time_point held_until(const chunk& c, const toxics& t) {
    const auto jitter = std::chrono::duration<double, std::micro>(t.jitter) * c.jitter_draw;
    const auto held = std::chrono::duration_cast<clock::duration>(
        std::chrono::duration<double, std::micro>(t.latency) + jitter);
    return held > clock::duration::zero() ? c.arrived + held : c.arrived;
  }

  std::size_t piece_size(const chaos_proxy::slicer_toxic& s) {
    return std::uniform_int_distribution<std::size_t>(s.min_bytes, s.max_bytes)(core_.rng);
  }

  asio::awaitable<void> sleep_until(pipe& p, clock::time_point when) {
    p.wake.expires_at(when);
    co_await p.wake.async_wait(tuple_awaitable);
  }

  // Both ends of stream passed on: nothing more can flow, the sockets are released.
  void finish(pipe& p) {
    p.finished = true;
    if (up_.finished && down_.finished) close();
  }

  tcp::socket client_;
  tcp::socket server_;
  core& core_;
  const std::uint64_t index_;  // in accept order, from 0
  const clock::time_point accepted_at_;
  bool closed_ = false;
  pipe up_{direction::upstream, client_, server_};
  pipe down_{direction::downstream, server_, client_};
};

}  // namespace

struct chaos_proxy::state {
  explicit state(std::uint16_t target)
      : target_port(target),
        work(io.get_executor()),
        acceptor(io),
        placeholder(io),
        port(listen_on_reserved_port()) {}

  // The proxy holds its port itself from then on (listener or placeholder), but it must not start
  // on a port that another test's server is between a kill and a restart on: see reserved_port.
  std::uint16_t listen_on_reserved_port() {
    constexpr int attempts = 5;
    for (int attempt = 1;; ++attempt) {
      reservation = reserved_port::pick();
      try {
        return listen(reservation.number());
      } catch (const boost::system::system_error&) {
        boost::system::error_code ignored;
        acceptor.close(ignored);
        if (attempt == attempts) throw;  // taken outside the tests each time
      }
    }
  }

  // Opens the listener on `on` and returns the port.
  std::uint16_t listen(std::uint16_t on) {
    acceptor.open(tcp::v4());
    acceptor.set_option(reuse_port());
    acceptor.bind(tcp::endpoint(asio::ip::address_v4::loopback(), on));
    acceptor.listen();
    return acceptor.local_endpoint().port();
  }

  void spawn_accept_loop() {
    asio::co_spawn(
        io, [this, generation = listen_generation]() { return accept_loop(generation); },
        asio::detached);
  }

  // One loop per up(); it ends when its listener is closed, by down() or the destructor. The
  // generation, not is_open(), tells it so: an up() may have reopened the acceptor before the
  // aborted accept of the previous loop is delivered.
  asio::awaitable<void> accept_loop(std::uint64_t generation) {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
      if (generation != listen_generation) co_return;
      if (ec) continue;  // a transient failure (a peer reset before accept): keep listening
      const std::uint64_t index = shared.accepted++;
      if (shared.any_reset_peer(index)) {
        boost::system::error_code ignored;
        if (shared.config[index_of(direction::downstream)].current.reset_peer) {
          socket.set_option(asio::socket_base::linger(true, 0), ignored);
        }
        socket.close(ignored);
        continue;
      }
      auto next = std::make_shared<session>(std::move(socket), shared, index);
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

  void go_down() {
    if (down) return;
    // Bound before the listener closes, so the port is never free; not listening, so a connect is
    // refused by the kernel.
    boost::system::error_code ignored;
    try {
      placeholder.open(tcp::v4());
      placeholder.set_option(reuse_port());
      placeholder.bind(tcp::endpoint(asio::ip::address_v4::loopback(), port));
    } catch (...) {
      placeholder.close(ignored);
      throw;
    }
    ++listen_generation;
    acceptor.close(ignored);
    for_each_session([](session& one) { one.close(); });
    down = true;
  }

  void go_up() {
    if (!down) return;
    try {
      listen(port);
    } catch (...) {
      boost::system::error_code ignored;
      acceptor.close(ignored);
      throw;
    }
    boost::system::error_code ignored;
    placeholder.close(ignored);
    down = false;
    spawn_accept_loop();
  }

  void shutdown() {
    ++listen_generation;
    boost::system::error_code ignored;
    acceptor.close(ignored);
    placeholder.close(ignored);
    for_each_session([](session& one) { one.close(); });
    work.reset();
  }

  // Runs f on the proxy's thread and waits for it, so that a change is in effect when the caller
  // returns; exceptions are rethrown to the caller.
  template <class F>
  auto run_on_io(F f) -> decltype(f()) {
    if (io.get_executor().running_in_this_thread()) return f();
    // The handler shares the task: the caller may wake and return while the handler still unwinds.
    auto task = std::make_shared<std::packaged_task<decltype(f())()>>(std::move(f));
    auto result = task->get_future();
    asio::post(io, [task] { (*task)(); });
    return result.get();
  }

  // Modifies the toxics of the given directions and then lets every connection look at them, in
  // one step: setting a toxic on both directions never shows a connection only one of them.
  template <class Modify>
  void change(std::initializer_list<direction> directions, Modify modify) {
    run_on_io([&] {
      for (direction d : directions)
        modify(shared.config[index_of(d)]);
      for_each_session([](session& one) { one.poke(); });
    });
  }

  const std::uint16_t target_port;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  tcp::acceptor acceptor;
  tcp::socket placeholder;  // holds the port while down
  reserved_port reservation;
  const std::uint16_t port;
  std::atomic<bool> down{false};
  std::uint64_t listen_generation = 0;
  core shared;
  std::vector<std::weak_ptr<session>> sessions;  // touched on the proxy's thread only
};

namespace {

void start_timeout(direction_config& c, std::optional<std::chrono::milliseconds> after) {
  if (after) after = clamped(*after);
  c.current.timeout = after;
  if (after) {
    ++c.timeout_generation;
    c.timeout_set_at = clock::now();
  }
}

void start_limit(direction_config& c, std::optional<std::size_t> bytes) {
  c.current.limit_data = bytes;
  if (bytes) ++c.limit_generation;
}

toxics sanitized(toxics t) {
  t.latency = clamped(t.latency);
  t.jitter = clamped(t.jitter);
  if (t.timeout) t.timeout = clamped(*t.timeout);
  if (t.slicer) {
    t.slicer->min_bytes = std::max<std::size_t>(t.slicer->min_bytes, 1);
    t.slicer->max_bytes = std::max(t.slicer->max_bytes, t.slicer->min_bytes);
    t.slicer->delay = clamped(t.slicer->delay);
  }
  return t;
}

constexpr std::initializer_list<direction> both{direction::upstream, direction::downstream};

void store_latency(direction_config& c, std::chrono::milliseconds delay,
                   std::chrono::milliseconds jitter) {
  c.current.latency = clamped(delay);
  c.current.jitter = clamped(jitter);
}

void store_slicer(direction_config& c, std::optional<chaos_proxy::slicer_toxic> slicer) {
  toxics only;
  only.slicer = slicer;
  c.current.slicer = sanitized(only).slicer;
}

}  // namespace

chaos_proxy::chaos_proxy(std::uint16_t target_port) : state_(std::make_unique<state>(target_port)) {
  state_->spawn_accept_loop();
  thread_ = std::thread([s = state_.get()] { s->io.run(); });
}

chaos_proxy::~chaos_proxy() {
  // The work guard keeps run() going while the proxy is down and idle; shutdown() releases it, and
  // run() returns once every coroutine has seen its socket closed and ended.
  asio::post(state_->io, [s = state_.get()] { s->shutdown(); });
  thread_.join();
}

std::uint16_t chaos_proxy::port() const noexcept {
  return state_->port;
}

node_config chaos_proxy::config() const {
  node_config config;
  config.host = "127.0.0.1";
  config.port = state_->port;
  return config;
}

void chaos_proxy::set_toxics(direction d, const toxics& t) {
  const toxics next = sanitized(t);
  state_->change({d}, [&](direction_config& c) {
    const toxics before = c.current;
    c.current = next;
    if (next.timeout != before.timeout) start_timeout(c, next.timeout);
    if (next.limit_data != before.limit_data) start_limit(c, next.limit_data);
  });
}

chaos_proxy::toxics chaos_proxy::get_toxics(direction d) const {
  return state_->run_on_io([&] { return state_->shared.config[index_of(d)].current; });
}

void chaos_proxy::set_latency(direction d, std::chrono::milliseconds delay,
                              std::chrono::milliseconds jitter) {
  state_->change({d}, [&](direction_config& c) { store_latency(c, delay, jitter); });
}

void chaos_proxy::set_latency(std::chrono::milliseconds delay, std::chrono::milliseconds jitter) {
  state_->change(both, [&](direction_config& c) { store_latency(c, delay, jitter); });
}

void chaos_proxy::set_blackhole(direction d, bool on) {
  state_->change({d}, [&](direction_config& c) { c.current.blackhole = on; });
}

void chaos_proxy::set_blackhole(bool on) {
  state_->change(both, [&](direction_config& c) { c.current.blackhole = on; });
}

void chaos_proxy::set_timeout(direction d, std::optional<std::chrono::milliseconds> after) {
  state_->change({d}, [&](direction_config& c) { start_timeout(c, after); });
}

void chaos_proxy::set_timeout(std::optional<std::chrono::milliseconds> after) {
  state_->change(both, [&](direction_config& c) { start_timeout(c, after); });
}

void chaos_proxy::set_reset_peer(direction d, bool on) {
  state_->change({d}, [&](direction_config& c) { c.current.reset_peer = on; });
}

void chaos_proxy::set_reset_peer(bool on) {
  state_->change(both, [&](direction_config& c) { c.current.reset_peer = on; });
}

void chaos_proxy::set_limit_data(direction d, std::optional<std::size_t> bytes) {
  state_->change({d}, [&](direction_config& c) { start_limit(c, bytes); });
}

void chaos_proxy::set_limit_data(std::optional<std::size_t> bytes) {
  state_->change(both, [&](direction_config& c) { start_limit(c, bytes); });
}

void chaos_proxy::set_slicer(direction d, std::optional<slicer_toxic> slicer) {
  state_->change({d}, [&](direction_config& c) { store_slicer(c, slicer); });
}

void chaos_proxy::set_slicer(std::optional<slicer_toxic> slicer) {
  state_->change(both, [&](direction_config& c) { store_slicer(c, slicer); });
}

void chaos_proxy::set_scope(std::optional<std::uint64_t> only_connection) {
  state_->run_on_io([&] {
    state_->shared.only_connection = only_connection;
    state_->for_each_session([](session& one) { one.poke(); });
  });
}

void chaos_proxy::clear(direction d) {
  state_->change({d}, [](direction_config& c) { c.current = toxics{}; });
}

void chaos_proxy::clear() {
  state_->change(both, [](direction_config& c) { c.current = toxics{}; });
}

void chaos_proxy::down() {
  state_->run_on_io([s = state_.get()] { s->go_down(); });
}

void chaos_proxy::up() {
  state_->run_on_io([s = state_.get()] { s->go_up(); });
}

bool chaos_proxy::is_down() const noexcept {
  return state_->down.load();
}

std::uint64_t chaos_proxy::connections_accepted() const noexcept {
  return state_->shared.accepted.load();
}

std::uint64_t chaos_proxy::connections_open() const noexcept {
  return state_->shared.open.load();
}

std::uint64_t chaos_proxy::bytes_forwarded(direction d) const noexcept {
  return state_->shared.forwarded[index_of(d)].load();
}

std::uint64_t chaos_proxy::bytes_dropped(direction d) const noexcept {
  return state_->shared.dropped[index_of(d)].load();
}

}  // namespace redlock::test
