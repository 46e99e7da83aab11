#include "nodes/node_set.hpp"

#include "algo/hash_slot.hpp"
#include "clock.hpp"
#include "config/options_check.hpp"
#include "lock/scripts.hpp"
#include "lock_handshake.hpp"
#include "nodes/cluster_node.hpp"
#include "nodes/sentinel_node.hpp"
#include "nodes/standalone_node.hpp"
#include "observe.hpp"
#include "redlock/error.hpp"

#include <boost/system/system_error.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <span>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;

namespace {

// Turns the nodes' link reports (connection_options::on_link) into observer::on_node events, on
// changes only: a node that keeps failing to connect is reported down once. Shared by the
// connections' settings, which may outlive the node set while they drain.
class link_reporter {
 public:
  link_reporter(std::shared_ptr<observer> watcher, asio::any_io_executor executor,
                std::vector<std::string> addresses)
      : watcher_(std::move(watcher)),
        executor_(std::move(executor)),
        addresses_(std::move(addresses)),
        last_(addresses_.size()) {}

  void link(std::size_t node, bool up, error_code why) {
    if (last_[node] == up) return;
    last_[node] = up;
    call_observer(
        *watcher_, executor_, &observer::on_node,
        node_event{
            .node = node, .address = addresses_[node], .up = up, .error = up ? error_code{} : why});
  }

 private:
  std::shared_ptr<observer> watcher_;
  asio::any_io_executor executor_;
  std::vector<std::string> addresses_;
  std::vector<std::optional<bool>> last_;  // by node: as last reported
};

}  // namespace

node_set::node_set(asio::any_io_executor executor, std::vector<node_config> nodes,
                   client_options options)
    : executor_(std::move(executor)), options_(std::move(options)) {
  if (auto problem = check_client_options(nodes, options_); !problem.empty()) {
    throw boost::system::system_error(make_error_code(error::invalid_argument),
                                      "redlock: " + problem);
  }
  std::vector<std::string> addresses;
  for (const auto& node : nodes)
    addresses.push_back(node.address());
  peers_ = std::make_shared<peer_registry>(addresses);
  auto connection_settings = connection_options::from(options_);
  prepare_for_lock(connection_settings);
  std::shared_ptr<link_reporter> reporter;
  if (options_.observer)
    reporter = std::make_shared<link_reporter>(options_.observer, executor_, std::move(addresses));
  nodes_.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    has_cluster_node_ = has_cluster_node_ || nodes[i].kind == node_kind::cluster;
    if (reporter) {
      connection_settings.on_link = [reporter, i](bool up, error_code why) {
        reporter->link(i, up, why);
      };
    }
    nodes_.push_back(
        make_lock_node(executor_, std::move(nodes[i]), connection_settings, peers_, i));
  }
}

std::unique_ptr<lock_node> make_lock_node(const asio::any_io_executor& executor, node_config config,
                                          connection_options settings,
                                          const std::shared_ptr<peer_registry>& peers,
                                          std::size_t index) {
  if (config.kind == node_kind::cluster) {
    return std::make_unique<cluster_node>(executor, std::move(config), std::move(settings), peers,
                                          index);
  }
  if (config.kind == node_kind::sentinel) {
    return std::make_unique<sentinel_node>(executor, std::move(config), std::move(settings), peers,
                                           index);
  }
  settings.admit_peer = peer_registry::check_for(peers, index, 0);
  settings.expect = server_kind::standalone;
  settings.refuse_cluster_redirects = true;
  return std::make_unique<standalone_node>(executor, std::move(config), std::move(settings));
}

std::optional<cluster_endpoint> node_set::cluster_master_of(std::size_t node,
                                                            std::uint16_t slot) const {
  if (const auto* cluster = dynamic_cast<const cluster_node*>(nodes_[node].get()))
    return cluster->master_of(slot);
  return std::nullopt;
}

