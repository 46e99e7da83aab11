#include "support/redis_sentinel.hpp"

#include "support/redis_fixture_helpers.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"
#include "support/test_pki.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>
#include <utility>

namespace redlock::test {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

// SENTINEL FAILOVER refused for a reason other than a failover under way (NOGOODSLAVE while the
// sentinel's picture of the replicas is not fresh): asked again after this.
constexpr auto failover_refused_retry_after = 1s;

// The fields of one SENTINEL MASTER / REPLICAS / SENTINELS entry: name, value, name, value ...
// (a RESP2 array; a RESP3 map has the same elements).
std::map<std::string, std::string, std::less<>> fields_of(const resp::value& entry) {
  std::map<std::string, std::string, std::less<>> fields;
  for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
    fields[entry.elements[i].text] = entry.elements[i + 1].text;
  }
  return fields;
}

std::string field(const std::map<std::string, std::string, std::less<>>& fields,
                  std::string_view name) {
  const auto it = fields.find(name);
  return it == fields.end() ? "<missing>" : it->second;
}

bool has_flag(std::string_view flags, std::string_view flag) {
  const auto all = split(flags, ',');
  return std::find(all.begin(), all.end(), flag) != all.end();
}

// A flag that says the sentinel cannot count on the server now.
bool flagged_down(std::string_view flags) {
  return has_flag(flags, "s_down") || has_flag(flags, "o_down") || has_flag(flags, "disconnected");
}

