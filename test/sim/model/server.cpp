#include "sim/model/server.hpp"

#include "algo/hash_slot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

namespace redlock::sim {

namespace {

resp::value aggregate(resp::type kind, std::vector<resp::value> elements) {
  resp::value v;
  v.kind = kind;
  v.elements = std::move(elements);
  return v;
}

void encode_length(char prefix, std::size_t n, std::string& out) {
  out += prefix;
  out += std::to_string(n);
  out += "\r\n";
}

}  // namespace

void encode_reply(const resp::value& reply, bool resp3, std::string& out) {
  switch (reply.kind) {
    case resp::type::simple_string:
      out += '+' + reply.text + "\r\n";
      return;
    case resp::type::simple_error:
      out += '-' + reply.text + "\r\n";
      return;
    case resp::type::integer:
      out += ':' + std::to_string(reply.integer) + "\r\n";
      return;
    case resp::type::boolean:
      out += resp3 ? (reply.integer ? "#t\r\n" : "#f\r\n")
                   : ':' + std::to_string(reply.integer) + "\r\n";
      return;
    case resp::type::null:
      out += resp3 ? "_\r\n" : "$-1\r\n";
      return;
    case resp::type::double_number:
      if (resp3) {
        out += ',' + reply.text + "\r\n";
        return;
      }
      [[fallthrough]];
    case resp::type::bulk_string:
    case resp::type::big_number:
      encode_length('$', reply.text.size(), out);
      out += reply.text + "\r\n";
      return;
    case resp::type::verbatim_string:
      if (resp3) {
        encode_length('=', reply.text.size() + 4, out);
        out += reply.format + ':' + reply.text + "\r\n";
      } else {
        encode_length('$', reply.text.size(), out);
        out += reply.text + "\r\n";
      }
      return;
    case resp::type::blob_error:
      encode_length('!', reply.text.size(), out);
      out += reply.text + "\r\n";
      return;
    case resp::type::array:
    case resp::type::set:
    case resp::type::push:
    case resp::type::map: {
      char prefix = '*';
      std::size_t n = reply.elements.size();
      if (resp3 && reply.kind == resp::type::set) prefix = '~';
      if (resp3 && reply.kind == resp::type::push) prefix = '>';
      if (resp3 && reply.kind == resp::type::map) {
        prefix = '%';
        n /= 2;
      }
      encode_length(prefix, n, out);
      for (const auto& element : reply.elements)
        encode_reply(element, resp3, out);
      return;
    }
  }
}

void session::receive(std::string_view bytes, std::int64_t now_us) {
  parser_.feed(bytes);
  boost::system::error_code ec;
  std::string out;
  while (auto request = parser_.next(ec)) {
    std::vector<std::string> args;
    for (auto& element : request->elements)
      args.push_back(std::move(element.text));
    if (request->kind != resp::type::array || args.empty()) {
      encode_reply(error_reply("ERR Protocol error: expected an array of bulk strings"), resp3_,
                   out);
      continue;
    }
    auto reply = server_->execute(this, args, now_us);
    // Pushed messages (a SUBSCRIBE's confirmations) were sent by execute itself, in order; what
    // came before them is sent first.
    if (reply.kind == resp::type::push && reply.elements.empty()) continue;
    encode_reply(reply, resp3_, out);
    send_(std::exchange(out, {}));
  }
  if (ec) {
    encode_reply(error_reply(fmt::format("ERR Protocol error: {}", parser_.error_message())),
                 resp3_, out);
    parser_.reset();
  }
  if (!out.empty()) send_(std::move(out));
}

void session::push(const resp::value& message) {
  std::string out;
  encode_reply(message, resp3_, out);
  send_(std::move(out));
}

session& model_server::open(session::sender send) {
  sessions_.push_back(session(*this, next_id_++, std::move(send)));
  return sessions_.back();
}

void model_server::close(session& s) {
  sessions_.remove_if([&](const session& each) { return &each == &s; });
}

void model_server::lose_everything() {
  keys_.clear();
  scripts_.flush();
}

const cluster_map::shard* cluster_map::owner_of(std::uint16_t slot) const noexcept {
  for (const auto& s : shards) {
    for (const auto& [first, last] : s.ranges) {
      if (first <= slot && slot <= last) return &s;
    }
  }
  return nullptr;
}

void cluster_map::move_slot(std::uint16_t slot, std::size_t to) {
  for (auto& s : shards) {
    std::vector<std::pair<std::uint16_t, std::uint16_t>> kept;
    for (const auto& [first, last] : s.ranges) {
      if (slot < first || last < slot) {
        kept.emplace_back(first, last);
        continue;
      }
      if (first < slot) kept.emplace_back(first, static_cast<std::uint16_t>(slot - 1));
      if (slot < last) kept.emplace_back(static_cast<std::uint16_t>(slot + 1), last);
    }
    s.ranges = std::move(kept);
  }
  shards.at(to).ranges.emplace_back(slot, slot);
}

void model_server::join_cluster(std::shared_ptr<const cluster_map> map, std::string host,
                                std::uint16_t port) {
  cluster_ = std::move(map);
  cluster_host_ = std::move(host);
  cluster_port_ = port;
}

void model_server::slot_moved_away(std::uint16_t slot) {
  drop_shard_subscriptions(
      [slot](const std::string& channel) { return detail::hash_slot(channel) == slot; });
}

void model_server::all_slots_moved_away() {
  drop_shard_subscriptions([](const std::string&) { return true; });
}

void model_server::drop_shard_subscriptions(
    const std::function<bool(const std::string& channel)>& gone_with_it) {
  for (session& s : sessions_) {
    std::vector<std::string> gone;
    for (const auto& channel : s.shard_channels_) {
      if (gone_with_it(channel)) gone.push_back(channel);
    }
    for (const auto& channel : gone) {
      s.shard_channels_.erase(channel);
      resp::value m =
          aggregate(resp::type::push, {bulk_reply("sunsubscribe"), bulk_reply(channel),
                                       integer_reply(static_cast<std::int64_t>(
                                           s.channels_.size() + s.shard_channels_.size()))});
      if (!s.resp3_) m.kind = resp::type::array;
      s.push(m);
    }
  }
}

std::optional<resp::value> model_server::cluster_refusal(const std::string& name,
                                                         std::span<const std::string> args) const {
  std::vector<std::string_view> keys;
  if (name == "del" || name == "exists" || name == "ssubscribe") {
    for (std::size_t i = 1; i < args.size(); ++i)
      keys.push_back(args[i]);
  } else if (name == "eval" || name == "evalsha") {
    std::int64_t count = 0;
    if (args.size() >= 3 && parse_integer(args[2], count) && count > 0 &&
        args.size() >= 3 + static_cast<std::size_t>(count)) {
      for (std::size_t i = 0; i < static_cast<std::size_t>(count); ++i)
        keys.push_back(args[3 + i]);
    }
  } else if ((is_data_command(name) && name != "time" && name != "ping" && name != "publish") ||
             name == "spublish") {
    if (args.size() >= 2) keys.push_back(args[1]);
  }
  if (keys.empty()) return std::nullopt;
  const std::uint16_t slot = detail::hash_slot(keys.front());
  for (const auto key : keys) {
    if (detail::hash_slot(key) != slot) {
      return error_reply("CROSSSLOT Keys in request don't hash to the same slot");
    }
  }
  const cluster_map::shard* owner = cluster_->owner_of(slot);
  if (owner == nullptr) return error_reply("CLUSTERDOWN Hash slot not served");
  if (owner->host == cluster_host_ && owner->port == cluster_port_) return std::nullopt;
  return error_reply(fmt::format("MOVED {} {}:{}", slot, owner->host, owner->port));
}

resp::value model_server::cluster_command(std::span<const std::string> args) {
  if (args.size() == 2 && lower_case(args[1]) == "shards") {
    std::vector<resp::value> shards;
    for (const auto& s : cluster_->shards) {
      std::vector<resp::value> slots;
      for (const auto& [first, last] : s.ranges) {
        slots.push_back(integer_reply(first));
        slots.push_back(integer_reply(last));
      }
      resp::value node = aggregate(
          resp::type::map,
          {bulk_reply("id"), bulk_reply(s.id), bulk_reply("port"), integer_reply(s.port),
           bulk_reply("ip"), bulk_reply(s.host), bulk_reply("endpoint"), bulk_reply(s.host),
           bulk_reply("role"), bulk_reply("master"), bulk_reply("replication-offset"),
           integer_reply(0), bulk_reply("health"), bulk_reply("online")});
      shards.push_back(aggregate(
          resp::type::map, {bulk_reply("slots"), aggregate(resp::type::array, std::move(slots)),
                            bulk_reply("nodes"), aggregate(resp::type::array, {std::move(node)})}));
    }
    return aggregate(resp::type::array, std::move(shards));
  }
  return error_reply(fmt::format("ERR unknown subcommand '{}'. Try CLUSTER HELP.",
                                 args.size() > 1 ? args[1] : ""));
}

void model_server::become_replica_of(std::string host, std::uint16_t port) {
  role_ = server_role::replica;
  master_host_ = std::move(host);
  master_port_ = port;
}

void model_server::become_master() {
  role_ = server_role::master;
  master_host_.clear();
  master_port_ = 0;
}

void model_server::monitor(std::string name, std::string host, std::uint16_t port,
                           std::int64_t now_us) {
  monitored_[std::move(name)] = monitored_master{std::move(host), port, now_us, 0};
}

void model_server::switch_master(const std::string& name, std::string host, std::uint16_t port,
                                 std::int64_t now_us) {
  auto& m = monitored_.at(name);
  const std::string message = fmt::format("{} {} {} {} {}", name, m.host, m.port, host, port);
  m.host = std::move(host);
  m.port = port;
  m.since_us = now_us;
  ++m.epoch;
  publish("+switch-master", message, false);
}

resp::value model_server::sentinel_command(std::span<const std::string> args, std::int64_t now_us) {
  if (args.size() < 2) {
    return error_reply("ERR wrong number of arguments for 'sentinel' command");
  }
  const std::string sub = lower_case(args[1]);
  if (sub == "get-master-addr-by-name" && args.size() == 3) {
    auto found = monitored_.find(args[2]);
    if (found == monitored_.end()) return null_reply();
    return aggregate(resp::type::array, {bulk_reply(found->second.host),
                                         bulk_reply(std::to_string(found->second.port))});
  }
  if (sub == "master" && args.size() == 3) {
    auto found = monitored_.find(args[2]);
    if (found == monitored_.end()) return error_reply("ERR No such master with that name");
    const monitored_master& m = found->second;
    return aggregate(
        resp::type::map,
        {bulk_reply("name"), bulk_reply(found->first), bulk_reply("ip"), bulk_reply(m.host),
         bulk_reply("port"), bulk_reply(std::to_string(m.port)), bulk_reply("flags"),
         bulk_reply("master"), bulk_reply("role-reported"), bulk_reply("master"),
         bulk_reply("role-reported-time"),
         bulk_reply(std::to_string(std::max<std::int64_t>(0, now_us - m.since_us) / 1000)),
         bulk_reply("config-epoch"), bulk_reply(std::to_string(m.epoch))});
  }
  return error_reply(fmt::format("ERR Unknown sentinel subcommand '{}'", args[1]));
}

std::int64_t model_server::publish(std::string_view channel, std::string_view message,
                                   bool sharded) {
  std::int64_t receivers = 0;
  for (session& s : sessions_) {
    const auto& channels = sharded ? s.shard_channels_ : s.channels_;
    if (!channels.contains(channel)) continue;
    ++receivers;
    resp::value m = aggregate(resp::type::push,
                              {bulk_reply(sharded ? "smessage" : "message"),
                               bulk_reply(std::string(channel)), bulk_reply(std::string(message))});
    if (!s.resp3_) m.kind = resp::type::array;
    s.push(m);
  }
  return receivers;
}

resp::value model_server::execute(session* s, std::span<const std::string> args,
                                  std::int64_t now_us) {
  ++commands_run_;
  const std::string name = lower_case(args[0]);
  if (name == "evalsha" && args.size() >= 2) ++evalsha_calls_[lower_case(args[1])];
  if (s && !s->resp3_ && (!s->channels_.empty() || !s->shard_channels_.empty()) &&
      name != "subscribe" && name != "unsubscribe" && name != "ssubscribe" &&
      name != "sunsubscribe" && name != "ping" && name != "quit") {
    return error_reply(fmt::format(
        "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET "
        "are allowed in this context",
        name));
  }
  if (role_ == server_role::sentinel) {
    // A sentinel holds no keys and runs no scripts.
    if (name == "sentinel") return sentinel_command(args, now_us);
    if (name != "ping" && (is_data_command(name) || script_engine::is_script_command(name))) {
      return error_reply(
          fmt::format("ERR unknown command '{}', with args beginning with: ", args[0]));
    }
  }
  if (cluster_) {
    if (name == "cluster") return cluster_command(args);
    if (auto refusal = cluster_refusal(name, args)) return *refusal;
  }
  command_context at;
  at.now_us = now_us;
  at.resp3 = s && s->resp3_;
  at.read_only = role_ == server_role::replica;
  at.publish = [this](std::string_view channel, std::string_view message, bool sharded) {
    return publish(channel, message, sharded);
  };
  if (script_engine::is_script_command(name)) return scripts_.run(args, keys_, at);
  if (is_data_command(name)) return run_data_command(keys_, args, at);
  return connection_command(s, args);
}

resp::value model_server::connection_command(session* s, std::span<const std::string> args) {
  const std::string name = lower_case(args[0]);
  const auto arity = [&] {
    return error_reply(fmt::format("ERR wrong number of arguments for '{}' command", name));
  };
  if (name == "hello") {
    if (args.size() > 2) return error_reply("ERR the model node does not support HELLO options");
    if (args.size() == 2) {
      if (args[1] != "2" && args[1] != "3") {
        return error_reply("NOPROTO unsupported protocol version");
      }
      if (s) s->resp3_ = args[1] == "3";
    }
    return aggregate(
        resp::type::map,
        {bulk_reply("server"), bulk_reply("redis"), bulk_reply("version"), bulk_reply("7.0.15"),
         bulk_reply("proto"), integer_reply(s && s->resp3_ ? 3 : 2), bulk_reply("id"),
         integer_reply(s ? static_cast<std::int64_t>(s->id_) : 0), bulk_reply("mode"),
         bulk_reply(role_ == server_role::sentinel ? "sentinel"
                    : cluster_                     ? "cluster"
                                                   : "standalone"),
         bulk_reply("role"), bulk_reply(role_ == server_role::replica ? "replica" : "master"),
         bulk_reply("modules"), aggregate(resp::type::array, {})});
  }
  if (name == "client") {
    if (args.size() < 2) return arity();
    const std::string sub = lower_case(args[1]);
    if (sub == "setname" && args.size() == 3) {
      if (std::any_of(args[2].begin(), args[2].end(), [](char c) { return c <= ' ' || c > '~'; })) {
        return error_reply(
            "ERR Client names cannot contain spaces, newlines or special characters.");
      }
      if (s) s->name_ = args[2];
      return status_reply("OK");
    }
    if (sub == "getname" && args.size() == 2) {
      return s && !s->name_.empty() ? bulk_reply(s->name_) : null_reply();
    }
    if (sub == "id" && args.size() == 2) {
      return integer_reply(s ? static_cast<std::int64_t>(s->id_) : 0);
    }
    return error_reply(fmt::format(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.", args[1]));
  }
  if (name == "select") {
    if (args.size() != 2) return arity();
    return args[1] == "0" ? status_reply("OK")
                          : error_reply("ERR the model node has only database 0");
  }
  if (name == "auth") {
    return error_reply(
        "ERR AUTH <password> called without any password configured for the default user. Are "
        "you sure your configuration is correct?");
  }
  if (name == "role") {
    if (args.size() != 1) return arity();
    if (role_ == server_role::replica) {
      return aggregate(resp::type::array,
                       {bulk_reply("slave"), bulk_reply(master_host_), integer_reply(master_port_),
                        bulk_reply("connected"), integer_reply(0)});
    }
    if (role_ == server_role::sentinel) {
      std::vector<resp::value> names;
      for (const auto& [monitored_name, m] : monitored_)
        names.push_back(bulk_reply(monitored_name));
      return aggregate(resp::type::array,
                       {bulk_reply("sentinel"), aggregate(resp::type::array, std::move(names))});
    }
    return aggregate(resp::type::array,
                     {bulk_reply("master"), integer_reply(0), aggregate(resp::type::array, {})});
  }
  if (name == "wait") {
    if (args.size() != 3) return arity();
    return integer_reply(0);
  }
  const bool subscribe = name == "subscribe" || name == "ssubscribe";
  const bool unsubscribe = name == "unsubscribe" || name == "sunsubscribe";
  if (s && (subscribe || unsubscribe)) {
    const bool sharded = name.front() == 's' && name[1] == 's';
    const bool sharded_un = name == "sunsubscribe";
    auto& channels = (sharded || sharded_un) ? s->shard_channels_ : s->channels_;
    if (subscribe && args.size() < 2) return arity();
    const auto confirm = [&](std::string_view channel, bool known) {
      resp::value m =
          aggregate(resp::type::push,
                    {bulk_reply(name), known ? bulk_reply(std::string(channel)) : null_reply(),
                     integer_reply(static_cast<std::int64_t>(s->channels_.size() +
                                                             s->shard_channels_.size()))});
      if (!s->resp3_) m.kind = resp::type::array;
      s->push(m);
    };
    if (subscribe) {
      for (std::size_t i = 1; i < args.size(); ++i) {
        channels.insert(args[i]);
        confirm(args[i], true);
      }
    } else if (args.size() >= 2) {
      for (std::size_t i = 1; i < args.size(); ++i) {
        channels.erase(args[i]);
        confirm(args[i], true);
      }
    } else if (channels.empty()) {
      confirm({}, false);
    } else {
      const std::vector<std::string> all(channels.begin(), channels.end());
      for (const auto& channel : all) {
        channels.erase(channel);
        confirm(channel, true);
      }
    }
    // Already sent, each as its own message.
    return aggregate(resp::type::push, {});
  }
  std::string beginning;
  for (std::size_t i = 1; i < args.size() && i < 4; ++i)
    beginning += fmt::format("'{}' ", args[i]);
  return error_reply(
      fmt::format("ERR unknown command '{}', with args beginning with: {}", args[0], beginning));
}

}  // namespace redlock::sim