std::optional<node_config> node_set::sentinel_master_of(std::size_t node) const {
  const auto* sentinel = dynamic_cast<const sentinel_node*>(nodes_[node].get());
  if (sentinel == nullptr) return std::nullopt;
  const auto at = parse_endpoint(sentinel->master_address());
  if (!at) return std::nullopt;
  return server_of(nodes_[node]->config(), *at);
}

std::vector<node_config> node_set::configs() const {
  std::vector<node_config> nodes;
  nodes.reserve(nodes_.size());
  for (const auto& node : nodes_)
    nodes.push_back(node->config());
  return nodes;
}

request_options node_set::rules_for(lock_request kind, std::chrono::milliseconds key_lifetime,
                                    hold_kind held) const noexcept {
  request_options per_node;
  per_node.timeout = options_.node_timeout;
  switch (kind) {
    case lock_request::set:
      per_node.skip_if_unresponsive = true;
      per_node.counts_once_replicated = &acquire_granted;
      break;
    case lock_request::ping:
    case lock_request::read:
      per_node.skip_if_unresponsive = true;
      break;
    case lock_request::set_asking_ttl:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &acquire_script();
      per_node.counts_once_replicated = &acquire_granted;
      // Not resent as EVAL: a SET that ran after its round's cleanup release would leave a key
      // behind. The node's vote is lost for this round, and the script is loaded again.
      per_node.noscript_is_final = true;
      break;
    case lock_request::fenced_set:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &fenced_acquire_script();
      per_node.counts_once_replicated = &acquire_granted;
      per_node.noscript_is_final = true;  // as set_asking_ttl
      break;
    case lock_request::slot_set:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &semaphore_acquire_script();
      per_node.counts_once_replicated = &slot_acquire_granted;
      per_node.noscript_is_final = true;  // as set_asking_ttl
      break;
    case lock_request::read_set:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &rw_read_acquire_script();
      per_node.counts_once_replicated = &acquire_granted;
      per_node.noscript_is_final = true;  // as set_asking_ttl
      break;
    case lock_request::write_set:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &rw_write_acquire_script();
      per_node.counts_once_replicated = &acquire_granted;
      per_node.noscript_is_final = true;  // as set_asking_ttl
      break;
    case lock_request::multi_set:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &multi_acquire_script();
      per_node.counts_once_replicated = &acquire_granted;
      per_node.noscript_is_final = true;  // as set_asking_ttl
      break;
    case lock_request::fence_write_back:
      // Token-checked, so running late does no harm; but its answer is wanted within the
      // validity, and the acquire fails (and releases) when a quorum does not confirm in time.
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &fence_write_back_script();
      per_node.counts_once_replicated = &script_acted;
      break;
    case lock_request::extend:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &extend_script();
      per_node.counts_once_replicated = &script_acted;
      per_node.noscript_is_final = true;
      break;
    case lock_request::read_extend:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &rw_read_extend_script();
      per_node.counts_once_replicated = &script_acted;
      per_node.noscript_is_final = true;
      break;
    case lock_request::multi_extend:
      per_node.skip_if_unresponsive = true;
      per_node.eval_fallback = &multi_extend_script();
      per_node.counts_once_replicated = &script_acted;
      per_node.noscript_is_final = true;  // as extend
      break;
    case lock_request::release:
      per_node.eval_fallback = &release_script_for(held);
      // Zero would make it an ordinary request: a key always lives at least a millisecond.
      per_node.deliver_for = std::max(key_lifetime, std::chrono::milliseconds(1));
      break;
  }
  return per_node;
}

namespace {

// Requests that write the lock's keys: with node_config::wait_replicas they count only once
// replicated. A release is not one: it must never wait behind a replica.
bool writes_the_lock(lock_request kind) noexcept {
  return kind != lock_request::release && kind != lock_request::ping && kind != lock_request::read;
}

}  // namespace

