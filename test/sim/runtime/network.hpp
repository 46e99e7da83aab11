#ifndef REDLOCK_TEST_SIM_RUNTIME_NETWORK_HPP
#define REDLOCK_TEST_SIM_RUNTIME_NETWORK_HPP

// The simulated network between the library's connections (sim_transport) and the model Redis
// servers, with the faults a real one has. Each link is one TCP connection: bytes arrive whole and
// in order in each direction (a later message never overtakes an earlier one), after a delay the
// seed chooses; a partition holds a link's bytes until it heals (TCP retransmits) and stalls its
// connects; a reset drops what is in flight and fails the client's reads; a stopped server
// (SIGSTOP) keeps its connections and reads nothing until it resumes; a killed one resets every
// link and refuses connects until it comes back without its keys.

#include "redlock/node_config.hpp"
#include "sim/model/server.hpp"
#include "sim/runtime/world.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::sim {

using io_handler =
    boost::asio::any_completion_handler<void(boost::system::error_code, std::size_t)>;
using connect_handler = boost::asio::any_completion_handler<void(boost::system::error_code)>;

// One model server on the network.
struct sim_node {
  std::string host;
  std::uint16_t port = 0;
  std::unique_ptr<model_server> server;
  bool up = true;
  time_point down_until{};  // restarts may overlap: it comes back after the last one's time
  time_point paused_until{};
  // The node's own clock: virtual time at `rate` (a drift), from an offset that makes TIME look
  // like a date.
  double rate = 1.0;
  std::int64_t offset_us = 1'700'000'000'000'000;

  std::int64_t now_us() const noexcept;
  bool paused() const noexcept { return paused_until > world::now(); }
};

// What a client's socket takes without waiting (sim_transport::write_now). A real socket takes a
// whole batch at once while its send buffer has room, part of it when the buffer fills, and none
// when it is full (or the link is TLS); each path completes a write differently in the library.
enum class socket_writes {
  async_only,  // never at once: every batch goes through async_write
  whole,       // always the whole batch at once
  mixed,       // each batch by chance: whole, a part (the rest asynchronously), or none
};
std::string_view to_string(socket_writes mode) noexcept;

// How messages travel, as the seed chose for a run.
struct network_profile {
  // One-way delay of an ordinary message, uniform in [low, high].
  duration delay_low = std::chrono::microseconds(50);
  duration delay_high = std::chrono::microseconds(400);
  // The chance that a message is late, and how late it may be (uniform up to it).
  double late_chance = 0.0;
  duration late_most = std::chrono::milliseconds(0);
  // The chance that a request is executed and then its link reset before the reply leaves.
  double reset_after_execute_chance = 0.0;
  socket_writes writes = socket_writes::async_only;
};

class network {
 public:
  explicit network(world& w) : world_(w) {}
  ~network();
  network(const network&) = delete;
  network& operator=(const network&) = delete;

  // The network of the running simulation (the transports find it here); one at a time.
  static network& current();
  // nullptr once the network is gone (while a run's last objects are destroyed).
  static network* current_or_null() noexcept;
  void make_current();

  sim_node& add_node(std::string host, std::uint16_t port, server_role role = server_role::master);
  std::vector<std::unique_ptr<sim_node>>& nodes() noexcept { return nodes_; }
  network_profile& profile() noexcept { return profile_; }

  // Faults. Times are virtual; each ends by itself.
  void pause(sim_node& node, duration how_long);
  // Kills the server: links reset, connects refused; after `down_for` it comes back with no keys
  // and no scripts.
  void restart_without_keys(sim_node& node, duration down_for);
  // Process number `client` (world::processes) cannot reach `node` until `how_long` has passed.
  void partition(std::size_t client, const sim_node& node, duration how_long);
  // Resets every link between process `client` and `node` at once.
  void reset_links(std::size_t client, const sim_node& node);
  bool partitioned(std::size_t client, const sim_node& node) const;

  // Counters for a run's report.
  std::uint64_t messages() const noexcept { return messages_; }
  // The draws of socket_writes::mixed come from their own generator, so that a run whose writes
  // are all asynchronous draws exactly what it drew before the mode existed.
  void seed_socket_writes(std::uint64_t seed) { socket_random_.seed(seed); }

  // --- the transports' side ---
  // Each takes the executor its completion is posted to: the handler's associated executor (or
  // the transport's), found before the handler was type-erased.
  struct link;
  // Where a connect puts the link it made (the transport's), so that a transport gone before its
  // connect ended is not written to.
  struct link_slot {
    std::shared_ptr<link> made;
  };
  // Which process a transport belongs to: found from the executor it was made with.
  std::size_t process_of(const boost::asio::any_io_executor& executor) const;
  void connect(const node_config& to, std::size_t client, std::shared_ptr<link_slot> into,
               const boost::asio::any_io_executor& executor, connect_handler handler);
  void write(const std::shared_ptr<link>& l, std::string bytes,
             const boost::asio::any_io_executor& executor, io_handler handler);
  // What the socket takes at once, as the profile's `writes` says: the bytes taken are on their
  // way, as an async_write's; 0 with would_block when it takes none; 0 with an error, at once, on
  // a closed or reset link.
  std::size_t write_now(const std::shared_ptr<link>& l, boost::asio::const_buffer bytes,
                        boost::system::error_code& ec);
  void read(const std::shared_ptr<link>& l, boost::asio::mutable_buffer into,
            const boost::asio::any_io_executor& executor, io_handler handler);
  // The client closes its end: pending reads end with operation_aborted; the server sees the
  // close after whatever the client had written.
  void close(const std::shared_ptr<link>& l);

 private:
  duration one_way_delay();
  time_point partition_end(std::size_t client, const sim_node& node) const;
  // Puts bytes the client wrote on their way to the server, behind what is already on the way.
  void send_to_server(const std::shared_ptr<link>& l, std::string bytes);
  // `bytes` empty: the client's FIN.
  void deliver_to_server(const std::shared_ptr<link>& l, std::optional<std::string> bytes);
  void run_on_server(const std::shared_ptr<link>& l, std::optional<std::string> bytes);
  void deliver_to_client(const std::shared_ptr<link>& l, std::string bytes);
  void send_to_client(const std::shared_ptr<link>& l, std::string bytes);
  void reset(const std::shared_ptr<link>& l);
  void complete_read(const std::shared_ptr<link>& l);
  void drop_server_end(const std::shared_ptr<link>& l);

  world& world_;
  network_profile profile_;
  std::vector<std::unique_ptr<sim_node>> nodes_;
  std::vector<std::weak_ptr<link>> links_;
  // (client, node) → until when they cannot reach each other.
  std::map<std::pair<std::size_t, const sim_node*>, time_point> partitions_;
  std::uint64_t messages_ = 0;
  std::mt19937_64 socket_random_;
  network* previous_ = nullptr;
};

struct network::link {
  sim_node* node = nullptr;
  std::size_t client = 0;
  session* server_end = nullptr;
  bool client_closed = false;
  bool reset = false;
  // Bytes that reached the client and were not read yet; a read waiting for them.
  std::string inbox;
  std::optional<io_handler> pending_read;
  boost::asio::mutable_buffer read_into;
  boost::asio::any_io_executor read_executor;
  // Delivery instants never go back in one direction: FIFO.
  time_point last_to_server{};
  time_point last_to_client{};
  // What reached a stopped server, in order, for when it resumes (nullopt: the FIN).
  std::vector<std::optional<std::string>> backlog;
};

}  // namespace redlock::sim

#endif