bool is_one_word(std::string_view text) {
  return std::none_of(text.begin(), text.end(),
                      [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

// With options.tls: a TLS listener too, and TLS for the links the server opens (replication; a
// sentinel's links to the data nodes and to the other sentinels), which present the client
// certificate (the server one is for serverAuth only).
void with_tls(const redis_sentinel_options& options, redis_server_options& server) {
  if (!options.tls) return;
  const test_pki& pki = shared_test_pki();
  server.tls = redis_server_options::tls_listener{
      pki.server().cert.string(), pki.server().key.string(), pki.ca().string(), false};
  server.extra_args.push_back(
      fmt::format("--tls-replication yes --tls-client-cert-file {} --tls-client-key-file {}",
                  pki.client().cert.string(), pki.client().key.string()));
}

redis_server_options data_node_options(const redis_sentinel_options& options,
                                       std::uint16_t master_port) {
  redis_server_options server;
  server.password = options.password;
  // 7.0 waits 5 s by default before a diskless full sync, for more replicas to join it.
  server.extra_args = {"--repl-diskless-sync-delay 0"};
  if (!options.password.empty()) server.extra_args.push_back("--masterauth " + options.password);
  with_tls(options, server);
  // replicaof in the file, not on the command line: a sentinel that turns the node into a
  // replica of another master, or into a master, records that there (CONFIG REWRITE), and a
  // restarted node must follow the file, as it would on a real machine.
  server.config_file =
      "# A data node of redis_sentinel (test/support/redis_sentinel.hpp); the sentinels rewrite\n"
      "# this file when they change whom it replicates.";
  if (master_port != 0) *server.config_file += fmt::format("\nreplicaof 127.0.0.1 {}", master_port);
  return server;
}

redis_server_options sentinel_options(const redis_sentinel_options& options,
                                      std::uint16_t master_port) {
  redis_server_options server;
  server.sentinel = true;
  server.password = options.sentinel_password;
  with_tls(options, server);
  const std::string& name = options.master_name;
  std::string text = fmt::format(
      "# A sentinel of redis_sentinel (test/support/redis_sentinel.hpp); it rewrites this file\n"
      "# with what it learns (its id, the other sentinels, the replicas, the current master).\n"
      "sentinel monitor {0} 127.0.0.1 {1} {2}\n"
      "sentinel down-after-milliseconds {0} {3}\n"
      "sentinel failover-timeout {0} {4}\n"
      // Every address is a numeric loopback one; the sentinels tell each other 127.0.0.1 (in
      // their hello messages) whatever address their connection to the master left from.
      "sentinel resolve-hostnames no\n"
      "sentinel announce-ip 127.0.0.1",
      name, master_port, options.quorum, options.down_after.count(),
      options.failover_timeout.count());
  if (!options.password.empty()) {
    text += fmt::format("\nsentinel auth-pass {} {}", name, options.password);
  }
  if (!options.sentinel_password.empty()) {
    // A sentinel with requirepass would log in to the others with it anyway; said explicitly so
    // that the setup does not rest on that fallback.
    text += fmt::format("\nsentinel sentinel-pass {}", options.sentinel_password);
  }
  server.config_file = std::move(text);
  return server;
}

void check(const redis_sentinel_options& options) {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("redis_sentinel: " + what);
  };
  if (options.master_name.empty() || !is_one_word(options.master_name)) {
    fail(fmt::format("master name \"{}\" is not one word", options.master_name));
  }
  if (!is_one_word(options.password) || !is_one_word(options.sentinel_password)) {
    fail("a password is not one word");
  }
  if (options.sentinels == 0) fail("no sentinels");
  if (options.quorum == 0 || options.quorum > options.sentinels) {
    fail(fmt::format("quorum {} of {} sentinels", options.quorum, options.sentinels));
  }
  if (options.down_after <= 0ms || options.failover_timeout <= 0ms ||
      options.ready_timeout <= 0ms) {
    fail("a time that is not positive");
  }
}

}  // namespace

struct redis_sentinel::server {
  std::unique_ptr<redis_server> process;
  bool paused = false;
};

redis_sentinel::redis_sentinel(redis_sentinel_options options) : options_(std::move(options)) {
  check(options_);
  const auto formed_by = std::chrono::steady_clock::now() + options_.ready_timeout;
  // Should anything below throw, nodes_ and sentinels_ are destroyed with the half-made object:
  // every process started so far is killed and its directory removed.
  const auto start = [](const redis_server_options& options) {
    auto started = std::make_unique<server>();
    started->process = std::make_unique<redis_server>(options);
    return started;
  };
  nodes_.reserve(1 + options_.replicas);
  nodes_.push_back(start(data_node_options(options_, 0)));
  for (std::size_t r = 0; r < options_.replicas; ++r) {
    nodes_.push_back(start(data_node_options(options_, known_port(0))));
  }

  // A sentinel learns the replicas from the master's INFO, which it asks for when it connects
  // and then every 10 s: started before the replicas have linked up (a replica connects from
  // its once-a-second cron), it would know them only 10 s later.
  wait_until(
      "the replicas to link up with the master",
      [this]() -> std::string {
        for (std::size_t n = 1; n < size(); ++n) {
          const std::string info = command(n, {"INFO", "replication"}).text;
          if (const auto link = field_of(info, "master_link_status"); link != "up") {
            return fmt::format("{} reports master_link_status:{}", describe(n), link);
          }
        }
        const std::string info = command(0, {"INFO", "replication"}).text;
        if (const auto count = field_of(info, "connected_slaves");
            count != std::to_string(options_.replicas)) {
          return fmt::format("{} reports connected_slaves:{}", describe(0), count);
        }
        return {};
      },
      formed_by);

  sentinels_.reserve(options_.sentinels);
  for (std::size_t s = 0; s < options_.sentinels; ++s) {
    sentinels_.push_back(start(sentinel_options(options_, known_port(0))));
  }
  wait_until_healthy(formed_by);
}

redis_sentinel::~redis_sentinel() = default;

const redis_sentinel::server& redis_sentinel::node_at(std::size_t node) const {
  if (node >= nodes_.size()) {
    throw std::logic_error(
        fmt::format("redis_sentinel: no data node {} (of {})", node, nodes_.size()));
  }
  return *nodes_[node];
}

redis_sentinel::server& redis_sentinel::node_at(std::size_t node) {
  return const_cast<server&>(std::as_const(*this).node_at(node));
}

const redis_sentinel::server& redis_sentinel::sentinel_at(std::size_t sentinel) const {
  if (sentinel >= sentinels_.size()) {
    throw std::logic_error(
        fmt::format("redis_sentinel: no sentinel {} (of {})", sentinel, sentinels_.size()));
  }
  return *sentinels_[sentinel];
}

redis_sentinel::server& redis_sentinel::sentinel_at(std::size_t sentinel) {
  return const_cast<server&>(std::as_const(*this).sentinel_at(sentinel));
}

std::uint16_t redis_sentinel::port(std::size_t node) const {
  return node_at(node).process->port();
}

std::uint16_t redis_sentinel::tls_port(std::size_t node) const {
  return node_at(node).process->tls_port();
}

std::uint16_t redis_sentinel::known_port(std::size_t node) const {
  return options_.tls ? tls_port(node) : port(node);
}

std::uint16_t redis_sentinel::known_sentinel_port(std::size_t sentinel) const {
  const redis_server& process = *sentinel_at(sentinel).process;
  return options_.tls ? process.tls_port() : process.port();
}

pid_t redis_sentinel::pid(std::size_t node) const {
  return running(node) ? node_at(node).process->pid() : -1;
}

bool redis_sentinel::running(std::size_t node) const {
  return node_at(node).process->running();
}

bool redis_sentinel::paused(std::size_t node) const {
  return node_at(node).paused;
}

node_config redis_sentinel::config(std::size_t node) const {
  const redis_server& process = *node_at(node).process;
  return options_.tls ? process.tls_config(shared_test_pki().ca().string()) : process.config();
}

std::string redis_sentinel::log_tail(std::size_t node, std::size_t lines) const {
  return node_at(node).process->log_tail(lines);
}

std::uint16_t redis_sentinel::sentinel_port(std::size_t sentinel) const {
  return sentinel_at(sentinel).process->port();
}

std::vector<std::uint16_t> redis_sentinel::sentinel_ports() const {
  std::vector<std::uint16_t> ports;
  for (std::size_t s = 0; s < sentinels(); ++s) {
    ports.push_back(sentinel_port(s));
  }
  return ports;
}

pid_t redis_sentinel::sentinel_pid(std::size_t sentinel) const {
  return sentinel_running(sentinel) ? sentinel_at(sentinel).process->pid() : -1;
}

bool redis_sentinel::sentinel_running(std::size_t sentinel) const {
  return sentinel_at(sentinel).process->running();
}

std::string redis_sentinel::sentinel_log_tail(std::size_t sentinel, std::size_t lines) const {
  return sentinel_at(sentinel).process->log_tail(lines);
}

std::string redis_sentinel::sentinel_url(std::size_t first) const {
  const std::string login = options_.password.empty() ? "" : ":" + options_.password + "@";
  std::string url = fmt::format("{}://{}127.0.0.1:{}?master={}",
                                options_.tls ? "rediss+sentinel" : "redis+sentinel", login,
                                known_sentinel_port(first), options_.master_name);
  for (std::size_t s = 0; s < sentinels(); ++s) {
    if (s != first) url += fmt::format("&seed=127.0.0.1:{}", known_sentinel_port(s));
  }
  if (options_.tls) url += "&ca=" + shared_test_pki().ca().string();
  if (!options_.sentinel_password.empty()) {
    url += "&sentinel_password=" + options_.sentinel_password;
  }
  return url;
}

std::string redis_sentinel::describe(std::size_t node) const {
  const server& it = node_at(node);
  const char* state = !it.process->running() ? ", stopped" : it.paused ? ", paused" : "";
  return fmt::format("data node {} (127.0.0.1:{}{})", node, it.process->port(), state);
}

std::string redis_sentinel::describe_sentinel(std::size_t sentinel) const {
  const server& it = sentinel_at(sentinel);
  return fmt::format("sentinel {} (127.0.0.1:{}{})", sentinel, it.process->port(),
                     it.process->running() ? "" : ", stopped");
}

std::size_t redis_sentinel::first_live_sentinel() const {
  for (std::size_t s = 0; s < sentinels(); ++s) {
    if (sentinel_running(s)) return s;
  }
  throw std::logic_error("redis_sentinel: no sentinel is running to ask");
}

std::size_t redis_sentinel::node_of(std::string_view ip, std::string_view port_text) const {
  if (ip != "127.0.0.1") return npos;
  const std::size_t wanted = to_size(port_text);
  for (std::size_t n = 0; n < size(); ++n) {
    if (known_port(n) == wanted) return n;
  }
  return npos;
}

resp::value redis_sentinel::command(std::size_t node,
                                    std::span<const std::string_view> args) const {
  if (!running(node)) {
    throw std::logic_error(
        fmt::format("redis_sentinel: {} sent to {}", describe_command(args), describe(node)));
  }
  try {
    sync_client client(port(node), options_.password, {}, command_timeout);
    return client.command(args);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("redis_sentinel: {}: {}: {}", describe(node),
                                         describe_command(args), e.what()));
  }
}

