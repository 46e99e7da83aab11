#include "sim/runner.hpp"

#include "algo/hash_slot.hpp"
#include "lock/scripts.hpp"
#include "redlock/client.hpp"
#include "redlock/mutex.hpp"
#include "redlock/rw_lock.hpp"
#include "redlock/semaphore.hpp"
#include "redlock/with_lock.hpp"
#include "sim/runtime/network.hpp"
#include "sim/runtime/sim_timer.hpp"
#include "unsafe_switches.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <functional>
#include <memory>

namespace redlock::sim {

namespace asio = boost::asio;
using asio::awaitable;
using boost::system::error_code;
using std::chrono::milliseconds;

std::string resource_name(op_kind kind, std::uint32_t i) {
  switch (kind) {
    case op_kind::semaphore:
      return fmt::format("s{}", i);
    case op_kind::rw_read:
    case op_kind::rw_write:
      return fmt::format("w{}", i);
    default:
      return fmt::format("r{}", i);
  }
}

std::uint32_t semaphore_permits(std::uint32_t i) {
  return i + 1;
}

socket_writes socket_writes_for(std::uint64_t seed) {
  // Its own draw, apart from the world's generator and the mixed mode's.
  std::mt19937_64 draw(seed ^ 0x5a0c4e7d2b91f36dULL);
  switch (draw() % 4) {
    case 0:
      return socket_writes::async_only;
    case 1:
      return socket_writes::whole;
    default:
      return socket_writes::mixed;
  }
}

namespace {

// Salts the mixed mode's generator, so that its draws are not the world's.
constexpr std::uint64_t socket_draws_salt = 0x3c6ef372fe94f82bULL;

constexpr auto as_tuple_awaitable = asio::as_tuple(asio::use_awaitable);

awaitable<void> sleep_for(duration d) {
  sim_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(as_tuple_awaitable);
}

// A completion a coroutine waits for, counting how often its handler is called.
template <class... Results>
struct completion_box {
  explicit completion_box(const asio::any_io_executor& executor) : wake(executor) {
    wake.expires_at(time_point::max());
  }
  sim_timer wake;
  std::optional<std::tuple<Results...>> result;
  unsigned calls = 0;
};

class run {
 public:
  run(const scenario& s, const run_options& options, history& h)
      : s_(s), options_(options), h_(h), world_(s.seed), net_(world_) {
    net_.make_current();
  }

  history& go(run_stats* stats);

 private:
  std::uint32_t nodes() const { return std::max<std::uint32_t>(1, s_.nodes); }
  std::uint32_t clients() const { return std::max<std::uint32_t>(1, s_.clients); }
  std::uint32_t resources() const { return std::max<std::uint32_t>(1, s_.resources); }

  void note(std::size_t hold_index, std::string_view what) {
    if (!options_.trace) return;
    const hold& h = h_.holds[hold_index];
    h_.events.push_back(fmt::format("{} client {} op {} ({} {}): {}", at_text(world::now()),
                                    h.client, h.op, to_string(h.kind),
                                    h.resources.empty() ? "" : h.resources.front(), what));
  }
  void note(std::string line) {
    if (options_.trace) h_.events.push_back(fmt::format("{} {}", at_text(world::now()), line));
  }

  void set_up();
  void schedule_faults();
  awaitable<void> client_script(std::uint32_t c);
  awaitable<void> run_operation(std::size_t op_index);
  awaitable<void> acquire_and_hold(std::size_t hold_index, redlock::client& client,
                                   const operation& op, asio::cancellation_slot slot);
  awaitable<void> with_lock_operation(std::size_t hold_index, redlock::client& client,
                                      const operation& op);
  awaitable<void> use_lease(std::size_t hold_index, lease& l, const operation& op);
  awaitable<void> release(std::size_t hold_index, lease& l);
  void acquired(std::size_t hold_index, const lease& l);
  void record_claim(std::size_t hold_index, const lease& l);
  // Calls `visit` for every key alive on every node, on that node's clock.
  void for_each_live_key(
      const std::function<void(std::uint32_t node, const std::string& key, stored_value& value,
                               std::int64_t now_ms)>& visit);
  std::set<std::uint32_t> nodes_holding(const std::string& token);
  token_holders holders_of_tokens();
  // A loss of node `index`'s keys, begun before they go and recorded once they are gone.
  key_loss begin_loss(std::uint32_t index, bool at_once);
  void record_loss(key_loss loss);
  void collect_settled();
  void collect_leftovers();

