#include "lock/local_queues.hpp"

#include "algo/handoff.hpp"
#include "algo/hash_slot.hpp"
#include "clock.hpp"
#include "lock/key_names.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace redlock::detail {

local_queues::local_queues(std::string release_channel, double drift_factor)
    : release_channel_(std::move(release_channel)), drift_factor_(drift_factor) {
  spare_queues_.reserve(1024);
}

std::size_t local_queues::name_hash::operator()(std::string_view name) const noexcept {
  constexpr std::uint64_t odd = 0x9e3779b97f4a7c15;  // 2^64 / golden ratio, made odd
  const auto mix = [](std::uint64_t h, std::uint64_t word) {
    h = (h ^ word) * odd;
    return h ^ (h >> 29);
  };
  const char* bytes = name.data();
  std::size_t left = name.size();
  std::uint64_t h = left * odd;
  std::uint64_t word = 0;
  if (left >= 8) {
    for (; left > 8; bytes += 8, left -= 8) {
      std::memcpy(&word, bytes, 8);
      h = mix(h, word);
    }
    // The last eight bytes, overlapping the words before when the length is not a multiple.
    std::memcpy(&word, bytes + left - 8, 8);
  } else {
    for (std::size_t i = 0; i < left; ++i)
      word |= std::uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  h = mix(h, word);
  return h ^ (h >> 32);
}

steady_clock::time_point local_queues::lazy_now::get() {
  if (!now_) now_ = lock_clock::now();
  return *now_;
}

resource_queue* local_queues::find(const std::string& resource) {
  auto found = queues_.find(std::string_view(resource));
  return found == queues_.end() ? nullptr : &found->second;
}

resource_queue& local_queues::queue_for(const std::string& resource) {
  const hashed_name key{resource, name_hash{}(resource)};
  if (spare_queues_.empty()) {
    auto found = queues_.find(key);
    if (found == queues_.end())
      found = queues_.emplace(queue_name{resource, key.hash}, resource_queue{}).first;
    found->second.name_hash = key.hash;
    return found->second;
  }
  // One lookup: a spare node, named, is inserted unless the resource has a queue already, and
  // then goes back to the spares. Spares were emptied when they were forgotten.
  auto& spare = spare_queues_.back();
  spare.key().name = resource;
  spare.key().hash = key.hash;
  auto placed = queues_.insert(std::move(spare));
  if (placed.inserted) {
    spare_queues_.pop_back();
  } else {
    spare = std::move(placed.node);
  }
  placed.position->second.name_hash = key.hash;
  return placed.position->second;
}

void local_queues::forget_if_idle(const std::string& resource) {
  forget_if_idle(hashed_name{resource, name_hash{}(resource)});
}

void local_queues::forget_if_idle(const hashed_name& key) {
  const auto found = queues_.find(key);
  if (found == queues_.end() || !found->second.idle()) return;
  if (spare_queues_.size() == spare_queues_.capacity()) {
    queues_.erase(found);
    return;
  }
  auto node = queues_.extract(found);
  node.mapped().empty_for_reuse();
  spare_queues_.push_back(std::move(node));
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

local_queues::lease_release local_queues::release_of(queue_holder& state,
                                                     const holder_facts& facts) {
  resource_queue* queue = state.queue_;
  // Several readers may hold at once, and any waiter may start on the release: no hand-off.
  if (queue != nullptr && queue->shared)
    return lease_release{.channel = release_channel_, .next_waiter = {}};
  const bool holder = queue != nullptr && queue->holder == &state;
  if (holder && queue->waiters.empty() && state.more_queues_.empty() && !facts.contended) {
    // Nearly every release: a lock that nobody here waits for, held without contention. What
    // the general path decides then: it announces itself, nobody is handed the lock, and the
    // hand-offs in a row start over.
    queue->handoffs_in_a_row = 0;
    return lease_release{.channel = release_channel_, .next_waiter = {}};
  }
  // Who takes the lease's resources once it is gone: the hand-off is certain only when each of
  // them goes to a single lock, whose SET follows our release on every node.
  bool waiting = false;
  bool certain = holder;
  if (holder) {
    const auto taken_by = [&](const resource_queue& released) {
      const auto next = next_to_start(released, &state);
      waiting = waiting || next != nullptr;
      certain = certain && next != nullptr && !next->waits_for_several();
    };
    taken_by(*queue);
    for (const resource_queue* other : state.more_queues_)
      taken_by(*other);
  }
  // The clock is read only where the decision uses it: for a waiter that will compete, or for a
  // contended release to remember (announced_lately).
  const bool timed = holder && (waiting || (facts.contended && !release_channel_.empty()));
  const auto now = timed ? lock_clock::now() : steady_clock::time_point{};
  const handoff decision =
      decide_handoff({.holder = holder,
                      .waiting = waiting,
                      .certain = certain,
                      .handoffs_in_a_row = holder ? queue->handoffs_in_a_row : 0,
                      .local_handoffs = facts.local_handoffs,
                      .longest_ttl = facts.longest_ttl,
                      .drift_factor = drift_factor_,
                      .now = now});
  if (holder) queue->handoffs_in_a_row = decision.handoffs_in_a_row;
  if (decision.announce && holder && !waiting && facts.contended && !release_channel_.empty()) {
    std::erase_if(announced_lately_, [&](const announced_release& old) {
      return now - old.at > announced_release_memory;
    });
    for (const auto& resource : facts.resources) {
      if (announced_lately_.size() == most_announced_releases_kept)
        announced_lately_.erase(announced_lately_.begin());
      announced_lately_.push_back({resource, now});
    }
  }
  lease_release how;
  if (decision.announce) how.channel = release_channel_;
  if (decision.next_waiter_competes)
    how.next_waiter = {.competes = true, .key_gone_by = *decision.key_gone_by};
  return how;
}

bool local_queues::announced_lately(std::span<const std::string> resources,
                                    steady_clock::time_point now, steady_clock::duration window) {
  if (announced_lately_.empty()) return false;  // nearly always
  return std::any_of(
      announced_lately_.begin(), announced_lately_.end(), [&](const announced_release& release) {
        return now - release.at < window &&
               std::find(resources.begin(), resources.end(), release.resource) != resources.end();
      });
}

void local_queues::key_gone_on_node(std::size_t node, std::span<const std::string> resources) {
  for (const auto& resource : resources) {
    auto* queue = find(resource);
    if (queue == nullptr || queue->semaphore || queue->waiters.empty()) continue;
    auto head = queue->waiters.front();  // keeps it alive while it reacts
    head->announced(node, 0);
  }
}

void local_queues::hold_in(queue_holder& holder, std::span<resource_queue* const> queues) {
  if (queues.empty()) return;
  holder.queue_ = queues.front();
  // Only a set's lease allocates for its other queues.
  holder.more_queues_.assign(queues.begin() + 1, queues.end());
}

void local_queues::holder_gone(queue_holder& state, std::span<const std::string> queue_names,
                               next_waiter_start next_waiter) {
  if (!state.more_queues_.empty()) return set_holder_gone(state, queue_names, next_waiter);
  resource_queue* queue = std::exchange(state.queue_, nullptr);
  if (queue_names.empty()) return;
  if (queue != nullptr && queue->semaphore)
    return permit_holder_gone(*queue, state, queue_names.front());
  if (queue != nullptr && queue->shared)
    return shared_holder_gone(*queue, state, queue_names.front());
  if (queue == nullptr || queue->holder != &state) return;
  queue->holder = nullptr;
  // Found again by its name, and the hash read now: a waiter that starts may end at once and
  // forget the queue.
  const hashed_name name{queue_names.front(), queue->name_hash};
  start_next_waiter(*queue, next_waiter);
  forget_if_idle(name);
}

void local_queues::set_holder_gone(queue_holder& state, std::span<const std::string> resources,
                                   next_waiter_start next_waiter) {
  // Out of every queue before any next waiter starts, as acquire_driver::leave_queue; a waiter that
  // starts may end at once and forget its queues, so they are found again by resource.
  resource_queue* first = std::exchange(state.queue_, nullptr);
  if (first == nullptr) return;
  for (resource_queue* queue : std::exchange(state.more_queues_, {})) {
    if (queue->holder == &state) queue->holder = nullptr;
  }
  if (first->holder == &state) first->holder = nullptr;
  for (const auto& resource : resources) {
    if (auto* queue = find(resource); queue != nullptr && queue->holder == nullptr)
      start_next_waiter(*queue, next_waiter);
  }
  for (const auto& resource : resources)
    forget_if_idle(resource);
}

void local_queues::permit_holder_gone(resource_queue& queue, queue_holder& state,
                                      std::string_view slot_key) {
  const auto held = std::find(queue.slot_holders.begin(), queue.slot_holders.end(), &state);
  if (held == queue.slot_holders.end()) return;
  *held = nullptr;
  const auto slot = static_cast<std::size_t>(held - queue.slot_holders.begin());
  if (!queue.waiters.empty()) {
    auto head = queue.waiters.front();  // keeps it alive while it reacts
    head->permit_released_here(slot);
  }
  if (const auto key = split_slot_key(slot_key)) forget_if_idle(std::string(key->first));
}

void local_queues::shared_holder_gone(resource_queue& queue, queue_holder& state,
                                      const std::string& queue_name) {
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
  forget_if_idle(queue_name);
}

void local_queues::start_next_waiter(resource_queue& queue, next_waiter_start how) {
  const auto next = next_to_start(queue, nullptr);
  if (next == nullptr) return;
  put_first(*next);
  if (how.competes) {
    next->compete(how.key_gone_by);
  } else {
    next->wake();
  }
}

void local_queues::join(const std::shared_ptr<queued_acquire>& waiter,
                        std::span<const std::string> keys, std::chrono::milliseconds claim_for) {
  waiter->queues_.clear();
  for (const auto& key : keys)
    enter(waiter, queue_for(key));
  joined(*waiter, claim_for);
}

void local_queues::join(const std::shared_ptr<queued_acquire>& waiter,
                        std::span<resource_queue* const> queues,
                        std::chrono::milliseconds claim_for) {
  waiter->queues_.clear();
  for (resource_queue* queue : queues)
    enter(waiter, *queue);
  joined(*waiter, claim_for);
}

void local_queues::enter(const std::shared_ptr<queued_acquire>& waiter, resource_queue& queue) {
  queue.waiters.push_back(waiter);
  waiter->queues_.push_back(&queue);
}

void local_queues::joined(queued_acquire& waiter, std::chrono::milliseconds claim_for) noexcept {
  waiter.started_ = false;
  waiter.claim_for_ = claim_for;
  waiter.overtaken_ = 0;
  waiter.claim_until_.reset();
}

bool local_queues::try_start(queued_acquire& waiter) {
  if (!may_start(waiter)) return false;
  put_first(waiter);
  return true;
}

void local_queues::leave(queued_acquire& waiter, std::span<const std::string> keys,
                         bool start_others) {
  const auto is_waiter = [&](const auto& other) { return other.get() == &waiter; };
  if (waiter.queues_.size() == 1) {
    // A single lock's: its one queue, nearly always with itself first.
    resource_queue& queue = *waiter.queues_.front();
    waiter.queues_.clear();
    waiter.started_ = false;
    if (is_waiter(queue.waiters.front())) {
      queue.waiters.erase(queue.waiters.begin());
    } else {
      std::erase_if(queue.waiters, is_waiter);
    }
  } else {
    const auto queues = std::move(waiter.queues_);
    waiter.queues_.clear();
    waiter.started_ = false;
    for (resource_queue* queue : queues)
      std::erase_if(queue->waiters, is_waiter);
  }
  if (!start_others) return;
  // Out of every queue before anyone starts: a set behind it looks at all of its own. A waiter
  // that starts may end at once and forget its queues, so they are found again by key.
  for (const auto& key : keys) {
    if (auto* queue = find(key); queue != nullptr && queue->holder == nullptr)
      start_next_waiter(*queue);
  }
  for (const auto& key : keys)
    forget_if_idle(key);
}

bool local_queues::waiter_goes_first(const resource_queue& queue) const {
  ++evaluation_;
  lazy_now now;
  return std::any_of(queue.waiters.begin(), queue.waiters.end(),
                     [&](const auto& waiter) { return !yields(*waiter, nullptr, now); });
}

void local_queues::claim_expired(queued_acquire& waiter) {
  waiter.overtaken_ = 0;
  waiter.claim_until_.reset();
  // The acquires it kept behind it may go now. Any of them may end at once, and so may the set
  // itself once it starts: its queues are looked up again while it is still in them.
  const auto queues = waiter.queues_;
  for (resource_queue* queue : queues) {
    if (waiter.queues_.empty()) return;
    if (queue->holder == nullptr) start_next_waiter(*queue);
  }
}

bool local_queues::may_start(const queued_acquire& waiter, const queue_holder* leaving) const {
  ++evaluation_;
  lazy_now now;
  return may_start_now(waiter, leaving, now);
}

// Each acquire ahead of `waiter` in a queue joined before it, or went ahead of it: so the
// recursion through yields() only ever looks at acquires earlier in one order, and ends. The memo
// makes each acquire's answer count once per evaluation, however many sets share it.
bool local_queues::may_start_now(const queued_acquire& waiter, const queue_holder* leaving,
                                 lazy_now& now) const {
  if (waiter.evaluated_in_ == evaluation_) return waiter.may_start_;
  waiter.evaluated_in_ = evaluation_;
  waiter.may_start_ = false;
  for (const resource_queue* queue : waiter.queues_) {
    if (queue->holder != nullptr && queue->holder != leaving) return false;
    for (const auto& ahead : queue->waiters) {
      if (ahead.get() == &waiter) break;
      if (!yields(*ahead, leaving, now)) return false;
    }
  }
  waiter.may_start_ = true;
  return true;
}

bool local_queues::yields(const queued_acquire& waiter, const queue_holder* leaving,
                          lazy_now& now) const {
  if (!waiter.waits_for_several() || waiter.started_) return false;
  if (waiter.claim_until_ && now.get() < *waiter.claim_until_) return false;
  return !may_start_now(waiter, leaving, now);
}

std::shared_ptr<queued_acquire> local_queues::next_to_start(const resource_queue& queue,
                                                            const queue_holder* leaving) const {
  ++evaluation_;
  lazy_now now;
  for (const auto& waiter : queue.waiters) {
    if (waiter->started_) return nullptr;  // it goes first, and nothing behind it starts
    if (may_start_now(*waiter, leaving, now)) return waiter;
    if (!yields(*waiter, leaving, now)) return nullptr;
  }
  return nullptr;
}

void local_queues::put_first(queued_acquire& waiter) {
  // Nearly every start: a single lock first in its queue already, ahead of nobody.
  if (waiter.queues_.size() == 1 && waiter.queues_.front()->waiters.front().get() == &waiter) {
    waiter.started_ = true;
    return;
  }
  std::vector<queued_acquire*> passed;  // the sets it goes ahead of; none in nearly every start
  for (resource_queue* queue : waiter.queues_) {
    auto& line = queue->waiters;
    const auto mine = std::find_if(line.begin(), line.end(),
                                   [&](const auto& other) { return other.get() == &waiter; });
    for (auto ahead = line.begin(); ahead != mine; ++ahead) {
      if (std::find(passed.begin(), passed.end(), ahead->get()) == passed.end())
        passed.push_back(ahead->get());
    }
    std::rotate(line.begin(), mine, std::next(mine));
  }
  waiter.started_ = true;
  if (passed.empty()) return;
  const auto now = lock_clock::now();
  for (queued_acquire* set : passed) {
    if (++set->overtaken_ != set_overtakes_before_claim) continue;
    set->claim_until_ = now + set->claim_for_;
    set->claims_until(*set->claim_until_);
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
    if (queue.waiters.empty() || (slot && hash_slot(resource.name) != *slot)) continue;
    // A set is first in the queue of each of its resources: told once.
    if (std::find(heads.begin(), heads.end(), queue.waiters.front()) == heads.end())
      heads.push_back(queue.waiters.front());
  }
  for (auto& head : heads)
    head->subscription_changed(subscribed);
}

}  // namespace redlock::detail
