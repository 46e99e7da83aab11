#include "sim/runtime/network.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace redlock::sim {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

thread_local network* current_network = nullptr;

// `executor`: the handler's associated executor, taken before it was type-erased.
template <class Handler, class... Args>
void post_completion(world& w, const asio::any_io_executor& executor, Handler handler,
                     Args... args) {
  if (w.closing()) return;
  asio::post(executor,
             [handler = std::move(handler), args...]() mutable { std::move(handler)(args...); });
}

}  // namespace

std::string_view to_string(socket_writes mode) noexcept {
  switch (mode) {
    case socket_writes::async_only:
      return "nothing at once: every batch is an async_write";
    case socket_writes::whole:
      return "every batch whole at once";
    case socket_writes::mixed:
      return "each batch whole, in part or not at once, by chance";
  }
  return "?";
}

std::int64_t sim_node::now_us() const noexcept {
  const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
                           world::now() - detail::lock_clock::epoch())
                           .count();
  return offset_us + static_cast<std::int64_t>(static_cast<double>(elapsed) * rate);
}

network::~network() {
  if (current_network == this) current_network = previous_;
}

network& network::current() {
  if (!current_network) throw std::logic_error("sim: no network on this thread");
  return *current_network;
}

network* network::current_or_null() noexcept {
  return current_network;
}

void network::make_current() {
  previous_ = current_network;
  current_network = this;
}

sim_node& network::add_node(std::string host, std::uint16_t port, server_role role) {
  auto node = std::make_unique<sim_node>();
  node->host = std::move(host);
  node->port = port;
  node->server = std::make_unique<model_server>(node->host, role);
  nodes_.push_back(std::move(node));
  return *nodes_.back();
}

duration network::one_way_delay() {
  auto low = profile_.delay_low.count();
  auto high = std::max(low, profile_.delay_high.count());
  duration d{world_.uniform(low, high)};
  if (profile_.late_chance > 0 && world_.chance(profile_.late_chance)) {
    d += duration{world_.uniform(0, profile_.late_most.count())};
  }
  return d;
}

time_point network::partition_end(std::size_t client, const sim_node& node) const {
  auto found = partitions_.find({client, &node});
  return found == partitions_.end() ? time_point{} : found->second;
}

bool network::partitioned(std::size_t client, const sim_node& node) const {
  return partition_end(client, node) > world::now();
}

std::size_t network::process_of(const asio::any_io_executor& executor) const {
  const auto* io = executor.target<asio::io_context::executor_type>();
  const auto& processes = world_.processes();
  for (std::size_t i = 0; io && i < processes.size(); ++i) {
    if (&io->context() == &processes[i]->context) return i;
  }
  throw std::logic_error("sim: a transport on an executor of no simulated process");
}

void network::connect(const node_config& to, std::size_t client, std::shared_ptr<link_slot> into,
                      const asio::any_io_executor& executor, connect_handler handler) {
  sim_node* target = nullptr;
  for (auto& node : nodes_) {
    if (node->host == to.host && node->port == to.port) target = node.get();
  }
  // The SYN and its answer: a round trip; under a partition, not before it heals.
  time_point when = world::now() + one_way_delay() + one_way_delay();
  if (target) when = std::max(when, partition_end(client, *target) + one_way_delay());

  struct attempt {
    connect_handler handler;
    world::event_id due{};
    bool done = false;
  };
  auto state = std::make_shared<attempt>();
  // Swapped in: Boost 1.81's move assignment of any_completion_handler wraps the handler in
  // itself endlessly.
  state->handler.swap(handler);
  auto finish = [this, state, executor](error_code ec) {
    state->done = true;
    auto slot = asio::get_associated_cancellation_slot(state->handler);
    if (slot.is_connected() && ec != asio::error::operation_aborted) slot.clear();
    post_completion(world_, executor, std::move(state->handler), ec);
  };
  std::erase_if(links_, [](const std::weak_ptr<link>& l) { return l.expired(); });
  state->due = world_.at(when, [this, state, finish, target, client, into] {
    if (state->done) return;
    if (!target) return finish(asio::error::host_not_found);
    if (!target->up) return finish(asio::error::connection_refused);
    auto l = std::make_shared<link>();
    l->node = target;
    l->client = client;
    std::weak_ptr<link> weak = l;
    l->server_end = &target->server->open([this, weak](std::string bytes) {
      if (auto self = weak.lock()) send_to_client(self, std::move(bytes));
    });
    links_.push_back(l);
    into->made = std::move(l);
    finish({});
  });
  auto slot = asio::get_associated_cancellation_slot(state->handler);
  if (slot.is_connected()) {
    slot.assign([this, state, finish](asio::cancellation_type type) mutable {
      if (type == asio::cancellation_type::none || state->done) return;
      world_.cancel(state->due);
      finish(asio::error::operation_aborted);
    });
  }
}