  // One Redlock node of the run. A standalone one is one server; a sentinel-shaped one is a
  // master and its replica, which swap at each failover, and the sentinel that names the master.
  struct node_slot {
    sim_node* master = nullptr;  // where the node's keys are now
    sim_node* replica = nullptr;
    sim_node* sentinel = nullptr;
    std::string master_name;
    // A cluster-shaped node: its shards' masters (the first is `master`) and their slots.
    std::vector<sim_node*> shards;
    std::shared_ptr<cluster_map> cluster;
  };
  // The master that failover fault `f` replaces, as the nodes stand now; nullptr for other faults
  // and for shapes the run does not have.
  const sim_node* failing_master(const fault& f) const;
  // The node a failover fault hits (sentinel-shaped), and the node and shard a shard failover hits
  // (cluster-shaped): the one choice both the fault and its cut-off snapshot use.
  std::uint32_t failover_node(const fault& f) const;
  std::uint32_t shard_failover_node(const fault& f) const;
  static std::size_t shard_failover_shard(const fault& f) { return f.client % 2; }
  // What a master's replica has when promoted: every write, or (lagging) what it had received at
  // the fault's cut-off, and nothing if that master was not yet the master then.
  keyspace promoted_keys(const sim_node& former, bool lagging) const;
  void failover(std::uint32_t index, bool lagging);
  void reshard(std::uint32_t index, const std::string& name);
  void shard_failover(std::uint32_t index, std::size_t shard, bool lagging);
  // The servers that hold node `index`'s keys: its master, or every shard master of a cluster.
  std::vector<sim_node*> data_servers(std::uint32_t index) const;

