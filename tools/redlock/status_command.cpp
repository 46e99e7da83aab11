#include "status_command.hpp"

#include "algo/hash_slot.hpp"
#include "algo/inspection.hpp"
#include "arguments.hpp"
#include "exit_codes.hpp"
#include "lock/key_names.hpp"
#include "lock/scripts.hpp"
#include "lock_handshake.hpp"
#include "messages.hpp"
#include "net/connection.hpp"
#include "nodes/cluster_node.hpp"
#include "nodes/node_set.hpp"
#include "nodes/sentinel_node.hpp"
#include "nodes/standalone_node.hpp"
#include "resp/encoder.hpp"
#include "resp/value.hpp"
#include "rw_status.hpp"
#include "set_status.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::cli {
namespace {

namespace asio = boost::asio;

// A connection's failure text starts with the node's address, which our line shows already.
std::string without_address(std::string_view text, std::string_view address) {
  if (text.starts_with(address) && text.substr(address.size()).starts_with(": ")) {
    text.remove_prefix(address.size() + 2);
  }
  return one_line(text);
}

// Why `node` could not be asked, from what the connection or the node said: the text (without the
// node's address), and whether the fix is the node's configuration (redlock::condition::
// node_failure: a wrong password, a missing ACL permission, a port that is not Redis, a URL of the
// wrong kind) rather than the network. Empty when the node answered the question.
struct node_failure {
  std::string text;
  bool misconfigured = false;
};

std::optional<node_failure> failure_of(const node_config& node, error_code ec,
                                       const resp::value& reply) {
  const std::string address = node.address();
  if (ec) {
    const std::string text =
        reply.text.empty() ? std::string() : without_address(reply.text, address);
    if (ec == condition::node_failure) return node_failure{node_failure_reason(ec, text), true};
    return node_failure{text.empty() ? ec.message() : text, false};
  }
  return std::nullopt;
}

node_report interpret(const node_config& node, error_code ec, const resp::value& reply) {
  node_report report;
  report.address = node.address();
  if (auto failure = failure_of(node, ec, reply)) {
    report.error = std::move(failure->text);
    report.misconfigured = failure->misconfigured;
    return report;
  }
  if (reply.is_error()) {
    // WRONGTYPE: the key exists but holds no string; it blocks the lock like any key.
    if (reply.error_code_word() == "WRONGTYPE") {
      report.held = true;
      report.note = "not a lock key (it holds a value of another type)";
    } else {
      report.error = fmt::format("error reply: {}", one_line(reply.text));
    }
    return report;
  }
  if (reply.kind != resp::type::array || reply.elements.size() != 2 ||
      reply.elements[1].kind != resp::type::integer) {
    report.error = fmt::format("unexpected reply: {}", one_line(resp::to_debug_string(reply)));
    return report;
  }
  const auto& value = reply.elements[0];
  report.pttl_ms = reply.elements[1].integer;
  report.held = !value.is_null();
  if (report.held) report.value = value.text;
  return report;
}

// One node's answer to read_holdings_script (the library's async_inspect reads the same way: value
// and PTTL of every key in one step), as a report per key. A reply that is not one element per
// slot (an error reply for the whole script, say) is each slot's answer.
std::vector<node_report> interpret_slots(const node_config& node, error_code ec,
                                         const resp::value& reply, std::size_t slots) {
  std::vector<node_report> reports;
  const bool per_slot = !ec && reply.kind == resp::type::array && reply.elements.size() == slots;
  for (std::size_t slot = 0; slot < slots; ++slot) {
    reports.push_back(interpret(node, ec, per_slot ? reply.elements[slot] : reply));
  }
  return reports;
}

// A reply of a lock node handed to a function, posted: a sink runs inside the connection's read
// loop, where closing the connections (the last answer does) must not happen. The requests hold
// the sink; it is freed with the last.
class reply_function final : public detail::reply_sink {
 public:
  reply_function(asio::any_io_executor executor,
                 std::function<void(error_code, const resp::value&)> on_reply)
      : executor_(std::move(executor)), on_reply_(std::move(on_reply)) {}
  void on_reply(std::size_t, const error_code& ec, const resp::value& reply) override {
    asio::post(executor_, [on_reply = on_reply_, ec, reply] { on_reply(ec, reply); });
  }
  void last_reference_dropped() noexcept override { delete this; }