template <typename Payload>
void node_set::send_each(std::string_view key, const Payload& payload, reply_sink& sink,
                         std::size_t first_tag, lock_request kind, const request_options& rules,
                         const std::vector<bool>* only) {
  const auto now = lock_clock::now();
  const bool writes = writes_the_lock(kind);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (only && !(*only)[i]) continue;
    auto& node = *nodes_[i];
    const lock_node::request what{
        .key = key, .rules = rules, .replicas = writes ? node.config().wait_replicas : 0u};
    node.exec(what, payload, sink, first_tag + i, now);
  }
}

void node_set::send(std::string_view key, std::string_view payload, reply_sink& sink,
                    std::size_t first_tag, lock_request kind, const std::vector<bool>* only,
                    std::chrono::milliseconds key_lifetime) {
  send_each(key, payload, sink, first_tag, kind, rules_for(kind, key_lifetime), only);
}

void node_set::send(std::string_view key, const shared_payload& payload, reply_sink& sink,
                    std::size_t first_tag, lock_request kind, const std::vector<bool>* only,
                    std::chrono::milliseconds key_lifetime) {
  send_each(key, payload, sink, first_tag, kind, rules_for(kind, key_lifetime), only);
}

namespace {

// The sink of a best-effort release whose answers someone needs: a node that deleted our key, or
// found it no longer ours, is reported. Owned by the requests: freed with the last reference.
class gone_key_reporter final : public reply_sink {
 public:
  explicit gone_key_reporter(node_set::key_gone on_gone) : on_gone_(std::move(on_gone)) {}

  void on_reply(std::size_t node, error_code ec, const resp::value& reply) override {
    // The release script answers 1 (deleted) or 0 (not ours); anything else tells nothing.
    if (ec || reply.kind != resp::type::integer) return;
    on_gone_(node);
  }
  void add_ref() noexcept override { ++refs_; }
  void drop_ref() noexcept override {
    if (--refs_ == 0) delete this;
  }

 private:
  node_set::key_gone on_gone_;
  unsigned refs_ = 0;
};

}  // namespace

namespace {

// The release of `held` for one node: its announcement on `channel`, sharded (SPUBLISH) for a
// cluster node.
std::string encode_hold_release(const hold_keys& held, std::string_view token,
                                std::string_view channel, bool sharded) {
  const std::string_view scope = sharded ? "shard" : "";
  switch (held.kind) {
    case hold_kind::reader: {
      const std::string_view keys[] = {held.key};
      const std::string_view args[] = {token, channel, scope, held.message};
      return encode_evalsha(rw_read_release_script(), keys, args);
    }
    case hold_kind::writer: {
      const std::string_view keys[] = {held.key, held.mark};
      const std::string_view args[] = {token, channel, scope, held.message, held.mark_id};
      return encode_evalsha(rw_write_release_script(), keys, args);
    }
    case hold_kind::set: {
      std::vector<std::string_view> keys(held.keys.begin(), held.keys.end());
      const std::string_view args[] = {token, channel, scope};
      return encode_evalsha(multi_release_script(), keys, std::span(args, sharded ? 3 : 2));
    }
    case hold_kind::lock:
      break;
  }
  const std::string_view keys[] = {held.key};
  const std::string_view args[] = {token, channel, scope};
  // Without a scope when there is none: the bytes every standalone release has always had.
  return encode_evalsha(release_script(), keys, std::span(args, sharded ? 3 : 2));
}

}  // namespace

release_request node_set::encode_release(const hold_keys& held, std::string_view token,
                                         std::string_view channel) const {
  release_request bytes{
      .plain = encode_hold_release(held, token, channel, false), .sharded = {}, .kind = held.kind};
  if (has_cluster_node_ && !channel.empty()) {
    const auto shard_channel = in_slot(hash_slot(held.key), channel);
    bytes.sharded = encode_hold_release(held, token, shard_channel, true);
  }
  return bytes;
}

void node_set::send_release(std::string_view key, const release_request& bytes, reply_sink& sink,
                            std::size_t first_tag, const std::vector<bool>* only,
                            std::chrono::milliseconds key_lifetime) {
  const auto rules = rules_for(lock_request::release, key_lifetime, bytes.kind);
  const auto now = lock_clock::now();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (only && !(*only)[i]) continue;
    auto& node = *nodes_[i];
    const std::string_view payload = bytes.for_node(node.config());
    node.exec({.key = key, .rules = rules, .replicas = 0}, payload, sink, first_tag + i, now);
  }
}

