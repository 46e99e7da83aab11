#include "ops/lock_requests.hpp"

#include "algo/hash_slot.hpp"
#include "lock/scripts.hpp"
#include "resp/encoder.hpp"
#include "resp/script.hpp"

#include <algorithm>
#include <memory>
#include <span>
#include <string>

namespace redlock::detail {

using boost::system::error_code;

namespace {

// A request that takes or extends the lock with `script`, skipped on an unresponsive node; its
// NOSCRIPT is its answer (see lock_request).
request_rules lock_write(const script& script, bool (*counts)(const resp::value&)) noexcept {
  return {.eval_fallback = &script,
          .noscript_is_final = true,
          .skip_if_unresponsive = true,
          .writes = true,
          .counts_once_replicated = counts,
          .deliver_for = {}};
}

}  // namespace

request_rules rules_of(lock_request kind) noexcept {
  switch (kind) {
    case lock_request::set:
      return {.eval_fallback = nullptr,
              .noscript_is_final = false,
              .skip_if_unresponsive = true,
              .writes = true,
              .counts_once_replicated = &acquire_granted,
              .deliver_for = {}};
    case lock_request::ping:
    case lock_request::read:
      return {.eval_fallback = nullptr,
              .noscript_is_final = false,
              .skip_if_unresponsive = true,
              .writes = false,
              .counts_once_replicated = nullptr,
              .deliver_for = {}};
    case lock_request::set_asking_ttl:
      // Not resent as EVAL: a SET that ran after its round's cleanup release would leave a key
      // behind. The node's vote is lost for this round, and the script is loaded again.
      return lock_write(acquire_script(), &acquire_granted);
    case lock_request::fenced_set:
      return lock_write(fenced_acquire_script(), &acquire_granted);
    case lock_request::slot_set:
      return lock_write(semaphore_acquire_script(), &acquire_granted);
    case lock_request::read_set:
      return lock_write(rw_read_acquire_script(), &acquire_granted);
    case lock_request::write_set:
      return lock_write(rw_write_acquire_script(), &acquire_granted);
    case lock_request::multi_set:
      return lock_write(multi_acquire_script(), &acquire_granted);
    case lock_request::fence_write_back: {
      // Token-checked, so running late does no harm, and resent as EVAL after NOSCRIPT; but its
      // answer is wanted within the validity, and the acquire fails (and releases) when a quorum
      // does not confirm in time.
      auto rules = lock_write(fence_write_back_script(), &script_acted);
      rules.noscript_is_final = false;
      return rules;
    }
    case lock_request::extend:
      return lock_write(extend_script(), &script_acted);
    case lock_request::read_extend:
      return lock_write(rw_read_extend_script(), &script_acted);
    case lock_request::multi_extend:
      return lock_write(multi_extend_script(), &script_acted);
    case lock_request::batch_extend:
      return lock_write(batch_extend_script(), &some_key_extended);
  }
  return {};
}

request_rules release_rules(hold_kind kind, std::chrono::milliseconds key_lifetime) noexcept {
  return {.eval_fallback = &release_script_for(kind),
          .noscript_is_final = false,
          .skip_if_unresponsive = false,
          .writes = false,
          .counts_once_replicated = nullptr,
          // Zero would make it an ordinary request: a key always lives at least a millisecond.
          .deliver_for = std::max(key_lifetime, std::chrono::milliseconds(1))};
}

namespace {

// The release of `held` for one node: its announcement on `channel`, sharded (SPUBLISH) for a
// cluster node.
void encode_hold_release(payload_by_node_kind::bytes& out, const hold_keys& held,
                         std::string_view token, std::string_view channel, bool sharded) {
  using bytes = payload_by_node_kind::bytes;
  const std::string_view scope = sharded ? "shard" : "";
  switch (held.kind) {
    case hold_kind::reader: {
      const std::string_view keys[] = {held.key};
      const std::string_view args[] = {token, channel, scope, held.message};
      out = encode_evalsha_as<bytes>(rw_read_release_script(), keys, args);
      return;
    }
    case hold_kind::writer: {
      const std::string_view keys[] = {held.key, held.mark};
      const std::string_view args[] = {token, channel, scope, held.message, held.mark_id};
      out = encode_evalsha_as<bytes>(rw_write_release_script(), keys, args);
      return;
    }
    case hold_kind::set: {
      std::vector<std::string_view> keys(held.keys.begin(), held.keys.end());
      const std::string_view args[] = {token, channel, scope};
      out =
          encode_evalsha_as<bytes>(multi_release_script(), keys, std::span(args, sharded ? 3 : 2));
      return;
    }
    case hold_kind::lock:
      break;
  }
  // Every release of a lock: its words written directly (resp::encode_words). Without a scope
  // when there is none: the bytes every standalone release has always had.
  const resp::encoded_words call = release_script().call_with_one_key();
  if (sharded) return resp::encode_words_into(out, call, held.key, token, channel, scope);
  resp::encode_words_into(out, call, held.key, token, channel);
}

// The sink of a best-effort release whose answers someone needs: a node that deleted our key, or
// found it no longer ours, is reported. Owned by the requests: freed with the last reference.
class gone_key_reporter final : public reply_sink {
 public:
  explicit gone_key_reporter(key_gone on_gone) : on_gone_(std::move(on_gone)) {}