void network::write(const std::shared_ptr<link>& l, std::string bytes,
                    const asio::any_io_executor& executor, io_handler handler) {
  const std::size_t n = bytes.size();
  if (!l || l->client_closed) {
    return post_completion(world_, executor, std::move(handler),
                           error_code(asio::error::bad_descriptor), std::size_t{0});
  }
  if (l->reset) {
    return post_completion(world_, executor, std::move(handler),
                           error_code(asio::error::broken_pipe), std::size_t{0});
  }
  send_to_server(l, std::move(bytes));
  post_completion(world_, executor, std::move(handler), error_code{}, n);
}

std::size_t network::write_now(const std::shared_ptr<link>& l, asio::const_buffer bytes,
                               error_code& ec) {
  if (!l || l->client_closed) {
    ec = asio::error::bad_descriptor;
    return 0;
  }
  if (l->reset) {
    ec = asio::error::broken_pipe;
    return 0;
  }
  std::size_t taken = 0;
  switch (profile_.writes) {
    case socket_writes::async_only:
      break;
    case socket_writes::whole:
      taken = bytes.size();
      break;
    case socket_writes::mixed:
      // Half the batches whole, a quarter in part (at least a byte, at most all but one), a
      // quarter not at all.
      switch (socket_random_() % 4) {
        case 0:
        case 1:
          taken = bytes.size();
          break;
        case 2:
          if (bytes.size() > 1) taken = 1 + socket_random_() % (bytes.size() - 1);
          break;
        default:
          break;
      }
      break;
  }
  if (taken == 0) {
    ec = asio::error::would_block;
    return 0;
  }
  ec = {};
  send_to_server(l, std::string(static_cast<const char*>(bytes.data()), taken));
  return taken;
}

void network::send_to_server(const std::shared_ptr<link>& l, std::string bytes) {
  ++messages_;
  const time_point when = std::max(world::now() + one_way_delay(), l->last_to_server);
  l->last_to_server = when;
  world_.at(when, [this, l, bytes = std::move(bytes)]() mutable {
    deliver_to_server(l, std::optional<std::string>(std::move(bytes)));
  });
}

void network::deliver_to_server(const std::shared_ptr<link>& l, std::optional<std::string> bytes) {
  if (l->reset || !l->server_end) return;
  // A partition holds the bytes until it heals: TCP retransmits them then.
  if (const time_point healed = partition_end(l->client, *l->node); healed > world::now()) {
    const time_point when = std::max(healed + one_way_delay(), l->last_to_server);
    l->last_to_server = when;
    world_.at(when, [this, l, bytes = std::move(bytes)]() mutable {
      deliver_to_server(l, std::move(bytes));
    });
    return;
  }
  if (l->node->paused()) {
    l->backlog.push_back(std::move(bytes));
    return;
  }
  run_on_server(l, std::move(bytes));
}

void network::run_on_server(const std::shared_ptr<link>& l, std::optional<std::string> bytes) {
  if (l->reset || !l->server_end) return;
  if (!bytes) return drop_server_end(l);
  l->server_end->receive(*bytes, l->node->now_us());
  if (profile_.reset_after_execute_chance > 0 && !l->reset &&
      world_.chance(profile_.reset_after_execute_chance)) {
    reset(l);
  }
}

void network::send_to_client(const std::shared_ptr<link>& l, std::string bytes) {
  if (l->reset) return;
  ++messages_;
  const time_point when = std::max(world::now() + one_way_delay(), l->last_to_client);
  l->last_to_client = when;
  world_.at(when, [this, l, bytes = std::move(bytes)]() mutable {
    deliver_to_client(l, std::move(bytes));
  });
}

