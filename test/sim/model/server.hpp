#ifndef REDLOCK_TEST_SIM_MODEL_SERVER_HPP
#define REDLOCK_TEST_SIM_MODEL_SERVER_HPP

// A model Redis 7.0 server: its keyspace, its script cache and its subscribers, with the
// connection-level commands a client's handshake sends (HELLO, CLIENT SETNAME, SELECT, ROLE,
// SUBSCRIBE, ...). Requests and replies travel as RESP bytes (session::receive), so the library's
// own encoder and parser are exercised on both ends, and the server's clock is the caller's (a
// node's virtual clock, drift included).

#include "resp/parser.hpp"
#include "resp/value.hpp"
#include "sim/model/commands.hpp"
#include "sim/model/keyspace.hpp"
#include "sim/model/scripting.hpp"

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redlock::sim {

// Appends `reply` as RESP (RESP3 types, or their RESP2 forms) to `out`.
void encode_reply(const resp::value& reply, bool resp3, std::string& out);

class model_server;

// One client connection to a model server. Bytes written by the client go in through receive();
// what the server sends back (replies and pushed messages, in order) goes out through `send`.
class session {
 public:
  using sender = std::function<void(std::string bytes)>;

  // Parses what arrived and runs every complete command, at the server's time `now_us`. A request
  // that is not RESP closes nothing here: the protocol error is answered, as Redis does.
  void receive(std::string_view bytes, std::int64_t now_us);

  bool resp3() const noexcept { return resp3_; }
  const std::string& name() const noexcept { return name_; }

 private:
  friend class model_server;
  session(model_server& server, std::uint64_t id, sender send)
      : server_(&server), id_(id), send_(std::move(send)) {}

  void push(const resp::value& message);

  model_server* server_;
  std::uint64_t id_;
  sender send_;
  resp::parser parser_;
  bool resp3_ = false;
  std::string name_;
  std::set<std::string, std::less<>> channels_;
  std::set<std::string, std::less<>> shard_channels_;
};

// The shards of one model Redis Cluster: each master's address and the slot ranges it serves.
// Shared by the cluster's servers, which answer CLUSTER SHARDS from it and redirect a key whose
// slot another master serves (MOVED).
struct cluster_map {
  struct shard {
    std::string host;
    std::uint16_t port = 0;
    std::string id;  // 40 characters, as a node id is
    std::vector<std::pair<std::uint16_t, std::uint16_t>> ranges;
  };
  std::vector<shard> shards;

  // The shard serving `slot`; nullptr when none does.
  const shard* owner_of(std::uint16_t slot) const noexcept;
  // Moves `slot` to shards[to] (its ranges split where needed).
  void move_slot(std::uint16_t slot, std::size_t to);
};

// What a model server is: a master, a replica (writes refused with READONLY, ROLE says "slave"), or
// a Redis Sentinel (no keys; it names the masters it monitors and announces their failovers on
// +switch-master).
enum class server_role : std::uint8_t { master, replica, sentinel };

class model_server {
 public:
  explicit model_server(std::string name, server_role role = server_role::master)
      : name_(std::move(name)), role_(role) {}
  model_server(const model_server&) = delete;
  model_server& operator=(const model_server&) = delete;

  const std::string& name() const noexcept { return name_; }

  // A new connection; it lives until close(). Its replies go out through `send`.
  session& open(session::sender send);
  void close(session& s);

  // Runs one command for `s` (or with no connection: a script's caller, a test) at `now_us`.
  resp::value execute(session* s, std::span<const std::string> args, std::int64_t now_us);

  keyspace& keys() noexcept { return keys_; }
  script_engine& scripts() noexcept { return scripts_; }

  // A restart without persistence, or a failover to a replica that had none of the keys: every key
  // and every cached script gone (connections are the transport's business).
  void lose_everything();

  server_role role() const noexcept { return role_; }
  // A replica of host:port (its connections stay open, and writes on them are refused), or a
  // master again.
  void become_replica_of(std::string host, std::uint16_t port);
  void become_master();

  // A sentinel's side: `name` is monitored at host:port (SENTINEL GET-MASTER-ADDR-BY-NAME and
  // SENTINEL MASTER answer it); switch_master() moves it and publishes +switch-master.
  void monitor(std::string name, std::string host, std::uint16_t port, std::int64_t now_us);

  // A master of a cluster, reached at host:port: HELLO says mode "cluster", CLUSTER SHARDS
  // describes `map`, and a command whose keys are in another shard's slot is answered MOVED (in
  // several slots: CROSSSLOT).
  void join_cluster(std::shared_ptr<const cluster_map> map, std::string host, std::uint16_t port);
  // The slot left this server (a resharding): its shard channels' subscribers are told
  // (sunsubscribe), as Redis 7 does.
  void slot_moved_away(std::uint16_t slot);
  // Every slot left this server (its shard failed over to another master).
  void all_slots_moved_away();
  void switch_master(const std::string& name, std::string host, std::uint16_t port,
                     std::int64_t now_us);

  // How many commands ran (scripts count once).
  std::uint64_t commands_run() const noexcept { return commands_run_; }
  // How many EVALSHA calls named the script whose digest is `sha1`, run or refused (how often
  // histories reach a script: the batched renewals, for one).
  std::uint64_t evalsha_calls(std::string_view sha1) const {
    const auto found = evalsha_calls_.find(sha1);
    return found == evalsha_calls_.end() ? 0 : found->second;
  }

 private:
  friend class session;
  std::int64_t publish(std::string_view channel, std::string_view message, bool sharded);
  resp::value connection_command(session* s, std::span<const std::string> args);
  resp::value sentinel_command(std::span<const std::string> args, std::int64_t now_us);
  resp::value cluster_command(std::span<const std::string> args);
  // Unsubscribes (sunsubscribe pushed) the shard channels for which `gone_with_it` holds.
  void drop_shard_subscriptions(
      const std::function<bool(const std::string& channel)>& gone_with_it);
  // MOVED or CROSSSLOT when the command's keys are not all in one slot of this server.
  std::optional<resp::value> cluster_refusal(const std::string& name,
                                             std::span<const std::string> args) const;

  struct monitored_master {
    std::string host;
    std::uint16_t port = 0;
    std::int64_t since_us = 0;  // when it became master, on this server's clock
    std::uint64_t epoch = 0;    // bumped by each failover
  };

  std::string name_;
  server_role role_;
  std::string master_host_;  // a replica's master
  std::uint16_t master_port_ = 0;
  std::map<std::string, monitored_master, std::less<>> monitored_;
  std::shared_ptr<const cluster_map> cluster_;
  std::string cluster_host_;
  std::uint16_t cluster_port_ = 0;
  keyspace keys_;
  script_engine scripts_;
  std::list<session> sessions_;
  std::uint64_t next_id_ = 1;
  std::uint64_t commands_run_ = 0;
  std::map<std::string, std::uint64_t, std::less<>> evalsha_calls_;
};

}  // namespace redlock::sim

#endif
