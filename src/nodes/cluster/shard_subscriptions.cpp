#include "nodes/cluster/shard_subscriptions.hpp"

#include "algo/hash_slot.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <utility>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

std::shared_ptr<shard_subscriptions> shard_subscriptions::create(
    asio::any_io_executor executor, node_config cluster, connection_options settings,
    std::string channel, slot_master_fn slot_master, events on) {
  return std::shared_ptr<shard_subscriptions>(
      new shard_subscriptions(std::move(executor), std::move(cluster), std::move(settings),
                              std::move(channel), std::move(slot_master), std::move(on)));
}

shard_subscriptions::shard_subscriptions(asio::any_io_executor executor, node_config cluster,
                                         connection_options settings, std::string channel,
                                         slot_master_fn slot_master, events on)
    : executor_(std::move(executor)),
      cluster_(std::move(cluster)),
      settings_(std::move(settings)),
      channel_(std::move(channel)),
      slot_master_(std::move(slot_master)),
      on_(std::move(on)),
      retry_timer_(executor_) {
  settings_.subscribe_channel.clear();
  settings_.resp3 = true;
  if (cluster_.unix_path.empty()) seeds_.push_back(cluster_endpoint{cluster_.host, cluster_.port});
  for (const auto& seed : cluster_.seeds) {
    if (auto at = parse_endpoint(seed);
        at && std::find(seeds_.begin(), seeds_.end(), *at) == seeds_.end())
      seeds_.push_back(*at);
  }
}

std::optional<cluster_endpoint> shard_subscriptions::where_to_ask(std::uint16_t slot,
                                                                  slot_subscription& sub) {
  auto routed = slot_master_ ? slot_master_(slot) : std::nullopt;
  if (routed && routed != sub.failed_at) return routed;
  // The routes know nothing, or name where it just failed: a seed that did not, whose MOVED
  // names the slot's master.
  for (std::size_t tried = 0; tried < seeds_.size(); ++tried) {
    const auto& seed = seeds_[sub.next_seed++ % seeds_.size()];
    if (seed != sub.failed_at) return seed;
  }
  return routed;
}

void shard_subscriptions::want(std::uint16_t slot) {
  if (closed_) return;
  auto [it, added] = slots_.try_emplace(slot);
  ++it->second.wanted;
  if (added) subscribe(slot);
}

void shard_subscriptions::unwant(std::uint16_t slot) {
  // The subscription itself stays (see the class comment).
  const auto it = slots_.find(slot);
  if (it != slots_.end() && it->second.wanted > 0) --it->second.wanted;
}

shard_subscriptions::state shard_subscriptions::of(std::uint16_t slot) const noexcept {
  const auto it = slots_.find(slot);
  return it == slots_.end() ? state::off : it->second.current;
}

void shard_subscriptions::close() {
  closed_ = true;
  retry_timer_.cancel();
  for (auto& link : links_)
    link.conn->close();
  links_.clear();
  slots_.clear();
}

void shard_subscriptions::subscribe(std::uint16_t slot) {
  auto& sub = slots_[slot];
  sub.attempt = ++attempts_;
  if (!sub.at) sub.at = where_to_ask(slot, sub);
  if (!sub.at) {
    // A cluster reached over a Unix socket names no master we could reach: nothing to follow.
    return lost(slot, sub, state::down);
  }
  const std::string channel = in_slot(slot, channel_);
  request_options rules;
  rules.timeout = settings_.connect_timeout * 2;
  rules.reply_is_push = true;
  link_to(*sub.at).conn->async_exec(
      {"SSUBSCRIBE", channel}, rules,
      asio::bind_executor(executor_, [weak = weak_from_this(), slot, attempt = sub.attempt](
                                         error_code ec, resp::value reply) {
        if (auto self = weak.lock()) self->on_answer(slot, attempt, ec, reply);
      }));
}

void shard_subscriptions::on_answer(std::uint16_t slot, std::uint64_t attempt, const error_code& ec,
                                    const resp::value& reply) {
  const auto it = slots_.find(slot);
  if (closed_ || it == slots_.end() || it->second.attempt != attempt) return;
  auto& sub = it->second;
  if (!ec && reply.kind == resp::type::push) {
    sub.redirects = 0;
    sub.failed_at.reset();
    sub.current = state::subscribed;
    retry_delay_ = {};
    report(slot, true);
    return prune_links();
  }
  if (!ec) {
    if (const auto redirect = read_redirect(reply, sub.at ? sub.at->host : std::string_view{});
        redirect && sub.redirects < max_redirects) {
      // MOVED: the slot lives there now. ASK: it is being moved there; its announcements still
      // come from here until the move ends, which ends this subscription, so that one follows.
      ++sub.redirects;
      sub.at = redirect->target;
      subscribe(slot);
      return prune_links();
    }
  }
  lost(slot, sub, state::down);
}