void node_set::release_best_effort(const hold_keys& held, std::string_view token,
                                   std::string_view channel, std::chrono::milliseconds key_lifetime,
                                   const std::vector<bool>* only, key_gone on_gone) {
  const std::string_view key = held.key;
  auto bytes = encode_release(held, token, channel);
  // Shared by the requests: nobody else owns these bytes.
  const auto plain = std::make_shared<const std::string>(std::move(bytes.plain));
  const auto sharded =
      bytes.sharded.empty() ? plain : std::make_shared<const std::string>(std::move(bytes.sharded));
  const auto rules = rules_for(lock_request::release, key_lifetime, held.kind);
  // Held across the sending, so that it is freed also when no request was sent.
  sink_ref reporter(on_gone ? new gone_key_reporter(std::move(on_gone)) : nullptr);
  reply_sink& sink = reporter ? *reporter.get() : ignore_replies();
  const auto now = lock_clock::now();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (only && !(*only)[i]) continue;
    auto& node = *nodes_[i];
    const auto& payload = node.config().kind == node_kind::cluster ? sharded : plain;
    node.exec({.key = key, .rules = rules, .replicas = 0}, payload, sink, i, now);
  }
}

void node_set::watch_masters(const master_moved_at& on_moved) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->watch_masters([on_moved, i](const master_moved& moved) { on_moved(i, moved); });
  }
}

error_code node_set::permanent_failure(std::size_t i) const noexcept {
  return nodes_[i]->permanent_failure();
}

const std::string& node_set::last_error(std::size_t i) const noexcept {
  return nodes_[i]->last_error();
}

const std::string& node_set::duplicate_nodes() const noexcept {
  return peers_->refusal();
}

void node_set::close_when_idle(std::chrono::milliseconds bound) {
  // One that never wrote a request closes at once: nothing of ours can be on that node.
  for (auto& node : nodes_)
    node->close_when_idle(bound);
}

namespace {

// A connection's failure text starts with the node's address, which the caller has just written.
std::string_view without_address(std::string_view text, std::string_view address) {
  if (text.starts_with(address) && text.substr(address.size()).starts_with(": ")) {
    text.remove_prefix(address.size() + 2);
  }
  return text;
}

}  // namespace

std::string node_set::describe(const node_answers& answers, std::string_view yes,
                               std::string_view no, const std::vector<std::string>* pending_texts,
                               std::string_view keys) const {
  std::string out;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (i != 0) out += "; ";
    const std::string address = nodes_[i]->config().address();
    out += address;
    switch (answers[i].what) {
      case node_answer::kind::yes:
        out += fmt::format(" {}", yes);
        break;
      case node_answer::kind::no:
        out += fmt::format(" {}", no);
        break;
      case node_answer::kind::failed:
        // Sent and refused by the server (a connect refused for good fails requests unsent).
        if (answers[i].failure == error::permission_denied && !answers[i].unsent && !keys.empty()) {
          // A key pattern of the node's ACL user left out a key of this request: say which user
          // and which keys, or the user is left guessing (the server names neither).
          const auto& user = nodes_[i]->config().username;
          out += fmt::format(" failed (ACL user \"{}\" may not use every key of {}: {})",
                             user.empty() ? "default" : user, keys,
                             without_address(answers[i].detail, address));
          break;
        }
        out += fmt::format(" failed ({})", without_address(answers[i].detail, address));
        break;
      case node_answer::kind::pending:
        if (pending_texts != nullptr && !(*pending_texts)[i].empty()) {
          out += fmt::format(" failing ({})", without_address((*pending_texts)[i], address));
        } else {
          out += " not awaited (the outcome was certain without it)";
        }
        break;
    }
  }
  return out;
}

}  // namespace redlock::detail
