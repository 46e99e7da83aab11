#include "local_queues.hpp"

#include "algo/handoff.hpp"
#include "lease_state.hpp"
#include "nodes/cluster/hash_slot.hpp"
#include "scripts.hpp"

#include <algorithm>
#include <utility>

namespace redlock::detail {

local_queues::local_queues(std::string release_channel, double drift_factor)
    : release_channel_(std::move(release_channel)), drift_factor_(drift_factor) {
  spare_queues_.reserve(1024);
}

resource_queue* local_queues::find(const std::string& resource) {
  auto found = queues_.find(resource);
  return found == queues_.end() ? nullptr : &found->second;
}

resource_queue& local_queues::queue_for(const std::string& resource) {
  if (auto* existing = find(resource)) return *existing;
  if (spare_queues_.empty()) return queues_.try_emplace(resource).first->second;
  auto node = std::move(spare_queues_.back());
  spare_queues_.pop_back();
  node.key() = resource;
  // A fresh queue but for the vectors' storage: nothing of the resource it served before (its
  // hand-offs in a row above all) may carry over.
  resource_queue& queue = node.mapped();
  auto slot_holders = std::move(queue.slot_holders);
  auto readers = std::move(queue.readers);
  auto waiters = std::move(queue.waiters);
  slot_holders.clear();
  readers.clear();
  waiters.clear();
  queue = resource_queue{};
  queue.slot_holders = std::move(slot_holders);
  queue.readers = std::move(readers);
  queue.waiters = std::move(waiters);
  return queues_.insert(std::move(node)).position->second;
}

void local_queues::forget_if_idle(const std::string& resource) {
  auto found = queues_.find(resource);
  if (found == queues_.end() || !found->second.idle()) return;
  auto node = queues_.extract(found);
  if (spare_queues_.size() < spare_queues_.capacity()) spare_queues_.push_back(std::move(node));
}

resource_queue* local_queues::waiting_for(std::string_view resource) {
  auto* queue = find(std::string(resource));
  if (queue == nullptr || queue->semaphore) {
    // A semaphore's slot key: its queue is under the slots' common prefix.
    const auto slot_key = split_slot_key(resource);
    queue = slot_key ? find(std::string(slot_key->first)) : nullptr;
    if (queue != nullptr && !queue->semaphore) queue = nullptr;
  }
  return queue != nullptr && !queue->waiters.empty() ? queue : nullptr;
}

local_queues::lease_release local_queues::release_of(lease_state& state) {
  resource_queue* queue = state.queue;
  // Several readers may hold at once, and any waiter may start on the release: no hand-off. A
  // set's waiters in other processes may wait for any of its resources: no hand-off either.
  if (queue != nullptr && (queue->shared || !state.more_queues.empty()))
    return lease_release{.channel = release_channel_, .next_waiter = {}};
  const bool holder = queue != nullptr && queue->holder == &state;
  const handoff decision =
      decide_handoff({.holder = holder,
                      .waiting = holder && !queue->waiters.empty(),
                      .handoffs_in_a_row = holder ? queue->handoffs_in_a_row : 0,
                      .local_handoffs = state.options.local_handoffs,
                      .longest_ttl = state.validity.longest_ttl(),
                      .drift_factor = drift_factor_,
                      .now = steady_clock::now()});
  if (holder) queue->handoffs_in_a_row = decision.handoffs_in_a_row;
  lease_release how;
  if (decision.announce) how.channel = release_channel_;
  if (decision.next_waiter_competes)
    how.next_waiter = {.competes = true, .key_gone_by = *decision.key_gone_by};
  return how;
}

void local_queues::key_gone_on_node(std::size_t node, const std::string& resource) {
  auto* queue = find(resource);
  if (queue == nullptr || queue->semaphore || queue->waiters.empty()) return;
  auto head = queue->waiters.front();  // keeps it alive while it reacts
  head->announced(node, 0);
}

void local_queues::holder_gone(lease_state& state, next_waiter_start next_waiter) {
  if (!state.more_queues.empty()) return set_holder_gone(state);
  resource_queue* queue = std::exchange(state.queue, nullptr);
  if (queue != nullptr && queue->semaphore) return permit_holder_gone(*queue, state);
  if (queue != nullptr && queue->shared) return shared_holder_gone(*queue, state);
  if (queue == nullptr || queue->holder != &state) return;
  queue->holder = nullptr;
  start_next_waiter(*queue, next_waiter);
  forget_if_idle(state.resource);
}

void local_queues::set_holder_gone(lease_state& state) {
  // Out of every queue before any next waiter starts, as acquire_op::leave_queue; a waiter that
  // starts may end at once and forget its queues, so they are found again by resource.
  resource_queue* first = std::exchange(state.queue, nullptr);
  if (first == nullptr) return;
  for (resource_queue* queue : std::exchange(state.more_queues, {})) {
    if (queue->holder == &state) queue->holder = nullptr;
  }
  if (first->holder == &state) first->holder = nullptr;
  for (const auto& resource : state.resources) {
    if (auto* queue = find(resource); queue != nullptr && queue->holder == nullptr)
      start_next_waiter(*queue);
  }
  for (const auto& resource : state.resources)
    forget_if_idle(resource);
}

void local_queues::permit_holder_gone(resource_queue& queue, lease_state& state) {
  const auto held = std::find(queue.slot_holders.begin(), queue.slot_holders.end(), &state);
  if (held == queue.slot_holders.end()) return;
  *held = nullptr;
  const auto slot = static_cast<std::size_t>(held - queue.slot_holders.begin());
  if (!queue.waiters.empty()) {
    auto head = queue.waiters.front();  // keeps it alive while it reacts
    head->permit_released_here(slot);
  }
  if (const auto key = split_slot_key(state.resource)) forget_if_idle(std::string(key->first));
}

void local_queues::shared_holder_gone(resource_queue& queue, lease_state& state) {
  if (queue.holder == &state) {
    queue.holder = nullptr;
    start_next_waiter(queue);
  } else {
    const auto reader = std::find(queue.readers.begin(), queue.readers.end(), &state);
    if (reader == queue.readers.end()) return;
    queue.readers.erase(reader);
    if (queue.readers.empty() && !queue.waiters.empty()) {
      auto head = queue.waiters.front();  // keeps it alive while it reacts
      head->permit_released_here(0);
    }
  }
  forget_if_idle(state.queue_key);
}

void local_queues::start_next_waiter(resource_queue& queue, next_waiter_start how) {
  if (queue.waiters.empty()) return;
  auto next = queue.waiters.front();  // keeps it alive while it starts
  if (how.competes) {
    next->compete(how.key_gone_by);
  } else {
    next->wake();
  }
}

void local_queues::on_release_announced(std::size_t node, std::string_view resource) {
  auto* queue = waiting_for(resource);
  if (queue == nullptr) return;
  auto head = queue->waiters.front();  // keeps it alive while it reacts
  if (!queue->semaphore) return head->announced(node, 0);
  head->announced(node, split_slot_key(resource)->second);
}

void local_queues::on_subscription_changed(bool subscribed, std::optional<std::uint16_t> slot) {
  std::vector<std::shared_ptr<queued_acquire>> heads;
  for (auto& [resource, queue] : queues_) {
    // Every key of one queue (a semaphore's slot keys too) is in the slot of its name.
    if (queue.waiters.empty() || (slot && hash_slot(resource) != *slot)) continue;
    // A set is first in the queue of each of its resources: told once.
    if (std::find(heads.begin(), heads.end(), queue.waiters.front()) == heads.end())
      heads.push_back(queue.waiters.front());
  }
  for (auto& head : heads)
    head->subscription_changed(subscribed);
}

}  // namespace redlock::detail
