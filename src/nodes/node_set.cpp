#include "nodes/node_set.hpp"

#include "algo/hash_slot.hpp"
#include "call_observer.hpp"
#include "clock.hpp"
#include "config/options_check.hpp"
#include "nodes/cluster_node.hpp"
#include "nodes/sentinel_node.hpp"
#include "nodes/standalone_node.hpp"
#include "redlock/error.hpp"

#include <boost/system/system_error.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <optional>
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
                   client_options options, connection_options settings, const node_factory& make)
    : executor_(std::move(executor)), options_(std::move(options)) {
  if (auto problem = check_client_options(nodes, options_); !problem.empty()) {
    throw boost::system::system_error(make_error_code(error::invalid_argument),
                                      "redlock: " + problem);
  }
  std::vector<std::string> addresses;
  for (const auto& node : nodes)
    addresses.push_back(node.address());
  peers_ = std::make_shared<peer_registry>(addresses);
  auto connection_settings = std::move(settings);
  std::shared_ptr<link_reporter> reporter;
  if (options_.observer)
    reporter = std::make_shared<link_reporter>(options_.observer, executor_, std::move(addresses));
  nodes_.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    has_cluster_node_ = has_cluster_node_ || nodes[i].kind == node_kind::cluster;
    has_plain_node_ = has_plain_node_ || nodes[i].kind != node_kind::cluster;
    if (reporter) {
      connection_settings.on_link = [reporter, i](bool up, error_code why) {
        reporter->link(i, up, why);
      };
    }
    nodes_.push_back(make(executor_, std::move(nodes[i]), connection_settings, peers_, i));
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

std::shared_ptr<release_announcements> node_set::listen_for_releases(
    std::string channel, release_announcements::events on) {
  std::vector<lock_node*> nodes;
  for (const auto& node : nodes_)
    nodes.push_back(node.get());
  return release_announcements::create(executor_, std::move(nodes), std::move(channel),
                                       std::move(on));
}

request_options node_set::options_of(const request_rules& rules) const noexcept {
  request_options per_node;
  per_node.timeout = std::max(options_.node_timeout, rules.wait_at_least);
  per_node.eval_fallback = rules.eval_fallback;
  per_node.noscript_is_final = rules.noscript_is_final;
  per_node.skip_if_unresponsive = rules.skip_if_unresponsive;
  per_node.counts_once_replicated = rules.counts_once_replicated;
  per_node.deliver_for = rules.deliver_for;
  return per_node;
}

template <typename PayloadFor>
std::chrono::steady_clock::time_point node_set::send_each(std::string_view key,
                                                          std::optional<std::uint16_t> known_slot,
                                                          const PayloadFor& payload_for,
                                                          reply_sink& sink, std::size_t first_tag,
                                                          const request_rules& rules,
                                                          const std::vector<bool>* only) {
  const auto per_node = options_of(rules);
  const auto now = lock_clock::now();
  // Hashed once for every cluster node of the fan-out, if the caller had not.
  std::optional<std::uint16_t> slot;
  if (has_cluster_node_ && !key.empty()) slot = known_slot ? *known_slot : hash_slot(key);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (only && !(*only)[i]) continue;
    auto& node = *nodes_[i];
    if (connection* direct = node.direct_connection()) {
      direct->exec_direct(payload_for(node.config()), per_node, sink, first_tag + i, now);
      continue;
    }
    const lock_node::request what{.key = key,
                                  .rules = per_node,
                                  .replicas = rules.writes ? node.config().wait_replicas : 0u,
                                  .slot = slot};
    node.exec(what, payload_for(node.config()), sink, first_tag + i, now);
  }
  return now;
}

std::chrono::steady_clock::time_point node_set::send(std::string_view key, std::string_view payload,
                                                     reply_sink& sink, std::size_t first_tag,
                                                     const request_rules& rules,
                                                     const std::vector<bool>* only,
                                                     std::optional<std::uint16_t> known_slot) {
  return send_each(
      key, known_slot, [payload](const node_config&) { return payload; }, sink, first_tag, rules,
      only);
}

std::chrono::steady_clock::time_point node_set::send(std::string_view key,
                                                     const shared_payload& payload,
                                                     reply_sink& sink, std::size_t first_tag,
                                                     const request_rules& rules,
                                                     const std::vector<bool>* only,
                                                     std::optional<std::uint16_t> known_slot) {
  return send_each(
      key, known_slot, [&payload](const node_config&) -> const shared_payload& { return payload; },
      sink, first_tag, rules, only);
}

std::chrono::steady_clock::time_point node_set::send(std::string_view key,
                                                     const payload_by_node_kind& payload,
                                                     reply_sink& sink, std::size_t first_tag,
                                                     const request_rules& rules,
                                                     const std::vector<bool>* only) {
  return send_each(
      key, payload.slot,
      [&payload](const node_config& node) { return std::string_view(payload.for_node(node)); },
      sink, first_tag, rules, only);
}

std::chrono::steady_clock::time_point node_set::send(
    std::string_view key, std::optional<std::uint16_t> known_slot, const shared_payload& plain,
    const shared_payload& for_cluster, reply_sink& sink, std::size_t first_tag,
    const request_rules& rules, const std::vector<bool>* only) {
  return send_each(
      key, known_slot,
      [&](const node_config& node) -> const shared_payload& {
        return node.kind == node_kind::cluster ? for_cluster : plain;
      },
      sink, first_tag, rules, only);
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
