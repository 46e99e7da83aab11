#include "lock/lock_rounds.hpp"

#include "lock/key_names.hpp"
#include "lock/lease_state.hpp"
#include "lock/local_queues.hpp"
#include "lock/scripts.hpp"
#include "resp/encoder.hpp"
#include "resp/script.hpp"
#include "text.hpp"

#include <fmt/format.h>

namespace redlock::detail {

std::string lock_rounds::subject() const {
  return quoted_resource(resource_);
}

std::string lock_rounds::contended_here(const resource_queue* queue, bool waiter_goes_first) const {
  if (queue == nullptr || (queue->holder == nullptr && !waiter_goes_first)) return {};
  return fmt::format("redlock: {} is {} by another lease of this client", subject(),
                     queue->holder != nullptr ? "held" : "awaited");
}

std::string lock_rounds::queued_too_long(std::chrono::milliseconds waited, bool held_here) const {
  return fmt::format("redlock: {} still {} after {} ms", subject(),
                     held_here ? "held by another lease of this client"
                               : "awaited by an earlier acquire of this client",
                     waited.count());
}

std::optional<round_strategy::round_request> lock_rounds::next_round(const round_inputs& in,
                                                                     std::minstd_rand&) {
  // Every round's command is written word by word (resp::encode_words): the same bytes as
  // encode_evalsha and encode_command give, without a string for the TTL.
  if (in.fencing) {
    holders_.open_round(in.nodes);
    const std::string counter = fencing_counter_key(resource_);
    return round_request{
        .form = set_form::fenced,
        .kind = lock_request::fenced_set,
        .key = resource_,
        .shared = std::make_shared<const std::string>(
            resp::encode_words<std::string>("EVALSHA", fenced_acquire_script().sha1(), "2",
                                            resource_, counter, in.token, in.ttl.count())),
    };
  }
  if (in.first && !in.competing) {
    holders_.clear();
    resp::encode_words_into(plain_set_, "SET", resource_, in.token, "NX", "PX", in.ttl.count());
    return round_request{.kind = lock_request::set, .key = resource_, .owned = plain_set_};
  }
  holders_.open_round(in.nodes);
  return round_request{
      .form = set_form::asking_ttl,
      .kind = lock_request::set_asking_ttl,
      .key = resource_,
      .shared = std::make_shared<const std::string>(resp::encode_words<std::string>(
          "EVALSHA", acquire_script().sha1(), "1", resource_, in.token, in.ttl.count())),
  };
}

std::string lock_rounds::keys_of_round(bool fencing) const {
  if (!fencing) return quoted_keys({resource_});
  return quoted_keys({resource_, fencing_counter_key(resource_)});
}

bool lock_rounds::hold(resource_queue& queue, lease_state& lease) {
  queue.holder = &lease.local_hold;
  return false;
}

}  // namespace redlock::detail