 private:
  asio::any_io_executor executor_;
  std::function<void(error_code, const resp::value&)> on_reply_;
};

void exec(const asio::any_io_executor& executor, detail::lock_node& node, std::string_view key,
          std::span<const std::string_view> command, const detail::request_options& rules,
          std::function<void(error_code, const resp::value&)> on_reply) {
  std::string bytes;
  resp::encode_command(bytes, command);
  detail::sink_ref sink(new reply_function(executor, std::move(on_reply)));
  node.exec({.key = key, .rules = rules}, std::make_shared<const std::string>(std::move(bytes)),
            *sink.get(), 0, std::chrono::steady_clock::now());
}

std::string describe_connection(const node_config& node, const detail::connection& connection);

// A cluster node: the shard master that serves the key now. A standalone node as its connection.
std::string describe_link(const detail::lock_node& lock_node, std::string_view key) {
  const auto& node = lock_node.config();
  if (const auto* cluster = dynamic_cast<const detail::cluster_node*>(&lock_node)) {
    const auto master = cluster->master_for(key);
    return fmt::format("cluster{}, slot {} on {}", node.tls.enabled ? ", tls" : "",
                       detail::hash_slot(key), master.empty() ? "no known master" : master);
  }
  if (const auto* sentinel = dynamic_cast<const detail::sentinel_node*>(&lock_node)) {
    const auto master = sentinel->master_address();
    if (master.empty()) {
      return fmt::format("sentinel{}, no master named yet", node.tls.enabled ? ", tls" : "");
    }
    const auto change = sentinel->last_master_change();
    const std::string epoch =
        change.config_epoch ? fmt::format(", config epoch {}", *change.config_epoch) : "";
    return fmt::format("sentinel{}, master {} since {:%Y-%m-%d %H:%M:%S} UTC{}",
                       node.tls.enabled ? ", tls" : "", master,
                       fmt::gmtime(std::chrono::system_clock::to_time_t(change.since)), epoch);
  }
  return describe_connection(node, static_cast<const detail::standalone_node&>(lock_node).link());
}

// For a TLS node the name its certificate was verified against on this connection, so that a
// node reached with verification off, or not reached at all, does not claim it.
std::string describe_connection(const node_config& node, const detail::connection& connection) {
  if (!node.unix_path.empty()) return "unix socket";
  if (!node.tls.enabled) return {};
  const std::string& verified = connection.tls_verified_name();
  if (!verified.empty()) return "tls, verified as " + verified;
  return node.tls.verify_peer ? "tls" : "tls, NOT verified";
}

// Each key as `status` shows a lock: a line per node, then the verdict on that key (and its hint).
// The slots of a semaphore, or the resources of a set, are blocks of those, apart by an empty
// line, followed by their summary. The counts of nodes that could not be asked come last, once.
void print_text(std::span<const std::vector<node_report>> reports,
                std::span<const status_verdict> verdicts, std::string_view summary,
                std::span<const std::string> counts) {
  for (std::size_t k = 0; k < verdicts.size(); ++k) {
    if (k > 0) fmt::print("\n");
    for (const auto& report : reports[k])
      fmt::print("{}\n", format_node_report(report));
    fmt::print("{}\n", verdicts[k].line);
    if (!verdicts[k].hint.empty()) fmt::print("hint: {}\n", verdicts[k].hint);
  }
  if (!summary.empty()) fmt::print("\n{}\n", summary);
  for (const auto& line : counts)
    fmt::print("{}\n", line);
}

// --json: the same facts in the same order, one object a line; the counts are fields of the
// verdicts and of the summary.
void print_json(std::span<const std::vector<node_report>> reports,
                std::span<const status_verdict> verdicts, std::string_view summary) {
  for (std::size_t k = 0; k < verdicts.size(); ++k) {
    for (std::size_t i = 0; i < reports[k].size(); ++i)
      fmt::print("{}\n", json_of(reports[k][i], i, verdicts[k].resource));
    fmt::print("{}\n", json_of(verdicts[k]));
  }
  if (!summary.empty()) fmt::print("{}\n", summary);
}

// What every node answered to one read, and what status shows beside it.
struct node_answer {
  error_code ec;
  resp::value reply;
  std::string link;                      // how the node was reached (describe_link)
  std::optional<long long> subscribers;  // waiting clients (node_report::subscribers)
};

// Sends `command` (its keys in the hash slot of `key`) to every node, and asks each how many
// clients wait for a release there; waits for every answer, each within options.timeout.
std::vector<node_answer> ask_every_node(const status_options& options,
                                        std::span<const std::string_view> command,
                                        const std::string& key) {
  asio::io_context io;
  detail::connection_options settings;
  settings.connect_timeout = options.timeout;
  settings.client_name = "redlock-cli-status";
  // The handshake a lock client makes: scripts loaded, and the ACL user's permissions for every
  // command the lock sends probed, so that a node `run` could not use shows up here as
  // misconfigured, naming what is wrong, instead of answering the read below as if it were fine.
  detail::prepare_for_lock(settings);
  detail::request_options request;
  request.timeout = options.timeout;

  const auto& nodes = options.nodes;
  std::vector<node_answer> answers(nodes.size());
  std::vector<std::unique_ptr<detail::lock_node>> lock_nodes;
  std::vector<std::string> addresses;
  for (const auto& node : nodes)
    addresses.push_back(node.address());
  const auto peers = std::make_shared<detail::peer_registry>(std::move(addresses));
  std::size_t pending = 2 * nodes.size();
  // A sentinel node asks the sentinels since when they name its master beside the requests, and
  // that answer may come after theirs: each link is described once every such account is in (or
  // the timeout has passed), then the connections are closed, which lets the io_context run out
  // of work.
  asio::steady_timer settling(io);
  const auto settle_by = std::chrono::steady_clock::now() + options.timeout;
  std::function<void()> finish = [&] {
    const bool unsettled = std::any_of(lock_nodes.begin(), lock_nodes.end(), [](const auto& node) {
      const auto* sentinel = dynamic_cast<const detail::sentinel_node*>(node.get());
      return sentinel != nullptr && !sentinel->master_address().empty() &&
             !sentinel->master_change_settled();
    });
    if (unsettled && std::chrono::steady_clock::now() < settle_by) {
      settling.expires_after(std::chrono::milliseconds(2));
      settling.async_wait([&](error_code) { finish(); });
      return;
    }
    for (std::size_t i = 0; i < lock_nodes.size(); ++i)
      answers[i].link = describe_link(*lock_nodes[i], key);
    for (const auto& node : lock_nodes)
      node->close_when_idle(std::chrono::milliseconds(0));
  };
  // Each request has its deadline, so the last answer comes within the timeout.
  const auto answered = [&] {
    if (--pending == 0) finish();
  };
  const std::string channel = client_options{}.release_channel;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    lock_nodes.push_back(detail::make_lock_node(io.get_executor(), nodes[i], settings, peers, i));
    exec(io.get_executor(), *lock_nodes[i], key, command, request,
         [&, i](error_code ec, const resp::value& reply) {
           answers[i].ec = ec;
           answers[i].reply = reply;
           answered();
         });
    // ["redlock:released", N]: how many clients wait for some lock on this node. A cluster's
    // waiters subscribe to the shard channel of the key's slot (release_announcements), on the
    // master that serves it, where the request about that channel goes.
    const bool cluster = nodes[i].kind == node_kind::cluster;
    const std::string shard_channel =
        cluster ? detail::in_slot(detail::hash_slot(key), channel) : std::string();
    const std::string_view numsub[] = {"PUBSUB", "NUMSUB", channel};
    const std::string_view shardnumsub[] = {"PUBSUB", "SHARDNUMSUB", shard_channel};
    exec(io.get_executor(), *lock_nodes[i], shard_channel,
         cluster ? std::span<const std::string_view>(shardnumsub)
                 : std::span<const std::string_view>(numsub),
         request, [&, i](error_code ec, const resp::value& reply) {
           if (!ec && reply.elements.size() == 2 && reply.elements[1].kind == resp::type::integer) {
             answers[i].subscribers = reply.elements[1].integer;
           }
           answered();
         });
  }
  io.run();
  return answers;
}