  void on_reply(std::size_t node, const error_code& ec, const resp::value& reply) override {
    // The release script answers 1 (deleted) or 0 (not ours); anything else tells nothing.
    if (ec || reply.kind != resp::type::integer) return;
    on_gone_(node);
  }
  void last_reference_dropped() noexcept override { delete this; }

 private:
  key_gone on_gone_;
};

}  // namespace

void encode_release_into(payload_by_node_kind& out, const node_set& nodes, const hold_keys& held,
                         std::string_view token, std::string_view channel) {
  // Cluster nodes announce on their shard's channel: their own bytes, and only theirs when every
  // node is one (payload_by_node_kind::for_node never reads `plain` for them then).
  const bool cluster_bytes = nodes.has_cluster_node() && !channel.empty();
  if (!cluster_bytes || nodes.has_plain_node())
    encode_hold_release(out.plain, held, token, channel, false);
  if (cluster_bytes) {
    out.slot = held.slot ? *held.slot : hash_slot(held.key);
    // in_slot, built on the stack when it fits: a release on a cluster node then allocates
    // nothing for its channel.
    const auto tag = hash_tag_of_slot(*out.slot);
    char room[128];
    std::string longer;
    std::string_view shard_channel;
    if (tag.size + channel.size() <= sizeof room) {
      std::copy(tag.text, tag.text + tag.size, room);
      std::copy(channel.begin(), channel.end(), room + tag.size);
      shard_channel = std::string_view(room, tag.size + channel.size());
    } else {
      longer = in_slot(*out.slot, channel);
      shard_channel = longer;
    }
    encode_hold_release(out.for_cluster, held, token, shard_channel, true);
  }
}

payload_by_node_kind encode_release(const node_set& nodes, const hold_keys& held,
                                    std::string_view token, std::string_view channel) {
  payload_by_node_kind bytes;
  encode_release_into(bytes, nodes, held, token, channel);
  return bytes;
}

void release_best_effort(node_set& nodes, const hold_keys& held, std::string_view token,
                         std::string_view channel, std::chrono::milliseconds key_lifetime,
                         const std::vector<bool>* only, key_gone on_gone) {
  auto bytes = encode_release(nodes, held, token, channel);
  // Shared by the requests: nobody else owns these bytes.
  const auto plain = std::make_shared<const std::string>(bytes.plain.begin(), bytes.plain.end());
  const auto for_cluster =
      bytes.for_cluster.empty()
          ? plain
          : std::make_shared<const std::string>(bytes.for_cluster.begin(), bytes.for_cluster.end());
  // Held across the sending, so that it is freed also when no request was sent.
  sink_ref reporter(on_gone ? new gone_key_reporter(std::move(on_gone)) : nullptr);
  reply_sink& sink = reporter ? *reporter.get() : ignore_replies();
  nodes.send(held.key, bytes.slot, plain, for_cluster, sink, 0,
             release_rules(held.kind, key_lifetime), only);
}

}  // namespace redlock::detail