void shard_subscriptions::lost(std::uint16_t slot, slot_subscription& sub, state now) {
  const bool was_subscribed = sub.current == state::subscribed;
  const bool reported_before = sub.current == state::down;
  sub.current = now;
  if (now == state::down) sub.failed_at = sub.at;
  sub.at.reset();  // the next attempt asks the routes again
  sub.redirects = 0;
  ++sub.attempt;  // a pending answer is void
  if (was_subscribed || !reported_before) report(slot, false);
  if (now == state::down) retry_later();
}

void shard_subscriptions::on_push(const cluster_endpoint& from, const resp::value& push) {
  if (push.elements.size() != 3) return;
  const auto& kind = push.elements[0].text;
  const auto& channel = push.elements[1].text;
  if (kind == "smessage") {
    // ["smessage", channel, resource]: any of our slots' channels.
    if (channel.size() > channel_.size() && channel.ends_with(channel_) && on_.heard)
      on_.heard(push.elements[2].text);
    return;
  }
  if (kind != "sunsubscribe") return;
  // Unprompted (we never unsubscribe): the slot left this master. Handled outside the read loop.
  asio::post(executor_, [weak = weak_from_this(), from, slot = hash_slot(channel)] {
    const auto self = weak.lock();
    if (!self || self->closed_) return;
    const auto it = self->slots_.find(slot);
    if (it == self->slots_.end() || it->second.at != from) return;
    self->lost(slot, it->second, state::connecting);
    self->subscribe(slot);
  });
}

void shard_subscriptions::on_link(const cluster_endpoint& at, bool up) {
  asio::post(executor_, [weak = weak_from_this(), at, up] {
    const auto self = weak.lock();
    if (!self || self->closed_) return;
    if (up) {
      // A new link has no subscriptions. Those it carried were lost with the old one (the link
      // reports its break first); they and every other failed one are tried again now.
      return self->retry_down();
    }
    for (auto& [slot, sub] : self->slots_) {
      if (sub.at == at) self->lost(slot, sub, state::down);
    }
  });
}

void shard_subscriptions::retry_later() {
  if (retry_armed_ || closed_) return;
  retry_armed_ = true;
  const auto& policy = settings_.reconnect;
  retry_delay_ =
      retry_delay_.count() == 0
          ? policy.initial_delay
          : std::min(policy.max_delay, std::chrono::duration_cast<std::chrono::milliseconds>(
                                           retry_delay_ * policy.multiplier));
  retry_timer_.expires_after(retry_delay_);
  retry_timer_.async_wait([weak = weak_from_this()](error_code ec) {
    const auto self = weak.lock();
    if (!self || ec) return;
    self->retry_armed_ = false;
    self->retry_down();
  });
}

void shard_subscriptions::retry_down() {
  if (closed_) return;
  std::vector<std::uint16_t> down;
  for (const auto& [slot, sub] : slots_) {
    if (sub.current == state::down) down.push_back(slot);
  }
  for (const auto slot : down)
    subscribe(slot);
  prune_links();
}

shard_subscriptions::shard_link& shard_subscriptions::link_to(const cluster_endpoint& at) {
  const auto known =
      std::find_if(links_.begin(), links_.end(), [&](const shard_link& l) { return l.at == at; });
  if (known != links_.end()) return *known;
  auto settings = settings_;
  std::weak_ptr<shard_subscriptions> weak = weak_from_this();
  settings.on_push = [weak, at](const resp::value& push) {
    if (auto self = weak.lock()) self->on_push(at, push);
  };
  settings.on_link = [weak, at](bool up, error_code) {
    if (auto self = weak.lock()) self->on_link(at, up);
  };
  links_.push_back(
      shard_link{at, connection::create(executor_, server_of(cluster_, at), settings)});
  return links_.back();
}

void shard_subscriptions::prune_links() {
  std::erase_if(links_, [this](const shard_link& link) {
    const bool used = std::any_of(slots_.begin(), slots_.end(),
                                  [&](const auto& entry) { return entry.second.at == link.at; });
    if (!used) link.conn->close();
    return !used;
  });
}

void shard_subscriptions::report(std::uint16_t slot, bool subscribed) {
  if (!on_.slot_changed) return;
  asio::post(executor_, [weak = weak_from_this(), slot, subscribed] {
    const auto self = weak.lock();
    if (self && !self->closed_ && self->on_.slot_changed) self->on_.slot_changed(slot, subscribed);
  });
}

}  // namespace redlock::detail