resp::value redis_sentinel::sentinel_command(std::size_t sentinel,
                                             std::span<const std::string_view> args) const {
  if (!sentinel_running(sentinel)) {
    throw std::logic_error(fmt::format("redis_sentinel: {} sent to {}", describe_command(args),
                                       describe_sentinel(sentinel)));
  }
  try {
    sync_client client(sentinel_port(sentinel), options_.sentinel_password, {}, command_timeout);
    return client.command(args);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("redis_sentinel: {}: {}: {}", describe_sentinel(sentinel),
                                         describe_command(args), e.what()));
  }
}

std::size_t redis_sentinel::master_named_by(std::size_t sentinel) const {
  const resp::value reply =
      sentinel_command(sentinel, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
  if (reply.elements.size() != 2) {
    throw std::runtime_error(fmt::format("redis_sentinel: {}: GET-MASTER-ADDR-BY-NAME answered {}",
                                         describe_sentinel(sentinel),
                                         resp::to_debug_string(reply)));
  }
  const std::size_t node = node_of(reply.elements[0].text, reply.elements[1].text);
  if (node == npos) {
    throw std::runtime_error(fmt::format("redis_sentinel: {} names {}:{}, which is no data node",
                                         describe_sentinel(sentinel), reply.elements[0].text,
                                         reply.elements[1].text));
  }
  return node;
}

std::size_t redis_sentinel::master() const {
  return master_named_by(first_live_sentinel());
}

std::vector<std::size_t> redis_sentinel::replicas() const {
  const std::size_t current = master();
  std::vector<std::size_t> others;
  for (std::size_t n = 0; n < size(); ++n) {
    if (n != current) others.push_back(n);
  }
  return others;
}

template <class Problem>
void redis_sentinel::wait_until(std::string_view what, Problem problem) const {
  wait_until(what, std::move(problem), std::chrono::steady_clock::now() + options_.ready_timeout);
}

template <class Problem>
void redis_sentinel::wait_until(std::string_view what, Problem problem,
                                std::chrono::steady_clock::time_point deadline) const {
  const std::string last = poll_until_solved_within(deadline, poll_interval, problem);
  if (last.empty()) return;
  std::string logs;
  for (std::size_t n = 0; n < size(); ++n) {
    logs += fmt::format("--- {} log:\n{}", describe(n), log_tail(n, 8));
  }
  // The sentinels' logs tell the story (+sdown, +odown, +switch-master ...): a longer tail.
  for (std::size_t s = 0; s < sentinels(); ++s) {
    logs += fmt::format("--- {} log:\n{}", describe_sentinel(s), sentinel_log_tail(s, 16));
  }
  throw std::runtime_error(fmt::format("redis_sentinel: waited {} ms for {}; still: {}\n{}",
                                       options_.ready_timeout.count(), what, last, logs));
}

void redis_sentinel::wait_until_healthy() {
  wait_until_healthy(std::chrono::steady_clock::now() + options_.ready_timeout);
}

void redis_sentinel::wait_until_healthy(std::chrono::steady_clock::time_point deadline) {
  std::size_t found = npos;
  wait_until(
      "a healthy group", [&] { return health_problem(found); }, deadline);
}

std::string redis_sentinel::health_problem(std::size_t& agreed_master) const {
  // What each running sentinel says; sentinels are never paused, so running means live.
  struct view {
    std::size_t sentinel;
    resp::value replicas;
    resp::value sentinels;
  };
  std::vector<view> views;
  std::size_t agreed = npos;
  std::size_t agreed_by = npos;
  for (std::size_t s = 0; s < sentinels(); ++s) {
    if (!sentinel_running(s)) continue;
    const std::string& name = options_.master_name;
    resp::value address;
    resp::value master_entry;
    view mine{s, {}, {}};
    try {
      sync_client client(sentinel_port(s), options_.sentinel_password, {}, probe_timeout);
      address = client.command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name});
      master_entry = client.command({"SENTINEL", "MASTER", name});
      mine.replicas = client.command({"SENTINEL", "REPLICAS", name});
      mine.sentinels = client.command({"SENTINEL", "SENTINELS", name});
    } catch (const std::runtime_error& e) {
      return fmt::format("{}: {}", describe_sentinel(s), e.what());
    }
    for (const resp::value* reply : {&address, &master_entry, &mine.replicas, &mine.sentinels}) {
      if (reply->is_error()) {
        return fmt::format("{} answered {}", describe_sentinel(s), reply->text);
      }
    }
    if (address.elements.size() != 2) {
      return fmt::format("{} answered {} to GET-MASTER-ADDR-BY-NAME", describe_sentinel(s),
                         resp::to_debug_string(address));
    }
    const std::size_t named = node_of(address.elements[0].text, address.elements[1].text);
    if (named == npos) {
      return fmt::format("{} names {}:{}, which is no data node", describe_sentinel(s),
                         address.elements[0].text, address.elements[1].text);
    }
    if (agreed == npos) {
      agreed = named;
      agreed_by = s;
    } else if (named != agreed) {
      return fmt::format("{} names {} as the master, {} names {}", describe_sentinel(agreed_by),
                         describe(agreed), describe_sentinel(s), describe(named));
    }
    if (const std::string flags = field(fields_of(master_entry), "flags");
        !has_flag(flags, "master") || flagged_down(flags) ||
        has_flag(flags, "failover_in_progress")) {
      return fmt::format("{} flags the master {} as {}", describe_sentinel(s), describe(named),
                         flags);
    }
    views.push_back(std::move(mine));
  }
  if (views.empty()) return "no sentinel is running";
  if (!live(agreed)) return fmt::format("the sentinels name {} as the master", describe(agreed));

  const auto replication_of = [this](std::size_t n) {
    try {
      sync_client client(port(n), options_.password, {}, probe_timeout);
      return client.command({"INFO", "replication"}).text;
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(fmt::format("{}: {}", describe(n), e.what()));
    }
  };
  if (const auto role = field_of(replication_of(agreed), "role"); role != "master") {
    return fmt::format("the sentinels' master {} reports role:{}", describe(agreed), role);
  }
  for (std::size_t n = 0; n < size(); ++n) {
    if (n == agreed || !live(n)) continue;
    const std::string info = replication_of(n);
    if (const auto role = field_of(info, "role"); role != "slave") {
      return fmt::format("{} reports role:{}", describe(n), role);
    }
    if (const auto master_port = field_of(info, "master_port");
        master_port != std::to_string(known_port(agreed))) {
      return fmt::format("{} replicates port {}, not the master {}", describe(n), master_port,
                         describe(agreed));
    }
    if (const auto link = field_of(info, "master_link_status"); link != "up") {
      return fmt::format("{} reports master_link_status:{}", describe(n), link);
    }
  }

  for (const view& v : views) {
    const std::string by = describe_sentinel(v.sentinel);
    std::vector<std::string> replica_flags(size());
    for (const resp::value& entry : v.replicas.elements) {
      const auto fields = fields_of(entry);
      if (const std::size_t n = node_of(field(fields, "ip"), field(fields, "port")); n != npos) {
        replica_flags[n] = field(fields, "flags");
      }
    }
    for (std::size_t n = 0; n < size(); ++n) {
      if (n == agreed || !live(n)) continue;
      if (replica_flags[n].empty()) {
        return fmt::format("{} does not list {} among the replicas", by, describe(n));
      }
      if (!has_flag(replica_flags[n], "slave") || flagged_down(replica_flags[n])) {
        return fmt::format("{} flags {} as {}", by, describe(n), replica_flags[n]);
      }
    }
    if (v.sentinels.elements.size() != sentinels() - 1) {
      return fmt::format("{} lists {} other sentinels, not {}", by, v.sentinels.elements.size(),
                         sentinels() - 1);
    }
    for (const resp::value& entry : v.sentinels.elements) {
      const auto fields = fields_of(entry);
      const std::string ip = field(fields, "ip");
      const std::string port_text = field(fields, "port");
      std::size_t other = npos;
      for (std::size_t s = 0; s < sentinels(); ++s) {
        if (ip == "127.0.0.1" && port_text == std::to_string(known_sentinel_port(s))) other = s;
      }
      if (other == npos || other == v.sentinel) {
        return fmt::format("{} lists a sentinel {}:{} of its own", by, ip, port_text);
      }
      const std::string flags = field(fields, "flags");
      if (sentinel_running(other) && flagged_down(flags)) {
        return fmt::format("{} flags {} as {}", by, describe_sentinel(other), flags);
      }
    }
  }
  agreed_master = agreed;
  return {};
}

