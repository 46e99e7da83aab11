#include "lock/set_rounds.hpp"

#include "algo/hash_slot.hpp"
#include "lock/key_names.hpp"
#include "lock/lease_state.hpp"
#include "lock/local_queues.hpp"
#include "lock/scripts.hpp"
#include "resp/script.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace redlock::detail {

std::vector<std::string> normalize_set(std::vector<std::string> resources, std::string& problem) {
  std::sort(resources.begin(), resources.end());
  resources.erase(std::unique(resources.begin(), resources.end()), resources.end());
  if (resources.empty()) {
    problem = "the set of resources is empty";
  } else if (resources.size() > max_set_size) {
    problem = fmt::format("the set has {} resources, more than the {} one set may have",
                          resources.size(), max_set_size);
  } else if (std::any_of(resources.begin(), resources.end(),
                         [](const std::string& resource) { return resource.empty(); })) {
    problem = "a resource of the set is empty";
  }
  if (!problem.empty()) resources.clear();
  return resources;
}

set_rounds::set_rounds(std::vector<std::string> resources)
    : resources_(normalize_set(std::move(resources), problem_)) {
  for (const auto& resource : resources_) {
    if (!name_.empty()) name_ += ',';
    name_ += resource;
  }
}

std::string set_rounds::problem(std::size_t) const {
  if (problem_.empty()) return {};
  return "redlock: cannot acquire a set of locks: " + problem_;
}

std::string set_rounds::subject() const {
  return quoted_set(resources_);
}

std::string set_rounds::contended_here(const resource_queue* queue, bool waiter_goes_first) const {
  if (queue == nullptr || (queue->holder == nullptr && !waiter_goes_first)) return {};
  return fmt::format("redlock: a resource of {} is held or awaited by another lease of this client",
                     subject());
}

std::string set_rounds::queued_too_long(std::chrono::milliseconds waited, bool held_here) const {
  return fmt::format("redlock: resources of {} still {} after {} ms", subject(),
                     held_here ? "held or awaited by other leases of this client"
                               : "awaited by earlier acquires of this client",
                     waited.count());
}

std::optional<round_strategy::round_request> set_rounds::next_round(const round_inputs& in,
                                                                    std::minstd_rand&) {
  holders_.open_round(in.nodes);
  const std::string ttl = std::to_string(in.ttl.count());
  std::vector<std::string> counters;
  std::vector<std::string_view> keys(resources_.begin(), resources_.end());
  if (in.fencing) {
    counters.reserve(resources_.size());
    for (const auto& resource : resources_)
      counters.push_back(fencing_counter_key(resource));
    keys.insert(keys.end(), counters.begin(), counters.end());
  }
  const std::string_view args[] = {in.token, ttl, in.fencing ? "1" : "0"};
  return round_request{
      .form = in.fencing ? set_form::fenced_set : set_form::asking_ttl,
      .kind = lock_request::multi_set,
      .key = resources_.front(),
      .shared =
          std::make_shared<const std::string>(encode_evalsha(multi_acquire_script(), keys, args)),
  };
}

std::string set_rounds::keys_of_round(bool fencing) const {
  std::string keys = quoted_keys(resources_);
  if (!fencing) return keys;
  for (const auto& resource : resources_)
    keys += ", " + quoted_resource(fencing_counter_key(resource));
  return keys;
}

bool set_rounds::keys_in_one_slot(bool fencing) const {
  const auto slot = hash_slot(resources_.front());
  return std::all_of(resources_.begin(), resources_.end(), [&](const std::string& resource) {
    return hash_slot(resource) == slot && (!fencing || keys_share_hash_slot(resource));
  });
}

std::string set_rounds::cross_slot_problem(bool fencing) const {
  if (keys_in_one_slot(fencing)) return {};
  return fmt::format(
      "redlock: cannot acquire {} on a Redis Cluster node: one script sets every key of the set, "
      "and a cluster runs a script only on keys of one hash slot; give the resources one hash "
      "tag, as in \"{{acct}}:1\" and \"{{acct}}:2\"",
      subject());
}

bool set_rounds::hold(resource_queue& queue, lease_state& lease) {
  queue.holder = &lease.local_hold;
  return false;
}

std::vector<round_strategy::fenced_key> set_rounds::fenced_keys() const {
  std::vector<fenced_key> fenced;
  fenced.reserve(resources_.size());
  for (const auto& resource : resources_)
    fenced.push_back({resource, fencing_counter_key(resource)});
  return fenced;
}

hold_keys set_rounds::round_hold(std::string_view key, bool) const {
  return hold_keys{.kind = hold_kind::set,
                   .key = key,
                   .mark = {},
                   .mark_id = {},
                   .message = {},
                   .keys = resources_};
}

}  // namespace redlock::detail