void network::deliver_to_client(const std::shared_ptr<link>& l, std::string bytes) {
  if (l->reset || l->client_closed) return;
  if (const time_point healed = partition_end(l->client, *l->node); healed > world::now()) {
    const time_point when = std::max(healed + one_way_delay(), l->last_to_client);
    l->last_to_client = when;
    world_.at(when, [this, l, bytes = std::move(bytes)]() mutable {
      deliver_to_client(l, std::move(bytes));
    });
    return;
  }
  l->inbox += bytes;
  complete_read(l);
}

void network::read(const std::shared_ptr<link>& l, asio::mutable_buffer into,
                   const asio::any_io_executor& executor, io_handler handler) {
  if (!l || l->client_closed) {
    return post_completion(world_, executor, std::move(handler),
                           error_code(asio::error::bad_descriptor), std::size_t{0});
  }
  l->pending_read.emplace(std::move(handler));
  l->read_into = into;
  l->read_executor = executor;
  auto slot = asio::get_associated_cancellation_slot(*l->pending_read);
  if (slot.is_connected()) {
    slot.assign([this, weak = std::weak_ptr<link>(l)](asio::cancellation_type type) {
      auto self = weak.lock();
      if (type == asio::cancellation_type::none || !self || !self->pending_read) return;
      auto h = std::move(*self->pending_read);
      self->pending_read.reset();
      post_completion(world_, self->read_executor, std::move(h),
                      error_code(asio::error::operation_aborted), std::size_t{0});
    });
  }
  complete_read(l);
}

void network::complete_read(const std::shared_ptr<link>& l) {
  if (!l->pending_read) return;
  error_code ec;
  std::size_t n = 0;
  if (!l->inbox.empty()) {
    n = std::min(l->inbox.size(), l->read_into.size());
    std::memcpy(l->read_into.data(), l->inbox.data(), n);
    l->inbox.erase(0, n);
  } else if (l->reset) {
    ec = asio::error::connection_reset;
  } else if (l->client_closed) {
    ec = asio::error::operation_aborted;
  } else {
    return;
  }
  auto handler = std::move(*l->pending_read);
  l->pending_read.reset();
  auto slot = asio::get_associated_cancellation_slot(handler);
  if (slot.is_connected()) slot.clear();
  post_completion(world_, l->read_executor, std::move(handler), ec, n);
}

void network::reset(const std::shared_ptr<link>& l) {
  if (l->reset) return;
  l->reset = true;
  l->inbox.clear();
  l->backlog.clear();
  drop_server_end(l);
  complete_read(l);
}

void network::drop_server_end(const std::shared_ptr<link>& l) {
  if (!l->server_end) return;
  l->node->server->close(*l->server_end);
  l->server_end = nullptr;
}

void network::close(const std::shared_ptr<link>& l) {
  if (!l || l->client_closed) return;
  l->client_closed = true;
  l->inbox.clear();
  complete_read(l);
  // The FIN follows what was written before it.
  const time_point when = std::max(world::now() + one_way_delay(), l->last_to_server);
  l->last_to_server = when;
  world_.at(when, [this, l] { deliver_to_server(l, std::nullopt); });
}

void network::pause(sim_node& node, duration how_long) {
  node.paused_until = std::max(node.paused_until, world::now() + how_long);
  world_.at(node.paused_until, [this, &node] {
    if (node.paused()) return;
    for (auto& weak : links_) {
      auto l = weak.lock();
      if (!l || l->node != &node || l->reset) continue;
      auto backlog = std::move(l->backlog);
      l->backlog.clear();
      for (auto& bytes : backlog)
        run_on_server(l, std::move(bytes));
    }
  });
}

void network::restart_without_keys(sim_node& node, duration down_for) {
  node.up = false;
  node.down_until = std::max(node.down_until, world::now() + down_for);
  for (auto& weak : links_) {
    if (auto l = weak.lock(); l && l->node == &node) reset(l);
  }
  // Nothing reaches a node that is down: what it had is gone from the moment it stops.
  node.server->lose_everything();
  world_.at(node.down_until, [&node] {
    if (world::now() >= node.down_until) node.up = true;
  });
}

void network::partition(std::size_t client, const sim_node& node, duration how_long) {
  auto& until = partitions_[{client, &node}];
  until = std::max(until, world::now() + how_long);
}

void network::reset_links(std::size_t client, const sim_node& node) {
  for (auto& weak : links_) {
    if (auto l = weak.lock(); l && l->node == &node && l->client == client) reset(l);
  }
}

}  // namespace redlock::sim