std::size_t redis_sentinel::failover() {
  const std::size_t old_master = master();
  const std::vector<std::size_t> others = replicas();
  if (std::none_of(others.begin(), others.end(), [this](std::size_t n) { return live(n); })) {
    throw std::logic_error(fmt::format(
        "redis_sentinel: failover away from {}, with no live replica", describe(old_master)));
  }
  bool switched = false;
  clock::time_point ask_at{};  // at once
  std::size_t found = npos;
  wait_until(fmt::format("a failover away from {}", describe(old_master)), [&]() -> std::string {
    if (!switched) {
      const std::size_t asked = first_live_sentinel();
      if (master_named_by(asked) == old_master) {
        if (clock::now() < ask_at) {
          return fmt::format("{} still names {}", describe_sentinel(asked), describe(old_master));
        }
        const resp::value reply =
            sentinel_command(asked, {"SENTINEL", "FAILOVER", options_.master_name});
        // OK: a failover has begun; INPROG: one is under way (an automatic one, or ours). Either
        // way it has failover_timeout to finish before it is given up and asked for again. Once
        // a sentinel names another master it is never asked again: that would fail back.
        const bool begun = !reply.is_error() || reply.text.starts_with("INPROG");
        ask_at = clock::now() + (begun ? options_.failover_timeout + 1s
                                       : std::chrono::milliseconds(failover_refused_retry_after));
        return fmt::format("SENTINEL FAILOVER on {} answered {}", describe_sentinel(asked),
                           reply.is_error() ? reply.text : "OK");
      }
      switched = true;
    }
    if (std::string problem = health_problem(found); !problem.empty()) return problem;
    if (found == old_master) {
      // Failed back: on a loaded host the new master may miss down_after and be failed over in
      // turn, to the old one. The failover this asks for has not happened then: it is asked for
      // again, from the sentinels' agreed view.
      switched = false;
      ask_at = clock::now();
      return fmt::format("the sentinels name {} as the master again (failed back)",
                         describe(old_master));
    }
    return {};
  });
  return found;
}

void redis_sentinel::pause(std::size_t node) {
  node_at(node).process->pause();
  node_at(node).paused = true;
}

void redis_sentinel::resume(std::size_t node) {
  node_at(node).process->resume();
  node_at(node).paused = false;
}

void redis_sentinel::stop(std::size_t node) {
  node_at(node).process->kill9();
  node_at(node).paused = false;
}

void redis_sentinel::restart(std::size_t node) {
  stop(node);
  node_at(node).process->start();
  std::size_t found = npos;
  wait_until(fmt::format("{} to rejoin", describe(node)), [&] { return health_problem(found); });
}

void redis_sentinel::stop_sentinel(std::size_t sentinel) {
  sentinel_at(sentinel).process->kill9();
}

void redis_sentinel::restart_sentinel(std::size_t sentinel) {
  stop_sentinel(sentinel);
  sentinel_at(sentinel).process->start();
  std::size_t found = npos;
  wait_until(fmt::format("{} to rejoin", describe_sentinel(sentinel)),
             [&] { return health_problem(found); });
}

}  // namespace redlock::test