// On a Redis Cluster node one script reads the keys of one hash slot only (CROSSSLOT): the
// resources of a set must share one, as `run` needs them to.
void check_one_slot(const status_options& options) {
  const bool cluster =
      std::any_of(options.nodes.begin(), options.nodes.end(),
                  [](const node_config& n) { return n.kind == node_kind::cluster; });
  if (!cluster) return;
  const auto slot = detail::hash_slot(options.resources.front());
  for (const auto& resource : options.resources) {
    if (detail::hash_slot(resource) != slot) {
      throw usage_error(fmt::format(
          "{} are in several hash slots, and a Redis Cluster node reads (and `run` sets) the keys "
          "of a set in one script, which needs one slot; give them one hash tag, as in "
          "\"{{acct}}:1\" and \"{{acct}}:2\"",
          options.resource));
    }
  }
}

// A lock, the slots of a semaphore (--permits) or a set of locks (several RESOURCEs): every key
// read in one step per node (read_holdings_script; the library's async_inspect reads the same
// way), each key judged as a lock.
int key_status(const status_options& options) {
  std::vector<std::string> keys;
  if (options.permits) {
    for (std::size_t slot = 0; slot < *options.permits; ++slot)
      keys.push_back(detail::semaphore_slot_key(options.resource, slot));
  } else {
    keys = options.resources;
    if (keys.size() > 1) check_one_slot(options);
  }
  const std::string key_count = std::to_string(keys.size());
  std::vector<std::string_view> read = {"EVAL", detail::read_holdings_script, key_count};
  read.insert(read.end(), keys.begin(), keys.end());
  const auto answers = ask_every_node(options, read, keys.front());

  // reports[k][i]: what node i said about keys[k].
  std::vector<std::vector<node_report>> reports(keys.size(),
                                                std::vector<node_report>(options.nodes.size()));
  for (std::size_t i = 0; i < options.nodes.size(); ++i) {
    auto per_key = interpret_slots(options.nodes[i], answers[i].ec, answers[i].reply, keys.size());
    for (std::size_t k = 0; k < keys.size(); ++k) {
      reports[k][i] = std::move(per_key[k]);
      reports[k][i].link = answers[i].link;
      reports[k][i].subscribers = answers[i].subscribers;
    }
  }
  std::vector<status_verdict> verdicts;
  for (std::size_t k = 0; k < keys.size(); ++k)
    verdicts.push_back(judge_status(keys[k], reports[k]));

  std::string summary;
  std::vector<std::string> counts = verdicts.front().counts;
  bool enough_reachable = verdicts.front().enough_reachable;
  if (options.permits) {
    const auto semaphore = judge_semaphore(options.resource, verdicts);
    summary = options.json ? json_of(semaphore) : semaphore.line;
    enough_reachable = semaphore.enough_reachable;
  } else if (keys.size() > 1) {
    const auto set = judge_set(options.resource, verdicts);
    summary = options.json ? json_of(set) : set.line;
    enough_reachable = set.enough_reachable;
  }
  if (options.json) {
    print_json(reports, verdicts, summary);
  } else {
    print_text(reports, verdicts, summary, counts);
  }
  std::fflush(stdout);
  return enough_reachable ? 0 : exit_code::failure;
}

