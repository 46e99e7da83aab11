#include "support/redis_cluster.hpp"

#include "support/free_port.hpp"
#include "support/redis_fixture_helpers.hpp"
#include "support/sync_client.hpp"
#include "support/test_pki.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

namespace redlock::test {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

constexpr int bus_port_attempts = 3;
constexpr std::size_t keys_per_migrate = 100;
constexpr std::string_view migrate_timeout_ms = "5000";
// Redis gives a manual failover up after CLUSTER_MF_TIMEOUT (5 s); a little later, ask again.
constexpr auto failover_retry_after = 6s;

// One line of CLUSTER NODES: <id> <ip:port@cport[,hostname]> <flags> <master id or -> <ping-sent>
// <pong-recv> <config-epoch> <link-state> <slot or range>... The [slot->-id] / [slot-<-id]
// entries of a migration in progress are skipped: they are the node's own state, not the map.
struct nodes_line {
  std::string id;
  std::string flags;
  bool master = false;
  bool failing = false;    // fail? or fail
  bool handshake = false;  // handshake or noaddr: not a member yet
  std::string master_id;   // empty for a master
  std::vector<std::pair<std::size_t, std::size_t>> slots;
};

std::vector<nodes_line> parse_cluster_nodes(std::string_view text) {
  std::vector<nodes_line> lines;
  for (std::string_view row : split(text, '\n')) {
    if (row.ends_with('\r')) row.remove_suffix(1);
    const auto words = split(row, ' ');
    if (words.empty()) continue;
    if (words.size() < 8) {
      throw std::runtime_error(
          fmt::format("redis_cluster: a CLUSTER NODES line too short: {}", row));
    }
    nodes_line line;
    line.id = words[0];
    line.flags = words[2];
    for (const auto flag : split(words[2], ',')) {
      if (flag == "master") line.master = true;
      if (flag == "fail" || flag == "fail?") line.failing = true;
      if (flag == "handshake" || flag == "noaddr") line.handshake = true;
    }
    if (words[3] != "-") line.master_id = words[3];
    for (std::size_t i = 8; i < words.size(); ++i) {
      if (words[i].starts_with('[')) continue;
      const auto dash = words[i].find('-');
      const std::size_t first = to_size(words[i].substr(0, dash));
      const std::size_t last =
          dash == std::string_view::npos ? first : to_size(words[i].substr(dash + 1));
      line.slots.emplace_back(first, last);
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

redis_server_options server_options(const redis_cluster_options& options) {
  redis_server_options server;
  server.password = options.password;
  server.extra_args = {
      "--cluster-enabled yes",
      "--cluster-config-file nodes.conf",  // in the node's own --dir, kept across restarts
      fmt::format("--cluster-node-timeout {}", options.node_timeout.count()),
      // Shards stay the groups the fixture made (see the class comment).
      "--cluster-allow-replica-migration no",
      // 7.0 waits 5 s by default before a diskless full sync, for more replicas to join it.
      "--repl-diskless-sync-delay 0",
  };
  if (!options.password.empty()) server.extra_args.push_back("--masterauth " + options.password);
  if (options.tls) {
    const test_pki& pki = shared_test_pki();
    server.tls = redis_server_options::tls_listener{
        pki.server().cert.string(), pki.server().key.string(), pki.ca().string(), false};
    server.extra_args.push_back("--tls-cluster yes --tls-replication yes");
    // The cluster bus demands a client certificate whatever tls-auth-clients says, and the
    // server certificate is for serverAuth only: outgoing connections present the client one.
    server.extra_args.push_back(fmt::format("--tls-client-cert-file {} --tls-client-key-file {}",
                                            pki.client().cert.string(), pki.client().key.string()));
  }
  return server;
}

// A node on a free port with a free cluster bus port of its own. The bus port is given
// explicitly: the default, port + 10000, is out of range for the upper part of the ephemeral
// range, which is where free ports come from. redis_server retries its own port when it is taken;
// a taken bus port makes it fail, and then another bus port is tried.
std::unique_ptr<redis_server> start_server(const redis_server_options& base,
                                           reserved_port& bus_port) {
  for (int attempt = 1;; ++attempt) {
    bus_port = reserved_port::pick();
    redis_server_options options = base;
    options.extra_args.push_back(fmt::format("--cluster-port {}", bus_port.number()));
    try {
      return std::make_unique<redis_server>(std::move(options));
    } catch (const std::runtime_error& e) {
      if (attempt == bus_port_attempts) {
        throw std::runtime_error(fmt::format(
            "redis_cluster: a node did not start ({} attempts, each with another cluster bus "
            "port): {}",
            attempt, e.what()));
      }
    }
  }
}

}  // namespace

struct redis_cluster::node {
  std::unique_ptr<redis_server> server;
  std::string id;
  reserved_port bus_port;  // held while the node lives, so that a restart finds it free
  std::size_t shard = 0;
  bool paused = false;
};

redis_cluster::redis_cluster(std::size_t masters, std::size_t replicas_per_master,
                             redis_cluster_options options)
    : options_(std::move(options)) {
  if (masters == 0 || masters > slot_count) {
    throw std::invalid_argument(fmt::format("redis_cluster: {} masters", masters));
  }
  // Should anything below throw, nodes_ is destroyed with the half-made object: every process
  // started so far is killed and its directory removed.
  const redis_server_options base = server_options(options_);
  const std::size_t total = masters * (1 + replicas_per_master);
  nodes_.reserve(total);
  for (std::size_t i = 0; i < total; ++i) {
    auto n = std::make_unique<node>();
    n->shard = i % masters;
    n->server = start_server(base, n->bus_port);
    nodes_.push_back(std::move(n));
  }
  shards_.resize(masters);
  for (std::size_t i = 0; i < masters; ++i) {
    shards_[i].master = i;
    for (std::size_t r = i + masters; r < total; r += masters) {
      shards_[i].replicas.push_back(r);
    }
  }
  form_cluster();
}

redis_cluster::~redis_cluster() = default;

// Formed with CLUSTER commands rather than `redis-cli --cluster create`: redis-cli picks which
// node replicates which by its own anti-affinity rules (all nodes share one host here, so the
// pairing is not ours to choose) and polls the join once a second; the commands give a known
// layout (master i serves the i-th even range, node i + k * masters replicates it) and let the
// fixture poll as often as it likes.
void redis_cluster::form_cluster() {
  for (std::size_t n = 0; n < size(); ++n) {
    at(n).id = checked(n, {"CLUSTER", "MYID"}).text;
  }
  // Distinct config epochs while each node knows only itself, as redis-cli does; otherwise all
  // start at 0 and Redis resolves the collisions by bumping them one at a time.
  for (std::size_t n = 0; n < size(); ++n) {
    checked(n, {"CLUSTER", "SET-CONFIG-EPOCH", std::to_string(n + 1)});
  }
  for (std::size_t s = 0; s < shards(); ++s) {
    const std::size_t first = s * slot_count / shards();
    const std::size_t last = (s + 1) * slot_count / shards() - 1;
    checked(s, {"CLUSTER", "ADDSLOTSRANGE", std::to_string(first), std::to_string(last)});
  }
  // Node 0 meets everyone; gossip tells the others about each other. The bus port is explicit
  // because it is not port + 10000; the client port is the one the cluster announces.
  for (std::size_t n = 1; n < size(); ++n) {
    const std::uint16_t client_port = options_.tls ? tls_port(n) : port(n);
    checked(0, {"CLUSTER", "MEET", "127.0.0.1", std::to_string(client_port),
                std::to_string(bus_port(n))});
  }
  // A node can replicate only a node it knows, which it learns from gossip: retried until then.
  for (std::size_t s = 0; s < shards(); ++s) {
    for (const std::size_t r : shards_[s].replicas) {
      const std::string& master_id = id(shards_[s].master);
      wait_until(fmt::format("{} to replicate {}", describe(r), describe(shards_[s].master)),
                 [&]() -> std::string {
                   const resp::value reply = command(r, {"CLUSTER", "REPLICATE", master_id});
                   if (!reply.is_error()) return {};
                   return fmt::format("CLUSTER REPLICATE answered: {}", reply.text);
                 });
    }
  }
  wait_until_healthy();
}

const redis_cluster::node& redis_cluster::at(std::size_t n) const {
  if (n >= nodes_.size()) {
    throw std::logic_error(fmt::format("redis_cluster: no node {} (of {})", n, nodes_.size()));
  }
  return *nodes_[n];
}

redis_cluster::node& redis_cluster::at(std::size_t n) {
  return const_cast<node&>(std::as_const(*this).at(n));
}

std::size_t redis_cluster::master(std::size_t shard) const {
  if (shard >= shards_.size()) {
    throw std::logic_error(fmt::format("redis_cluster: no shard {} (of {})", shard, shards()));
  }
  return shards_[shard].master;
}

const std::vector<std::size_t>& redis_cluster::replicas(std::size_t shard) const {
  (void)master(shard);  // checks the number
  return shards_[shard].replicas;
}

std::size_t redis_cluster::shard_of(std::size_t n) const {
  return at(n).shard;
}

std::uint16_t redis_cluster::port(std::size_t n) const {
  return at(n).server->port();
}

std::uint16_t redis_cluster::tls_port(std::size_t n) const {
  return at(n).server->tls_port();
}

std::uint16_t redis_cluster::bus_port(std::size_t n) const {
  return at(n).bus_port.number();
}

pid_t redis_cluster::pid(std::size_t n) const {
  return at(n).server->running() ? at(n).server->pid() : -1;
}

bool redis_cluster::running(std::size_t n) const {
  return at(n).server->running();
}

bool redis_cluster::paused(std::size_t n) const {
  return at(n).paused;
}

const std::string& redis_cluster::id(std::size_t n) const {
  return at(n).id;
}

std::string redis_cluster::address(std::size_t n) const {
  return fmt::format("127.0.0.1:{}", options_.tls ? tls_port(n) : port(n));
}

std::vector<std::string> redis_cluster::addresses() const {
  std::vector<std::string> all;
  for (std::size_t n = 0; n < size(); ++n) {
    all.push_back(address(n));
  }
  return all;
}

node_config redis_cluster::config(std::size_t n) const {
  const redis_server& server = *at(n).server;
  return options_.tls ? server.tls_config(shared_test_pki().ca().string()) : server.config();
}

std::string redis_cluster::seed_url(std::size_t n) const {
  const std::string login = options_.password.empty() ? "" : ":" + options_.password + "@";
  if (options_.tls) {
    return fmt::format("rediss+cluster://{}{}?ca={}", login, address(n),
                       shared_test_pki().ca().string());
  }
  return fmt::format("redis+cluster://{}{}", login, address(n));
}

std::string redis_cluster::seeds_url() const {
  std::string url = seed_url(0);
  char separator = options_.tls ? '&' : '?';
  for (std::size_t n = 1; n < size(); ++n) {
    url += separator;
    url += "seed=" + address(n);
    separator = '&';
  }
  return url;
}

std::string redis_cluster::log_tail(std::size_t n, std::size_t lines) const {
  return at(n).server->log_tail(lines);
}

std::string redis_cluster::describe(std::size_t n) const {
  const node& it = at(n);
  const bool is_master = shards_.size() > it.shard && shards_[it.shard].master == n;
  const char* state = !it.server->running() ? ", stopped" : it.paused ? ", paused" : "";
  return fmt::format("node {} (127.0.0.1:{}, shard {} {}{})", n, it.server->port(), it.shard,
                     is_master ? "master" : "replica", state);
}

std::vector<std::size_t> redis_cluster::live_nodes() const {
  std::vector<std::size_t> all;
  for (std::size_t n = 0; n < size(); ++n) {
    if (live(n)) all.push_back(n);
  }
  return all;
}

std::size_t redis_cluster::first_live() const {
  for (std::size_t n = 0; n < size(); ++n) {
    if (live(n)) return n;
  }
  throw std::logic_error("redis_cluster: no node is live to ask");
}

std::size_t redis_cluster::node_of_id(std::string_view id) const {
  for (std::size_t n = 0; n < size(); ++n) {
    if (nodes_[n]->id == id) return n;
  }
  return npos;
}

resp::value redis_cluster::command(std::size_t n, std::span<const std::string_view> args) const {
  const node& it = at(n);
  if (!it.server->running()) {
    throw std::logic_error(
        fmt::format("redis_cluster: {} sent to {}", describe_command(args), describe(n)));
  }
  try {
    sync_client client(it.server->port(), options_.password, {}, command_timeout);
    return client.command(args);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(
        fmt::format("redis_cluster: {}: {}: {}", describe(n), describe_command(args), e.what()));
  }
}

resp::value redis_cluster::checked(std::size_t n, std::span<const std::string_view> args) const {
  resp::value reply = command(n, args);
  if (reply.is_error()) {
    throw std::runtime_error(fmt::format("redis_cluster: {}: {} answered: {}", describe(n),
                                         describe_command(args), reply.text));
  }
  return reply;
}

std::string redis_cluster::info_field(std::size_t n, std::string_view section,
                                      std::string_view field) const {
  return field_of(checked(n, {"INFO", section}).text, field);
}

template <class Problem>
void redis_cluster::wait_until(std::string_view what, Problem problem) {
  const std::string last = poll_until_solved(options_.ready_timeout, poll_interval, problem);
  if (last.empty()) return;
  std::string logs;
  for (std::size_t n = 0; n < size(); ++n) {
    logs += fmt::format("--- {} log:\n{}", describe(n), log_tail(n, 8));
  }
  throw std::runtime_error(fmt::format("redis_cluster: waited {} ms for {}; still: {}\n{}",
                                       options_.ready_timeout.count(), what, last, logs));
}

void redis_cluster::wait_until_healthy() {
  wait_until("a healthy cluster", [this] { return health_problem(); });
}

std::string redis_cluster::health_problem() {
  const std::vector<std::size_t> asked = live_nodes();
  if (asked.empty()) return "no node is live";

  // One view per live node: who is a master, whom each replica follows, who owns each slot.
  struct view {
    std::size_t seen_by = npos;
    std::vector<bool> master;
    std::vector<std::size_t> master_of;
    std::vector<std::size_t> owners;
  };
  std::optional<view> agreed;
  std::vector<std::string> replication(size());
  for (const std::size_t n : asked) {
    std::string cluster_info;
    std::vector<nodes_line> lines;
    try {
      sync_client client(port(n), options_.password, {}, probe_timeout);
      cluster_info = client.command({"CLUSTER", "INFO"}).text;
      lines = parse_cluster_nodes(client.command({"CLUSTER", "NODES"}).text);
      replication[n] = client.command({"INFO", "replication"}).text;
    } catch (const std::runtime_error& e) {
      return fmt::format("{}: {}", describe(n), e.what());
    }
    if (const auto state = field_of(cluster_info, "cluster_state"); state != "ok") {
      return fmt::format("{} reports cluster_state:{}", describe(n), state);
    }
    if (const auto known = field_of(cluster_info, "cluster_known_nodes");
        known != std::to_string(size())) {
      return fmt::format("{} knows {} nodes of {}", describe(n), known, size());
    }
    if (const auto assigned = field_of(cluster_info, "cluster_slots_assigned");
        assigned != std::to_string(slot_count)) {
      return fmt::format("{} has {} slots assigned", describe(n), assigned);
    }

    view mine{n, std::vector<bool>(size(), false), std::vector<std::size_t>(size(), npos),
              std::vector<std::size_t>(slot_count, npos)};
    std::vector<const nodes_line*> line_of(size(), nullptr);
    for (const nodes_line& line : lines) {
      const std::size_t m = node_of_id(line.id);
      if (m == npos) return fmt::format("{} knows a stranger {}", describe(n), line.id);
      line_of[m] = &line;
    }
    for (std::size_t m = 0; m < size(); ++m) {
      const nodes_line* line = line_of[m];
      if (line == nullptr) return fmt::format("{} does not know {}", describe(n), describe(m));
      if (line->handshake) {
        return fmt::format("{} sees {} as {}", describe(n), describe(m), line->flags);
      }
      if (live(m) && line->failing) {
        return fmt::format("{} flags {} as {}", describe(n), describe(m), line->flags);
      }
      mine.master[m] = line->master;
      if (!line->master) {
        mine.master_of[m] = node_of_id(line->master_id);
        if (mine.master_of[m] == npos) {
          return fmt::format("{} sees {} replicating an unknown node \"{}\"", describe(n),
                             describe(m), line->master_id);
        }
      }
      for (const auto& [first, last] : line->slots) {
        for (std::size_t slot = first; slot <= last && slot < slot_count; ++slot) {
          mine.owners[slot] = m;
        }
      }
    }

    if (!agreed) {
      agreed = std::move(mine);
      continue;
    }
    for (const std::size_t m : asked) {
      if (mine.master[m] != agreed->master[m] || mine.master_of[m] != agreed->master_of[m]) {
        return fmt::format("{} and {} disagree about the role of {}", describe(agreed->seen_by),
                           describe(n), describe(m));
      }
    }
    for (std::size_t slot = 0; slot < slot_count; ++slot) {
      if (mine.owners[slot] != agreed->owners[slot]) {
        return fmt::format("{} and {} disagree about the owner of slot {}",
                           describe(agreed->seen_by), describe(n), slot);
      }
    }
  }

  for (std::size_t slot = 0; slot < slot_count; ++slot) {
    const std::size_t owner = agreed->owners[slot];
    if (owner == npos) return fmt::format("slot {} has no owner", slot);
    if (!live(owner)) return fmt::format("slot {} is served by {}", slot, describe(owner));
  }

  std::vector<shard> found(shards());
  for (std::size_t s = 0; s < shards(); ++s) {
    std::size_t chosen = npos;
    for (std::size_t m = s; m < size(); m += shards()) {
      if (!live(m) || !agreed->master[m]) continue;
      if (chosen != npos) {
        return fmt::format("shard {} has two live masters: {} and {}", s, describe(chosen),
                           describe(m));
      }
      chosen = m;
    }
    if (chosen == npos) {
      // No live master: the shard has no slots (checked above), and its master is down.
      chosen = shards_[s].master;
    }
    found[s].master = chosen;
    for (std::size_t m = s; m < size(); m += shards()) {
      if (m == chosen) continue;
      found[s].replicas.push_back(m);
      if (!live(m)) continue;
      if (agreed->master[m] || agreed->master_of[m] != chosen) {
        return fmt::format("{} does not replicate its shard's master {}", describe(m),
                           describe(chosen));
      }
      if (!live(chosen)) continue;
      if (const auto role = field_of(replication[m], "role"); role != "slave") {
        return fmt::format("{} reports role:{}", describe(m), role);
      }
      if (const auto link = field_of(replication[m], "master_link_status"); link != "up") {
        return fmt::format("{} reports master_link_status:{}", describe(m), link);
      }
    }
  }
  shards_ = std::move(found);
  owners_ = std::move(agreed->owners);
  return {};
}

std::vector<std::size_t> redis_cluster::slot_owners() const {
  const std::size_t asked = first_live();
  const resp::value reply = checked(asked, {"CLUSTER", "SLOTS"});
  std::vector<std::size_t> owners(slot_count, npos);
  for (const resp::value& range : reply.elements) {
    // start, end, then the master as [ip, port, id, ...], then the replicas.
    if (range.elements.size() < 3 || range.elements[2].elements.size() < 3) {
      throw std::runtime_error(fmt::format("redis_cluster: {}: CLUSTER SLOTS answered {}",
                                           describe(asked), resp::to_debug_string(reply)));
    }
    const auto first = static_cast<std::size_t>(range.elements[0].integer);
    const auto last = static_cast<std::size_t>(range.elements[1].integer);
    const std::string& master_id = range.elements[2].elements[2].text;
    const std::size_t owner = node_of_id(master_id);
    if (owner == npos || first > last || last >= slot_count) {
      throw std::runtime_error(
          fmt::format("redis_cluster: {}: CLUSTER SLOTS names slots {}-{} served by \"{}\"",
                      describe(asked), first, last, master_id));
    }
    std::fill(owners.begin() + static_cast<std::ptrdiff_t>(first),
              owners.begin() + static_cast<std::ptrdiff_t>(last) + 1, owner);
  }
  return owners;
}

std::size_t redis_cluster::master_of_slot(std::size_t slot) const {
  if (slot >= slot_count) throw std::logic_error(fmt::format("redis_cluster: no slot {}", slot));
  const std::size_t owner = slot_owners()[slot];
  if (owner == npos) {
    throw std::runtime_error(fmt::format("redis_cluster: no node serves slot {} in the view of {}",
                                         slot, describe(first_live())));
  }
  return owner;
}

std::size_t redis_cluster::key_slot(std::string_view key) const {
  return static_cast<std::size_t>(checked(first_live(), {"CLUSTER", "KEYSLOT", key}).integer);
}

std::vector<std::string> redis_cluster::keys_on(std::size_t n) const {
  const resp::value reply = checked(n, {"KEYS", "*"});
  std::vector<std::string> keys;
  for (const resp::value& key : reply.elements) {
    keys.push_back(key.text);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

long long redis_cluster::dbsize(std::size_t n) const {
  return checked(n, {"DBSIZE"}).integer;
}

void redis_cluster::flushall() {
  for (const shard& s : shards_) {
    if (live(s.master)) checked(s.master, {"FLUSHALL"});
  }
  wait_until("the replicas to be emptied by FLUSHALL", [this]() -> std::string {
    for (const shard& s : shards_) {
      if (!live(s.master)) continue;
      for (const std::size_t r : s.replicas) {
        if (!live(r) || info_field(r, "replication", "master_link_status") != "up") continue;
        if (const long long keys = dbsize(r); keys != 0) {
          return fmt::format("{} still holds {} keys", describe(r), keys);
        }
      }
    }
    return {};
  });
}

void redis_cluster::pause(std::size_t n) {
  at(n).server->pause();
  at(n).paused = true;
}

void redis_cluster::resume(std::size_t n) {
  at(n).server->resume();
  at(n).paused = false;
}

void redis_cluster::stop(std::size_t n) {
  at(n).server->kill9();
  at(n).paused = false;
}

void redis_cluster::restart(std::size_t n) {
  stop(n);
  at(n).server->start();
  if (const std::string id_now = checked(n, {"CLUSTER", "MYID"}).text; id_now != id(n)) {
    throw std::runtime_error(
        fmt::format("redis_cluster: {} came back as {} instead of {}", describe(n), id_now, id(n)));
  }
  wait_until(fmt::format("{} to rejoin", describe(n)), [this] { return health_problem(); });
}

void redis_cluster::failover(std::size_t shard) {
  const std::size_t old_master = master(shard);
  std::size_t replica = npos;
  for (const std::size_t r : shards_[shard].replicas) {
    if (live(r)) {
      replica = r;
      break;
    }
  }
  if (replica == npos) {
    throw std::logic_error(
        fmt::format("redis_cluster: failover of shard {}, which has no live replica", shard));
  }
  // A manual failover needs the master's cooperation; without it, FORCE (the majority of
  // masters still has to vote).
  const bool force = !live(old_master);
  const auto ask = [&] {
    if (force) {
      checked(replica, {"CLUSTER", "FAILOVER", "FORCE"});
    } else {
      checked(replica, {"CLUSTER", "FAILOVER"});
    }
    return clock::now();
  };
  auto asked = ask();
  wait_until(fmt::format("the failover of shard {} to {}", shard, describe(replica)),
             [&]() -> std::string {
               if (const auto role = info_field(replica, "replication", "role"); role != "master") {
                 if (clock::now() - asked > failover_retry_after) asked = ask();
                 return fmt::format("{} reports role:{}", describe(replica), role);
               }
               if (std::string problem = health_problem(); !problem.empty()) return problem;
               if (shards_[shard].master != replica) {
                 return fmt::format("the nodes agree on {} as the master of shard {}",
                                    describe(shards_[shard].master), shard);
               }
               return {};
             });
}

const redis_cluster::migration& redis_cluster::migration_of(std::size_t slot) const {
  const auto it = migrations_.find(slot);
  if (it == migrations_.end()) {
    throw std::logic_error(fmt::format("redis_cluster: slot {} is not being migrated", slot));
  }
  return it->second;
}

void redis_cluster::migrate_slot(std::size_t slot, std::size_t to_shard) {
  begin_migration(slot, to_shard);
  move_keys(slot);
  finish_migration(slot);
}

void redis_cluster::begin_migration(std::size_t slot, std::size_t to_shard) {
  if (migrations_.contains(slot)) {
    throw std::logic_error(fmt::format("redis_cluster: slot {} is being migrated already", slot));
  }
  const std::size_t source = master_of_slot(slot);
  const std::size_t target = master(to_shard);
  if (source == target) {
    throw std::logic_error(
        fmt::format("redis_cluster: slot {} is served by shard {} already", slot, to_shard));
  }
  const std::string slot_text = std::to_string(slot);
  // The target first, as redis-cli does: a client that the source sends there with ASK must be
  // accepted.
  checked(target, {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", id(source)});
  checked(source, {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", id(target)});
  migrations_.emplace(slot, migration{source, target});
}

std::size_t redis_cluster::move_keys(std::size_t slot) {
  const migration m = migration_of(slot);
  const std::string slot_text = std::to_string(slot);
  const std::string batch = std::to_string(keys_per_migrate);
  // With tls-cluster the source speaks TLS to the target, so it needs the target's TLS port.
  const std::string target_port =
      std::to_string(options_.tls ? tls_port(m.target) : port(m.target));
  const auto deadline = clock::now() + options_.ready_timeout;
  std::size_t moved = 0;
  for (;;) {
    const resp::value keys = checked(m.source, {"CLUSTER", "GETKEYSINSLOT", slot_text, batch});
    if (keys.elements.empty()) return moved;
    if (clock::now() >= deadline) {
      throw std::runtime_error(fmt::format(
          "redis_cluster: slot {} still has keys on {} after {} ms of MIGRATE ({} moved)", slot,
          describe(m.source), options_.ready_timeout.count(), moved));
    }
    std::vector<std::string_view> args = {"MIGRATE", "127.0.0.1", target_port,
                                          "",        "0",         migrate_timeout_ms};
    if (!options_.password.empty()) {
      args.push_back("AUTH");
      args.push_back(options_.password);
    }
    args.push_back("KEYS");
    for (const resp::value& key : keys.elements) {
      args.push_back(key.text);
    }
    // OK, or NOKEY when every one of them expired meanwhile.
    if (checked(m.source, args).text == "OK") moved += keys.elements.size();
  }
}

void redis_cluster::finish_migration(std::size_t slot) {
  const migration m = migration_of(slot);
  move_keys(slot);
  const std::string slot_text = std::to_string(slot);
  const std::string& target_id = id(m.target);
  // The target first, then the source, then the other masters, as redis-cli does: were the
  // source to give the slot up before the target claims it, clients would be sent back and forth.
  checked(m.target, {"CLUSTER", "SETSLOT", slot_text, "NODE", target_id});
  checked(m.source, {"CLUSTER", "SETSLOT", slot_text, "NODE", target_id});
  for (const shard& s : shards_) {
    if (s.master != m.source && s.master != m.target && live(s.master)) {
      checked(s.master, {"CLUSTER", "SETSLOT", slot_text, "NODE", target_id});
    }
  }
  migrations_.erase(slot);
  wait_until(fmt::format("slot {} to move to {}", slot, describe(m.target)), [&]() -> std::string {
    if (std::string problem = health_problem(); !problem.empty()) return problem;
    if (owners_[slot] != m.target) {
      return fmt::format("the nodes agree that slot {} is served by {}", slot,
                         describe(owners_[slot]));
    }
    return {};
  });
}

}  // namespace redlock::test