  const scenario& s_;
  const run_options& options_;
  history& h_;
  world world_;
  network net_;
  std::vector<node_slot> slots_;
  std::uint16_t shard_failovers_ = 0;
  // What each lagging replica had received at its failover's cut-off, by the master it follows.
  std::map<const sim_node*, keyspace> replica_copies_;
  std::vector<std::unique_ptr<redlock::client>> clients_;
  std::vector<bool> shut_down_;
  std::size_t scripts_running_ = 0;
  std::map<std::string, std::uint64_t> store_;
};

void run::set_up() {
  net_.profile().delay_low = std::chrono::microseconds(50);
  net_.profile().delay_high =
      std::chrono::microseconds(std::max<std::uint32_t>(50, s_.delay_high_us));
  net_.profile().late_chance = s_.late_permille / 1000.0;
  net_.profile().late_most = milliseconds(s_.late_most_ms);
  net_.profile().reset_after_execute_chance = s_.reset_after_execute_permille / 1000.0;
  net_.profile().writes = options_.writes.value_or(socket_writes_for(s_.seed));
  net_.seed_socket_writes(s_.seed ^ socket_draws_salt);
  note(fmt::format("client sockets take {}", to_string(net_.profile().writes)));
  if (s_.network_calm_ms != 0) {
    world_.at(detail::lock_clock::epoch() + milliseconds(s_.network_calm_ms), [this] {
      net_.profile().late_chance = 0;
      net_.profile().reset_after_execute_chance = 0;
      note("the network is calm from now on: no late messages, no resets");
    });
  }

  std::vector<node_config> configs;
  for (std::uint32_t i = 0; i < nodes(); ++i) {
    sim_node& node = net_.add_node(fmt::format("n{}", i), static_cast<std::uint16_t>(7000 + i));
    const std::int32_t ppm = i < s_.node_drift_ppm.size() ? s_.node_drift_ppm[i] : 0;
    node.rate = 1.0 + ppm / 1e6;
    node_slot slot;
    slot.master = &node;
    node_config config;
    config.host = node.host;
    config.port = node.port;
    if (i < s_.sentinel_nodes) {
      // The replica shares its master's clock (one machine's drift, one expiry per key).
      sim_node& replica =
          net_.add_node(fmt::format("n{}r", i), static_cast<std::uint16_t>(7100 + i));
      replica.rate = node.rate;
      replica.server->become_replica_of(node.host, node.port);
      sim_node& sentinel = net_.add_node(
          fmt::format("s{}", i), static_cast<std::uint16_t>(26379 + i), server_role::sentinel);
      slot.replica = &replica;
      slot.sentinel = &sentinel;
      slot.master_name = fmt::format("m{}", i);
      sentinel.server->monitor(slot.master_name, node.host, node.port, sentinel.now_us());
      config.kind = node_kind::sentinel;
      config.host = sentinel.host;
      config.port = sentinel.port;
      config.sentinel_master = slot.master_name;
    } else if (i < s_.sentinel_nodes + s_.cluster_nodes) {
      // Two masters of half the slots each, on one machine's clock (keys keep their expiry when
      // a slot moves).
      sim_node& second =
          net_.add_node(fmt::format("n{}b", i), static_cast<std::uint16_t>(7300 + i));
      second.rate = node.rate;
      slot.cluster = std::make_shared<cluster_map>();
      slot.shards = {&node, &second};
      for (std::size_t k = 0; k < slot.shards.size(); ++k) {
        const sim_node& shard = *slot.shards[k];
        const auto first = static_cast<std::uint16_t>(k * 8192);
        slot.cluster->shards.push_back({shard.host,
                                        shard.port,
                                        std::string(40, static_cast<char>('a' + k)),
                                        {{first, static_cast<std::uint16_t>(first + 8191)}}});
      }
      for (sim_node* shard : slot.shards)
        shard->server->join_cluster(slot.cluster, shard->host, shard->port);
      config.kind = node_kind::cluster;
      config.seeds = {fmt::format("{}:{}", second.host, second.port)};
    }
    slots_.push_back(std::move(slot));
    configs.push_back(config);
  }
  for (std::uint32_t c = 0; c < clients(); ++c) {
    auto& process = world_.add_process();
    client_options options;
    options.node_timeout = milliseconds(s_.node_timeout_ms);
    options.connect_timeout = milliseconds(200);
    options.health_check_timeout = milliseconds(1000);
    options.client_name = fmt::format("client-{}", c);
    // A traced history shows what the library said too (failovers followed, links lost).
    if (options_.trace) {
      options.logger = [this, c](log_level, std::string_view message) {
        note(fmt::format("client {} log: {}", c, message));
      };
    }
    clients_.push_back(
        std::make_unique<redlock::client>(process.context.get_executor(), configs, options));
    shut_down_.push_back(false);
  }
}

void run::failover(std::uint32_t index, bool lagging) {
  // The writes the replica had not received are lost, as by a restart that comes back at once.
  std::optional<key_loss> loss;
  if (lagging) loss = begin_loss(index, true);
  node_slot& slot = slots_[index];
  sim_node& promoted = *slot.replica;
  // A full resync: the promoted replica has what it had received, and no scripts.
  promoted.server->keys() = promoted_keys(*slot.master, lagging);
  promoted.server->scripts().flush();
  promoted.server->become_master();
  slot.master->server->become_replica_of(promoted.host, promoted.port);
  slot.replica = slot.master;
  slot.master = &promoted;
  slot.sentinel->server->switch_master(slot.master_name, promoted.host, promoted.port,
                                       slot.sentinel->now_us());
  if (loss) record_loss(std::move(*loss));
}

void run::reshard(std::uint32_t index, const std::string& name) {
  node_slot& slot = slots_[index];
  const std::uint16_t hash = detail::hash_slot(name);
  const cluster_map::shard* owner = slot.cluster->owner_of(hash);
  if (owner == nullptr) return;
  const auto from = static_cast<std::size_t>(owner - slot.cluster->shards.data());
  const std::size_t to = 1 - from;
  // The keys go with their slot at once (a migration without its ASK phase).
  sim_node& source = *slot.shards[from];
  sim_node& target = *slot.shards[to];
  // A migration needs its source. A source that is down (killed, to come back without its keys
  // once they could all have expired) hands its slot over as an operator reassigns the slots of a
  // dead master: without the keys, which are lost at that moment, as by a restart that comes back
  // at once. The delayed restart no longer keeps them from being taken again (seed 451701).
  std::optional<key_loss> loss;
  if (!source.up) loss = begin_loss(index, true);
  const auto now_ms = source.now_us() / 1000;
  auto& keys = source.server->keys();
  for (const auto& key : keys.live_keys(now_ms)) {
    if (detail::hash_slot(key) != hash) continue;
    if (stored_value* v = keys.find(key, now_ms)) target.server->keys().assign(key, *v);
    keys.erase(key);
  }
  slot.cluster->move_slot(hash, to);
  source.server->slot_moved_away(hash);
  note(fmt::format("slot {} (of {}) moved from {} to {}{}", hash, name, source.host, target.host,
                   loss ? ", without its keys: the source is down" : ""));
  if (loss) record_loss(std::move(*loss));
}

void run::shard_failover(std::uint32_t index, std::size_t shard, bool lagging) {
  // The writes the replica had not received are lost, as by a restart that comes back at once.
  std::optional<key_loss> loss;
  if (lagging) loss = begin_loss(index, true);
  node_slot& slot = slots_[index];
  sim_node& former = *slot.shards[shard];
  ++shard_failovers_;
  sim_node& promoted = net_.add_node(fmt::format("{}f{}", former.host, shard_failovers_),
                                     static_cast<std::uint16_t>(7400 + shard_failovers_));
  promoted.rate = former.rate;
  promoted.server->keys() = promoted_keys(former, lagging);
  promoted.server->join_cluster(slot.cluster, promoted.host, promoted.port);
  auto& entry = slot.cluster->shards[shard];
  entry.host = promoted.host;
  entry.port = promoted.port;
  entry.id = fmt::format("{:040}", shard_failovers_);
  former.server->become_replica_of(promoted.host, promoted.port);
  former.server->all_slots_moved_away();
  slot.shards[shard] = &promoted;
  if (shard == 0) slot.master = &promoted;
  note(fmt::format("shard {} of node {} failed over from {} to {}", shard, index, former.host,
                   promoted.host));
  if (loss) record_loss(std::move(*loss));
}

std::vector<sim_node*> run::data_servers(std::uint32_t index) const {
  const node_slot& slot = slots_[index];
  if (!slot.shards.empty()) return slot.shards;
  return {slot.master};
}

std::uint32_t run::failover_node(const fault& f) const {
  return f.node % std::min(s_.sentinel_nodes, nodes());
}

std::uint32_t run::shard_failover_node(const fault& f) const {
  return s_.sentinel_nodes + f.node % s_.cluster_nodes;
}

const sim_node* run::failing_master(const fault& f) const {
  if (f.kind == fault_kind::failover && s_.sentinel_nodes > 0)
    return slots_[failover_node(f)].master;
  if (f.kind == fault_kind::shard_failover && s_.cluster_nodes > 0)
    return slots_[shard_failover_node(f)].shards[shard_failover_shard(f)];
  return nullptr;
}

keyspace run::promoted_keys(const sim_node& former, bool lagging) const {
  if (!lagging) return former.server->keys();
  const auto copy = replica_copies_.find(&former);
  return copy == replica_copies_.end() ? keyspace{} : copy->second;
}

void run::schedule_faults() {
  for (const fault& f : s_.faults) {
    const auto at = detail::lock_clock::epoch() + milliseconds(f.at_ms);
    if (f.duration_ms > 0 && failing_master(f) != nullptr) {
      // A lagging replica's data: its master's, that long before the failover.
      const auto cut = at - std::min(milliseconds(f.duration_ms), milliseconds(f.at_ms));
      world_.at(cut, [this, f] {
        const sim_node* master = failing_master(f);
        replica_copies_[master] = master->server->keys();
      });
    }
    world_.at(at, [this, f] {
      const node_slot& slot = slots_[f.node % nodes()];
      // On a cluster-shaped node, one of its shards.
      sim_node& node = slot.shards.empty() ? *slot.master : *slot.shards[f.at_ms % 2];
      const std::uint32_t client = f.client % clients();
      const auto how_long = milliseconds(f.duration_ms);
      note(fmt::format("fault: {}", fmt::streamed(f)));
      switch (f.kind) {
        case fault_kind::pause:
          net_.pause(node, how_long);
          break;
        case fault_kind::restart_delayed: {
          // The Redis spec's delayed restart: down for longer than any key could have lived.
          const auto longest = milliseconds(s_.longest_ttl_ms() * 102 / 100 + 50);
          key_loss loss = begin_loss(f.node % nodes(), false);
          net_.restart_without_keys(node, std::max<duration>(how_long, longest));
          record_loss(std::move(loss));
          break;
        }
        case fault_kind::restart_at_once: {
          key_loss loss = begin_loss(f.node % nodes(), true);
          net_.restart_without_keys(node, how_long);
          record_loss(std::move(loss));
          break;
        }
        case fault_kind::partition:
          net_.partition(client, node, how_long);
          break;
        case fault_kind::reset_links:
          net_.reset_links(client, node);
          break;
        case fault_kind::script_flush:
          node.server->scripts().flush();
          break;
        case fault_kind::stall_client: {
          auto& process = *world_.processes()[client];
          process.stalled_until = std::max(process.stalled_until, world::now() + how_long);
          break;
        }
        case fault_kind::shutdown_client:
          if (!shut_down_[client]) {
            shut_down_[client] = true;
            for (hold& x : h_.holds) {
              if (x.client == client && x.acquired && !x.release_started)
                x.shut_down = world::now();
            }
            // On the client's own event loop, as every call of a client must be.
            asio::post(world_.processes()[client]->context,
                       [this, client] { clients_[client]->async_shutdown([](error_code) {}); });
          }
          break;
        case fault_kind::failover:
          if (s_.sentinel_nodes == 0) break;  // no node is sentinel-shaped
          failover(failover_node(f), f.duration_ms > 0);
          break;
        case fault_kind::reshard: {
          if (s_.cluster_nodes == 0) break;  // no node is cluster-shaped
          static constexpr const char* kinds[] = {"r", "w", "s"};
          reshard(s_.sentinel_nodes + f.node % s_.cluster_nodes,
                  fmt::format("{}{}", kinds[f.client % 3], f.duration_ms % resources()));
          break;
        }
        case fault_kind::shard_failover:
          if (s_.cluster_nodes == 0) break;  // no node is cluster-shaped
          shard_failover(shard_failover_node(f), shard_failover_shard(f), f.duration_ms > 0);
          break;
      }
    });
  }
}

awaitable<void> run::client_script(std::uint32_t c) {
  const auto executor = co_await asio::this_coro::executor;
  for (std::size_t i = 0; i < s_.operations.size(); ++i) {
    const operation& op = s_.operations[i];
    if (op.client % clients() != c) continue;
    co_await sleep_for(milliseconds(op.start_after_ms));
    if (shut_down_[c]) break;
    if (op.concurrent) {
      ++scripts_running_;
      asio::co_spawn(executor, run_operation(i), [this](std::exception_ptr e) {
        --scripts_running_;
        if (e) std::rethrow_exception(e);
      });
    } else {
      co_await run_operation(i);
    }
  }
}

awaitable<void> run::run_operation(std::size_t op_index) {
  const operation& op = s_.operations[op_index];
  const std::uint32_t c = op.client % clients();
  redlock::client& client = *clients_[c];
  const std::size_t hold_index = h_.holds.size();
  {
    hold& h = h_.holds.emplace_back();
    h.op = op_index;
    h.client = c;
    h.kind = op.kind;
    h.fencing = op.fencing;
    h.started = world::now();
    const std::uint32_t first = op.resource % resources();
    if (op.kind == op_kind::set) {
      for (std::uint32_t k = 0; k < std::max<std::uint32_t>(1, op.set_size); ++k) {
        h.resources.push_back(resource_name(op.kind, (first + k) % resources()));
      }
      std::sort(h.resources.begin(), h.resources.end());
      h.resources.erase(std::unique(h.resources.begin(), h.resources.end()), h.resources.end());
    } else {
      h.resources.push_back(resource_name(op.kind, first));
    }
    if (op.kind == op_kind::semaphore) h.permits = semaphore_permits(first);
  }
  note(hold_index, "acquire starts");

  asio::cancellation_signal cancel;
  std::optional<sim_timer> canceller;
  if (op.cancel_after_ms != 0) {
    canceller.emplace(co_await asio::this_coro::executor, milliseconds(op.cancel_after_ms));
    canceller->async_wait([&cancel](error_code ec) {
      if (!ec) cancel.emit(asio::cancellation_type::terminal);
    });
  }
  if (op.kind == op_kind::with_lock) {
    co_await with_lock_operation(hold_index, client, op);
  } else {
    co_await acquire_and_hold(hold_index, client, op, cancel.slot());
  }
  if (canceller) canceller->cancel();
  h_.holds[hold_index].finished = true;
  note(hold_index, "done");
}

awaitable<void> run::acquire_and_hold(std::size_t hold_index, redlock::client& client,
                                      const operation& op, asio::cancellation_slot slot) {
  const auto executor = co_await asio::this_coro::executor;
  lock_options options;
  options.ttl = milliseconds(op.ttl_ms);
  options.fencing = op.fencing;
  options.auto_renew = op.auto_renew;
  if (op.wait_ms != 0) options.wait = milliseconds(op.wait_ms);
  const std::string& name = h_.holds[hold_index].resources.front();

  std::optional<redlock::mutex> as_mutex;
  std::optional<redlock::semaphore> as_semaphore;
  std::optional<redlock::rw_lock> as_rw_lock;
  auto box = std::make_shared<completion_box<error_code, lease>>(executor);
  auto on_acquired = [this, box, hold_index](error_code ec, lease l) {
    ++box->calls;
    ++h_.holds[hold_index].acquire_completions;
    if (!box->result) box->result.emplace(ec, std::move(l));
    box->wake.cancel();
  };
  auto handler = asio::bind_cancellation_slot(slot, on_acquired);
  switch (op.kind) {
    case op_kind::lock:
      client.async_acquire(name, options, handler);
      break;
    case op_kind::try_lock:
      client.async_try_acquire(name, options, handler);
      break;
    case op_kind::set:
      client.async_acquire_all(h_.holds[hold_index].resources, options, handler);
      break;
    case op_kind::semaphore:
      as_semaphore.emplace(client, name, h_.holds[hold_index].permits, options);
      as_semaphore->async_acquire(handler);
      break;
    case op_kind::rw_read:
      as_rw_lock.emplace(client, name, options);
      as_rw_lock->async_acquire_read(handler);
      break;
    case op_kind::rw_write:
      as_rw_lock.emplace(client, name, options);
      as_rw_lock->async_acquire_write(handler);
      break;
    case op_kind::mutex:
      as_mutex.emplace(client, name, options);
      as_mutex->async_lock(
          asio::bind_cancellation_slot(slot, [this, box, hold_index](error_code ec) {
            ++box->calls;
            ++h_.holds[hold_index].acquire_completions;
            if (!box->result) box->result.emplace(ec, lease{});
            box->wake.cancel();
          }));
      break;
    case op_kind::with_lock:
      break;
  }
  while (!box->result)
    co_await box->wake.async_wait(as_tuple_awaitable);
  auto [ec, got] = std::move(*box->result);
  lease& l = op.kind == op_kind::mutex ? as_mutex->current_lease() : got;
  h_.holds[hold_index].acquire_error = ec;
  h_.holds[hold_index].acquire_done = world::now();
  if (ec) {
    note(hold_index, fmt::format("acquire failed: {}", ec.message()));
    co_return;
  }
  acquired(hold_index, l);
  co_await use_lease(hold_index, l, op);
  co_await release(hold_index, l);
}

awaitable<void> run::with_lock_operation(std::size_t hold_index, redlock::client& client,
                                         const operation& op) {
  lock_options options;
  options.ttl = milliseconds(op.ttl_ms);
  options.fencing = op.fencing;
  options.auto_renew = op.auto_renew;
  if (op.wait_ms != 0) options.wait = milliseconds(op.wait_ms);
  try {
    co_await redlock::with_lock(client, h_.holds[hold_index].resources.front(), options,
                                [&](lease& l) -> awaitable<void> {
                                  ++h_.holds[hold_index].acquire_completions;
                                  h_.holds[hold_index].acquire_done = world::now();
                                  acquired(hold_index, l);
                                  co_await use_lease(hold_index, l, op);
                                  h_.holds[hold_index].release_started = world::now();
                                });
    h_.holds[hold_index].release_done = world::now();
  } catch (const boost::system::system_error& e) {
    if (!h_.holds[hold_index].acquired) {
      ++h_.holds[hold_index].acquire_completions;
      h_.holds[hold_index].acquire_error = e.code();
      h_.holds[hold_index].acquire_done = world::now();
    }
    note(hold_index, fmt::format("with_lock failed: {}", e.code().message()));
  }
}

void run::acquired(std::size_t hold_index, const lease& l) {
  hold& h = h_.holds[hold_index];
  h.acquired = world::now();
  h.token = l.token();
  for (const auto& resource : l.resources()) {
    if (auto token = l.fencing_token(resource)) h.fencing_tokens[resource] = *token;
  }
  // A semaphore's lease names its slot, whose counter it is; a read-write lock's names the key
  // it set, and both its readers and writers count with the lock's one counter.
  if (h.kind == op_kind::semaphore) {
    h.fencing_tokens.clear();
    if (auto token = l.fencing_token()) h.fencing_tokens[l.resource()] = *token;
  } else if (h.kind == op_kind::rw_read || h.kind == op_kind::rw_write) {
    h.fencing_tokens.clear();
    if (auto token = l.fencing_token()) h.fencing_tokens[h.resources.front()] = *token;
  }
  h.granted_by = nodes_holding(h.token);
  if (h.kind == op_kind::set) {
    // All or nothing on each node: the set's keys (its resources' own lock keys) hold its token on
    // a node together or not at all.
    for (std::uint32_t i = 0; i < nodes(); ++i) {
      std::size_t ours = 0;
      for (sim_node* server : data_servers(i)) {
        const auto now_ms = server->now_us() / 1000;
        for (const auto& resource : h.resources) {
          stored_value* v = server->server->keys().find(resource, now_ms);
          if (v && v->is_string() && v->text() == h.token) ++ours;
        }
      }
      if (ours != 0 && ours != h.resources.size()) {
        h.partial_sets.push_back(fmt::format("n{}: {} of {} keys", i, ours, h.resources.size()));
      }
    }
  }
  record_claim(hold_index, l);
  note(hold_index,
       fmt::format("acquired, valid until {}, token {}, granted by {} nodes",
                   at_text(l.valid_until()), h.token.substr(0, 8), h.granted_by.size()));
}

void run::record_claim(std::size_t hold_index, const lease& l) {
  if (!l.held() || !(world::now() < l.valid_until())) return;
  h_.holds[hold_index].claims.push_back({world::now(), l.valid_until()});
}

awaitable<void> run::use_lease(std::size_t hold_index, lease& l, const operation& op) {
  const std::uint32_t steps = std::max<std::uint32_t>(1, op.steps);
  const auto step = milliseconds(op.hold_ms) / steps;
  for (std::uint32_t k = 0; k < steps; ++k) {
    record_claim(hold_index, l);
    // The work of this step, written to the store the lock guards with the lease's token; the
    // store keeps the highest token and refuses lower ones. The write happens after the check
    // above, as a real holder's would (and a stall can fall between them).
    // The store keeps the highest token of an exclusive lease (a reader takes none of its own).
    const bool exclusive = op.kind != op_kind::rw_read;
    for (const auto& [resource, token] : h_.holds[hold_index].fencing_tokens) {
      auto& highest = store_[resource];
      const bool accepted = token >= highest;
      if (accepted && exclusive) highest = token;
      h_.writes.push_back({resource, token, world::now(), accepted, hold_index});
    }
    if (op.extend_ms != 0 && k == steps / 2 && l.held()) {
      auto box = std::make_shared<completion_box<error_code>>(co_await asio::this_coro::executor);
      l.async_extend(milliseconds(op.extend_ms), [box](error_code ec) {
        ++box->calls;
        if (!box->result) box->result.emplace(ec);
        box->wake.cancel();
      });
      // An extension may shorten the lock from the moment it is sent: the lease says so at once.
      record_claim(hold_index, l);
      while (!box->result)
        co_await box->wake.async_wait(as_tuple_awaitable);
      const error_code ec = std::get<0>(*box->result);
      h_.holds[hold_index].extended = world::now();
      h_.holds[hold_index].extend_error = ec;
      note(hold_index, fmt::format("extended: {}", ec ? ec.message() : "ok"));
      record_claim(hold_index, l);
    }
    co_await sleep_for(step);
  }
}

awaitable<void> run::release(std::size_t hold_index, lease& l) {
  const auto executor = co_await asio::this_coro::executor;
  h_.holds[hold_index].release_started = world::now();
  auto box = std::make_shared<completion_box<error_code>>(executor);
  l.async_release([this, box, hold_index](error_code ec) {
    ++box->calls;
    ++h_.holds[hold_index].release_completions;
    if (!box->result) box->result.emplace(ec);
    box->wake.cancel();
  });
  while (!box->result)
    co_await box->wake.async_wait(as_tuple_awaitable);
  h_.holds[hold_index].release_done = world::now();
  h_.holds[hold_index].release_error = std::get<0>(*box->result);
  note(hold_index, fmt::format("released: {}", std::get<0>(*box->result).message()));
}

void run::for_each_live_key(
    const std::function<void(std::uint32_t node, const std::string& key, stored_value& value,
                             std::int64_t now_ms)>& visit) {
  for (std::uint32_t i = 0; i < nodes(); ++i) {
    for (sim_node* server : data_servers(i)) {
      const auto now_ms = server->now_us() / 1000;
      auto& keys = server->server->keys();
      for (const auto& key : keys.live_keys(now_ms)) {
        if (stored_value* v = keys.find(key, now_ms)) visit(i, key, *v, now_ms);
      }
    }
  }
}

std::set<std::uint32_t> run::nodes_holding(const std::string& token) {
  std::set<std::uint32_t> holding;
  for_each_live_key([&](std::uint32_t node, const std::string&, stored_value& v, std::int64_t) {
    if ((v.is_string() && v.text() == token) || (!v.is_string() && v.zset().scores.contains(token)))
      holding.insert(node);
  });
  return holding;
}

token_holders run::holders_of_tokens() {
  token_holders holders;
  for_each_live_key(
      [&](std::uint32_t node, const std::string&, stored_value& v, std::int64_t now_ms) {
        std::optional<std::int64_t> ms_left;
        if (v.expires_at_ms) ms_left = *v.expires_at_ms - now_ms;
        if (v.is_string()) {
          holders[v.text()].push_back({node, ms_left});
        } else {
          for (const auto& [member, score] : v.zset().scores)
            holders[member].push_back({node, ms_left});
        }
      });
  return holders;
}

key_loss run::begin_loss(std::uint32_t index, bool at_once) {
  key_loss loss{index, world::now(), at_once, {}, {}};
  // Who held what just before: the fencing checker counts a node that granted a lease and lost
  // its keys before that acquire completed among the lease's grants. Only a loss at once can
  // break a lease that kept its quorum, so only it needs the holders after (record_loss).
  loss.holders_before = holders_of_tokens();
  return loss;
}

void run::record_loss(key_loss loss) {
  if (loss.at_once) loss.holders_after = holders_of_tokens();
  h_.losses.push_back(std::move(loss));
}

void run::collect_settled() {
  for_each_live_key([&](std::uint32_t node, const std::string& key, stored_value& v, std::int64_t) {
    history::settled_key settled{node, key, {}};
    if (v.is_string()) {
      const bool token =
          v.text().size() == 40 && std::all_of(v.text().begin(), v.text().end(), [](char ch) {
            return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
          });
      if (!token) return;
      settled.tokens.push_back(v.text());
    } else {
      for (const auto& [member, score] : v.zset().scores)
        settled.tokens.push_back(member);
    }
    h_.settled.push_back(std::move(settled));
  });
}

void run::collect_leftovers() {
  for_each_live_key(
      [&](std::uint32_t node, const std::string& key, stored_value& v, std::int64_t now_ms) {
        // Fencing counters and a semaphore's permits record are numbers, and are meant to stay
        // (counters) or expire with the last slot (records); everything else is a lock.
        const bool number = v.is_string() && !v.text().empty() &&
                            std::all_of(v.text().begin(), v.text().end(),
                                        [](char ch) { return ch >= '0' && ch <= '9'; });
        if (number) return;
        const std::int64_t left = v.expires_at_ms ? *v.expires_at_ms - now_ms : -1;
        std::string whose = "a sorted set";
        if (v.is_string()) {
          const auto owner = std::find_if(h_.holds.begin(), h_.holds.end(),
                                          [&](const hold& x) { return x.token == v.text(); });
          whose = owner == h_.holds.end()
                      ? fmt::format("\"{}\", no lease's token", v.text().substr(0, 8))
                      : fmt::format("the token of op {}", owner->op);
        }
        h_.leftovers.push_back(fmt::format("n{} {} ({}, {} ms left)", node, key, whose, left));
      });
}

history& run::go(run_stats* stats) {
  set_up();
  schedule_faults();
  h_.holds.reserve(s_.operations.size());
  h_.faults_end = detail::lock_clock::epoch() + milliseconds(s_.faults_end_ms());
  for (std::uint32_t c = 0; c < clients(); ++c) {
    ++scripts_running_;
    asio::co_spawn(world_.processes()[c]->context, client_script(c), [this](std::exception_ptr e) {
      --scripts_running_;
      if (e) std::rethrow_exception(e);
    });
  }
  const auto limit = detail::lock_clock::epoch() + std::chrono::seconds(600);
  h_.workload_finished = world_.run_until([this] { return scripts_running_ == 0; }, limit);
  h_.workload_end = world::now();
  // A moment for the last releases and cleanups to reach the nodes.
  world_.run_until([] { return false; }, world::now() + milliseconds(4 * s_.node_timeout_ms + 500));
  collect_settled();
  // The quiet end: no faults left, every lease released; what a lost lease left behind expires,
  // and what the library still had to clean up reaches the nodes.
  const auto quiet_until =
      std::max(h_.faults_end, world::now()) + milliseconds(s_.longest_ttl_ms() * 2 + 2000);
  world_.run_until([] { return false; }, quiet_until);
  collect_leftovers();
  // Each client is destroyed on its own event loop, as a program would. A workload that never
  // finished (the checkers report it) still has operations waiting: the destruction completes
  // them, and its script must start no further operation on the destroyed client.
  for (std::size_t c = 0; c < clients_.size(); ++c) {
    asio::post(world_.processes()[c]->context, [this, c] {
      shut_down_[c] = true;
      clients_[c].reset();
    });
  }
  world_.run_until([] { return false; }, world::now() + std::chrono::seconds(1));
  if (stats) {
    stats->events = world_.events_run();
    stats->messages = net_.messages();
    for (auto& node : net_.nodes()) {
      stats->commands += node->server->commands_run();
      stats->batched_renewals += node->server->evalsha_calls(detail::batch_extend_script().sha1());
    }
    stats->virtual_seconds =
        std::chrono::duration<double>(world::now() - detail::lock_clock::epoch()).count();
  }
  return h_;
}

}  // namespace

history run_scenario(const scenario& s, const run_options& options, run_stats* stats) {
  history h;
  detail::renewal_tick_ms_for_tests = static_cast<int>(s.renewal_tick_ms);
  {
    run r(s, options, h);
    r.go(stats);
  }
  return h;
}

}  // namespace redlock::sim