// --read / --write NAME: the three keys of a read-write lock read in one step per node
// (rw_read_script), judged as readers and a writer.
int rw_status(const status_options& options) {
  const auto keys = rw_status_keys(options.resource);
  std::vector<std::string_view> read = {"EVAL", rw_read_script, "3"};
  read.insert(read.end(), keys.begin(), keys.end());
  const auto answers = ask_every_node(options, read, keys.front());

  std::vector<rw_node_report> reports;
  for (std::size_t i = 0; i < options.nodes.size(); ++i) {
    const auto& node = options.nodes[i];
    rw_node_report report;
    if (auto failure = failure_of(node, answers[i].ec, answers[i].reply)) {
      report.address = node.address();
      report.error = std::move(failure->text);
      report.misconfigured = failure->misconfigured;
    } else {
      report = read_rw_node(node.address(), answers[i].reply);
    }
    report.link = answers[i].link;
    report.subscribers = answers[i].subscribers;
    reports.push_back(std::move(report));
  }
  const auto verdict = judge_rw(options.resource, reports);
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (options.json) {
      fmt::print("{}\n", json_of(reports[i], i, options.resource));
    } else {
      fmt::print("{}\n", format_rw_node(reports[i]));
    }
  }
  fmt::print("{}\n", options.json ? json_of(verdict) : verdict.line);
  if (!options.json) {
    for (const auto& line : verdict.counts)
      fmt::print("{}\n", line);
  }
  std::fflush(stdout);
  return verdict.enough_reachable ? 0 : exit_code::failure;
}

}  // namespace

int status_command(const status_options& options) {
  return options.side ? rw_status(options) : key_status(options);
}

}  // namespace redlock::cli
