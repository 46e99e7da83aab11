#include "sim/checkers.hpp"

#include "redlock/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <utility>

namespace redlock::sim {

namespace {

bool exclusive_kind(op_kind kind) {
  return kind != op_kind::rw_read && kind != op_kind::semaphore;
}

// The intervals [at, end) during which a hold relied on its lease: each claim until the next one
// (which supersedes it: an extension may have shortened the lock) or its own end, cut where the
// release began or the client was shut down (a holder does not rely on a lock it gives back).
std::vector<std::pair<time_point, time_point>> relied(const hold& h) {
  std::vector<std::pair<time_point, time_point>> out;
  for (std::size_t i = 0; i < h.claims.size(); ++i) {
    const claim& c = h.claims[i];
    time_point end = c.until;
    if (i + 1 < h.claims.size() && h.claims[i + 1].at < end) end = h.claims[i + 1].at;
    if (h.release_started && *h.release_started < end) end = *h.release_started;
    if (h.shut_down && *h.shut_down < end) end = *h.shut_down;
    if (c.at < end) out.emplace_back(c.at, end);
  }
  return out;
}

using intervals = std::vector<std::pair<time_point, time_point>>;

std::optional<std::pair<time_point, time_point>> first_overlap(const intervals& a,
                                                               const intervals& b) {
  for (const auto& x : a) {
    for (const auto& y : b) {
      if (x.first < y.second && y.first < x.second) {
        return std::make_pair(std::max(x.first, y.first), std::min(x.second, y.second));
      }
    }
  }
  return std::nullopt;
}

std::size_t quorum_of(const scenario& s) {
  return std::max<std::uint32_t>(1, s.nodes) / 2 + 1;
}

// A lease's writes (its round's SETs, fencing increments and write-back) reach the nodes before
// its acquire completes, but may do so a while before: within its round, up to two node timeouts
// and the slowest network's round trip and lateness earlier.
time_point writes_from(const scenario& s, const hold& x) {
  return *x.acquired - 2 * std::chrono::milliseconds(s.node_timeout_ms) -
         2 * std::chrono::microseconds(s.delay_high_us) - std::chrono::milliseconds(s.late_most_ms);
}

// The nodes that lost keys between the earlier lease's writes and the later lease's acquire; only
// those that came back before keys could have expired (a restart at once, a failover to a lagging
// replica) when `at_once_only`.
std::set<std::uint32_t> lost_between(const scenario& s, const history& h, const hold& earlier,
                                     const hold& later, bool at_once_only) {
  std::set<std::uint32_t> lost;
  for (const key_loss& loss : h.losses) {
    if (at_once_only && !loss.at_once) continue;
    if (writes_from(s, earlier) <= loss.at && loss.at <= *later.acquired) lost.insert(loss.node);
  }
  return lost;
}

// The ends of the validity `x` relied on from `at` on: its latest claim then (or its first one
// when the loss came during its acquire), and every later claim. A later claim may rest on
// extensions confirmed before `at` that its holder read only afterwards.
std::vector<time_point> claimed_from(const hold& x, time_point at) {
  std::vector<time_point> ends;
  if (x.claims.empty()) return ends;
  const claim* latest = &x.claims.front();
  for (const claim& c : x.claims) {
    if (c.at <= at) latest = &c;
  }
  for (const claim& c : x.claims) {
    if (&c == latest || at < c.at) ends.push_back(c.until);
  }
  return ends;
}

// The nodes where `token`'s keys, seen at `at`, would live until `until` without being refreshed.
// A node's clock may run up to the drift factor slow or fast; a key is given that much, and more,
// so that a node counts as keeping the lease whenever it might.
std::size_t nodes_keeping(const token_holders& holders, const std::string& token, time_point at,
                          time_point until) {
  const auto found = holders.find(token);
  if (found == holders.end()) return 0;
  // A set's keys on a node hold the lease there together: the one that ends first counts.
  std::map<std::uint32_t, std::optional<std::int64_t>> shortest;
  for (const token_holder& k : found->second) {
    auto [it, fresh] = shortest.try_emplace(k.node, k.ms_left);
    if (!fresh && k.ms_left && (!it->second || *k.ms_left < *it->second)) it->second = k.ms_left;
  }
  return static_cast<std::size_t>(
      std::count_if(shortest.begin(), shortest.end(), [&](const auto& n) {
        if (!n.second) return true;
        const auto lives = std::chrono::milliseconds(*n.second * 102 / 100 + 2);
        return at + lives >= until;
      }));
}

// Whether loss `loss` (at once) turned the lease `x` from a lock into none: just before it, a
// quorum of nodes held its token for as long as its holder relied on (then or later), just after,
// fewer did. Only a validity the keys already covered before the loss can pass the first test, so
// a later claim counts only when it rests on extensions that ran before the loss.
bool loss_broke_lease(const scenario& s, const hold& x, const key_loss& loss) {
  if (x.token.empty()) return false;
  const std::size_t quorum = quorum_of(s);
  const auto ends = claimed_from(x, loss.at);
  return std::any_of(ends.begin(), ends.end(), [&](time_point until) {
    return nodes_keeping(loss.holders_before, x.token, loss.at, until) >= quorum &&
           nodes_keeping(loss.holders_after, x.token, loss.at, until) < quorum;
  });
}

// Whether keys lost at once explain an overlap, which no client can prevent (Redlock assumes keys
// are not lost before they expire):
// - every node that granted both leases lost the earlier one's key;
// - or the earlier lease kept fewer than a quorum of grants that lost nothing;
// - or a loss took the earlier lease below a quorum of the nodes that held its token for as long
//   as its holder relied on. Its effective holders may be fewer than its grants: a grant whose
//   reply came after the round had decided is not renewed, and that key runs out.
// In each case the earlier lease was no longer a lock at all (its holder learns so at its next
// renewal, which then frees the rest).
bool excused_by_key_loss(const scenario& s, const history& h, const hold& earlier,
                         const hold& later) {
  const auto lost = lost_between(s, h, earlier, later, true);
  if (lost.empty()) return false;
  for (const key_loss& loss : h.losses) {
    if (loss.at_once && writes_from(s, earlier) <= loss.at && loss.at <= *later.acquired &&
        loss_broke_lease(s, earlier, loss)) {
      return true;
    }
  }
  std::vector<std::uint32_t> both;
  std::set_intersection(earlier.granted_by.begin(), earlier.granted_by.end(),
                        later.granted_by.begin(), later.granted_by.end(), std::back_inserter(both));
  if (!both.empty() &&
      std::all_of(both.begin(), both.end(), [&](std::uint32_t n) { return lost.contains(n); })) {
    return true;
  }
  const auto kept = std::count_if(earlier.granted_by.begin(), earlier.granted_by.end(),
                                  [&](std::uint32_t n) { return !lost.contains(n); });
  return static_cast<std::size_t>(kept) < quorum_of(s);
}

// The nodes that granted `x`: those holding its token when its acquire completed, and those that
// held it when they lost their keys during its acquire. A node that granted, then lost everything
// before the acquire completed, may still be among the quorum that decided the round (its answer
// was on its way), and its counter is gone with its keys.
std::set<std::uint32_t> granted_including_lost(const scenario& s, const history& h, const hold& x) {
  std::set<std::uint32_t> granted = x.granted_by;
  for (const key_loss& loss : h.losses) {
    if (loss.at < writes_from(s, x) || *x.acquired < loss.at) continue;
    const auto held = loss.holders_before.find(x.token);
    if (held == loss.holders_before.end()) continue;
    if (std::any_of(held->second.begin(), held->second.end(),
                    [&](const token_holder& k) { return k.node == loss.node; }))
      granted.insert(loss.node);
  }
  return granted;
}

// Whether the later lease's token may fairly be no higher than the earlier one's because nodes
// lost their fencing counters (a restart without persistence, a failover to a lagging replica)
// between the two acquires. A token is the highest counter of the quorum that decided the round,
// and the earlier lease raised the counters of a quorum of its grants: the later token can only
// fall behind when some deciding quorum of the later lease meets some such quorum of the earlier
// one on lost nodes alone.
bool fencing_excused(const scenario& s, const history& h, const hold& earlier, const hold& later) {
  const auto lost = lost_between(s, h, earlier, later, false);
  if (lost.empty()) return false;
  const std::size_t quorum = quorum_of(s);
  const auto earlier_grants = granted_including_lost(s, h, earlier);
  const std::vector<std::uint32_t> a(earlier_grants.begin(), earlier_grants.end());
  const std::vector<std::uint32_t> b(later.granted_by.begin(), later.granted_by.end());
  if (a.size() < quorum || b.size() < quorum) return true;  // grants the history did not see
  for (unsigned mask_a = 0; mask_a < (1u << a.size()); ++mask_a) {
    if (static_cast<std::size_t>(__builtin_popcount(mask_a)) != quorum) continue;
    for (unsigned mask_b = 0; mask_b < (1u << b.size()); ++mask_b) {
      if (static_cast<std::size_t>(__builtin_popcount(mask_b)) != quorum) continue;
      bool only_lost = true;
      for (std::size_t i = 0; i < a.size() && only_lost; ++i) {
        if (!(mask_a & (1u << i))) continue;
        for (std::size_t j = 0; j < b.size(); ++j) {
          if ((mask_b & (1u << j)) && a[i] == b[j] && !lost.contains(a[i])) only_lost = false;
        }
      }
      if (only_lost) return true;
    }
  }
  return false;
}

std::string describe(const history& h, std::size_t i) {
  const hold& x = h.holds[i];
  return fmt::format("op {} (client {}, {} of {}, acquired at {})", x.op, x.client,
                     to_string(x.kind), fmt::join(x.resources, "+"),
                     x.acquired ? at_text(*x.acquired) : std::string("-"));
}

// The holds that acquired, grouped by the lock they exclude each other on: a lock-like hold
// counts on each of its resources; a semaphore and a read-write lock on their names.
std::map<std::string, std::vector<std::size_t>> by_lock(const history& h) {
  std::map<std::string, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < h.holds.size(); ++i) {
    const hold& x = h.holds[i];
    if (!x.acquired) continue;
    for (const auto& resource : x.resources)
      groups[resource].push_back(i);
  }
  for (auto& [name, members] : groups) {
    std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
      return *h.holds[a].acquired < *h.holds[b].acquired;
    });
  }
  return groups;
}

}  // namespace

std::vector<std::string> check_exclusion(const scenario& s, const history& h) {
  std::vector<std::string> problems;
  // Every pair of holds of a lock is compared: each hold's intervals are worked out once.
  std::vector<intervals> relied_by_hold;
  relied_by_hold.reserve(h.holds.size());
  for (const hold& one : h.holds)
    relied_by_hold.push_back(relied(one));
  for (const auto& [name, members] : by_lock(h)) {
    for (std::size_t x = 0; x < members.size(); ++x) {
      for (std::size_t y = x + 1; y < members.size(); ++y) {
        const hold& a = h.holds[members[x]];
        const hold& b = h.holds[members[y]];
        // Readers share with readers; a semaphore's holders are counted below.
        if (!exclusive_kind(a.kind) && !exclusive_kind(b.kind)) continue;
        const auto overlap = first_overlap(relied_by_hold[members[x]], relied_by_hold[members[y]]);
        if (!overlap || excused_by_key_loss(s, h, a, b)) continue;
        problems.push_back(fmt::format("exclusion: {} and {} both held {} from {} to {}",
                                       describe(h, members[x]), describe(h, members[y]), name,
                                       at_text(overlap->first), at_text(overlap->second)));
      }
    }
    // A semaphore: at no instant more holders than permits.
    if (members.empty() || h.holds[members.front()].kind != op_kind::semaphore) continue;
    for (std::size_t x : members) {
      for (const auto& [start, end] : relied_by_hold[x]) {
        std::vector<std::size_t> holding;
        for (std::size_t y : members) {
          for (const auto& [s2, e2] : relied_by_hold[y]) {
            if (s2 <= start && start < e2) {
              holding.push_back(y);
              break;
            }
          }
        }
        const std::uint32_t permits = h.holds[x].permits;
        if (holding.size() <= permits) continue;
        bool excused = false;
        for (std::size_t p = 0; p < holding.size() && !excused; ++p) {
          for (std::size_t q = p + 1; q < holding.size() && !excused; ++q) {
            const hold& a = h.holds[holding[p]];
            const hold& b = h.holds[holding[q]];
            excused = *a.acquired <= *b.acquired ? excused_by_key_loss(s, h, a, b)
                                                 : excused_by_key_loss(s, h, b, a);
          }
        }
        if (excused) continue;
        std::vector<std::string> who;
        for (std::size_t y : holding)
          who.push_back(describe(h, y));
        problems.push_back(fmt::format("permits: {} holders of {} ({} permits) at {}: {}",
                                       holding.size(), name, permits, at_text(start),
                                       fmt::join(who, "; ")));
        break;
      }
    }
  }
  return problems;
}

std::vector<std::string> check_fencing(const scenario& s, const history& h) {
  std::vector<std::string> problems;
  // Per fencing counter: the holds with a token from it, in acquire order.
  std::map<std::string, std::vector<std::size_t>> counters;
  for (std::size_t i = 0; i < h.holds.size(); ++i) {
    const hold& x = h.holds[i];
    if (!x.acquired) continue;
    for (const auto& [counter, token] : x.fencing_tokens)
      counters[counter].push_back(i);
  }
  for (auto& [counter, members] : counters) {
    std::stable_sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
      return *h.holds[a].acquired < *h.holds[b].acquired;
    });
    for (std::size_t y = 1; y < members.size(); ++y) {
      const hold& later = h.holds[members[y]];
      const std::uint64_t token = later.fencing_tokens.at(counter);
      for (std::size_t x = 0; x < y; ++x) {
        const hold& earlier = h.holds[members[x]];
        const std::uint64_t before = earlier.fencing_tokens.at(counter);
        // A reader carries the last writer's token: never below an earlier lease's; a writer (or
        // any exclusive lease) is above every earlier lease, readers included, so that a store
        // that keeps the highest writer token refuses a reader that paused past its lease.
        // Readers are not ordered among themselves.
        if (earlier.kind == op_kind::rw_read && later.kind == op_kind::rw_read) continue;
        const bool ok = later.kind == op_kind::rw_read ? token >= before : token > before;
        if (ok || fencing_excused(s, h, earlier, later)) continue;
        problems.push_back(fmt::format("fencing: {} got token {} of {} after {} got {}",
                                       describe(h, members[y]), token, counter,
                                       describe(h, members[x]), before));
      }
    }
  }
  // The store: once it accepted a write of an exclusive lease, a write of any lease acquired
  // before that one must be refused (a holder that paused past its lease is fenced out). A
  // reader takes no token of its own, so only exclusive leases fence.
  std::map<std::string, std::size_t> newest_writer;
  for (const fenced_write& w : h.writes) {
    if (!w.accepted) continue;
    const hold& writer = h.holds[w.hold];
    auto found = newest_writer.find(w.resource);
    if (found != newest_writer.end()) {
      const hold& newest = h.holds[found->second];
      if (found->second != w.hold && *writer.acquired < *newest.acquired &&
          !fencing_excused(s, h, writer, newest)) {
        problems.push_back(fmt::format(
            "fenced store: accepted token {} of {} from {} at {} after a write of {}", w.token,
            w.resource, describe(h, w.hold), at_text(w.at), describe(h, found->second)));
      }
      if (*writer.acquired < *newest.acquired) continue;
    }
    if (writer.kind != op_kind::rw_read) newest_writer[w.resource] = w.hold;
  }
  return problems;
}

std::vector<std::string> check_sets(const history& h) {
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < h.holds.size(); ++i) {
    for (const auto& partial : h.holds[i].partial_sets) {
      problems.push_back(fmt::format("set: {} held partly on {}", describe(h, i), partial));
    }
  }
  return problems;
}

std::vector<std::string> check_completions(const history& h) {
  std::vector<std::string> problems;
  if (!h.workload_finished) problems.push_back("completions: the workload never finished");
  for (std::size_t i = 0; i < h.holds.size(); ++i) {
    const hold& x = h.holds[i];
    if (!x.finished) problems.push_back(fmt::format("completions: {} never ended", describe(h, i)));
    if (x.acquire_completions > 1 || (x.finished && x.acquire_completions != 1)) {
      problems.push_back(fmt::format("completions: {}'s acquire completed {} times", describe(h, i),
                                     x.acquire_completions));
    }
    if (x.release_completions > 1) {
      problems.push_back(fmt::format("completions: {}'s release completed {} times", describe(h, i),
                                     x.release_completions));
    }
  }
  return problems;
}

std::vector<std::string> check_outcomes(const history& h) {
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < h.holds.size(); ++i) {
    const hold& x = h.holds[i];
    for (const auto& [what, ec] :
         {std::pair{"acquire", x.acquire_error}, std::pair{"release", x.release_error},
          std::pair{"extension", x.extend_error}}) {
      if (ec != condition::node_failure) continue;
      problems.push_back(fmt::format("outcomes: {}'s {} failed with a node failure: {}",
                                     describe(h, i), what, ec.message()));
    }
  }
  return problems;
}

bool fault_free(const scenario& s) {
  return s.faults.empty() && s.late_permille == 0 && s.reset_after_execute_permille == 0;
}

std::optional<time_point> calm_from(const scenario& s) {
  const auto start = detail::lock_clock::epoch();
  if (fault_free(s)) return start;
  const bool network_faults = s.late_permille != 0 || s.reset_after_execute_permille != 0;
  if (network_faults && s.network_calm_ms == 0) return std::nullopt;
  const std::uint32_t outlived_ttl = s.longest_ttl_ms() * 102 / 100 + 50;
  std::uint32_t end = network_faults ? s.network_calm_ms : 0;
  for (const fault& f : s.faults) {
    // A delayed restart stays down for at least the longest TTL, whatever its duration says.
    const std::uint32_t lasts = f.kind == fault_kind::restart_delayed
                                    ? std::max(f.duration_ms, outlived_ttl)
                                    : f.duration_ms;
    end = std::max(end, f.at_ms + lasts);
  }
  // Then what the faults left: a key of a failed release lives out its TTL; a link waits out its
  // longest reconnect backoff (2 s), a sentinel-shaped node its next resolution (2 s more).
  return start + std::chrono::milliseconds(end + outlived_ttl + 5000);
}

duration liveness_bound(const scenario& s) {
  return std::chrono::milliseconds(3 * s.node_timeout_ms + 250) +
         2 * std::chrono::microseconds(s.delay_high_us);
}

std::vector<std::string> check_leftovers(const scenario& s, const history& h) {
  std::vector<std::string> problems;
  for (const auto& key : h.leftovers) {
    problems.push_back(
        fmt::format("leftover: {} after every lease ended and the TTLs passed", key));
  }
  if (!fault_free(s) || !h.workload_finished) return problems;
  for (const auto& settled : h.settled) {
    for (const auto& token : settled.tokens) {
      const auto owner = std::find_if(h.holds.begin(), h.holds.end(),
                                      [&](const hold& x) { return x.token == token; });
      if (owner != h.holds.end() && !(owner->release_done && !owner->release_error)) continue;
      problems.push_back(
          fmt::format("leftover: n{} {} still holds {} after the workload ended ({})", settled.node,
                      settled.key, token.substr(0, 8),
                      owner == h.holds.end()
                          ? std::string("no lease has that token: a failed or cancelled round's")
                          : "its lease was released: " +
                                describe(h, static_cast<std::size_t>(owner - h.holds.begin()))));
    }
  }
  return problems;
}

std::vector<std::string> check_liveness(const scenario& s, const history& h) {
  std::vector<std::string> problems;
  const auto calm = calm_from(s);
  if (!calm || !h.workload_finished) return problems;
  const duration bound = liveness_bound(s);
  const auto lock_like = [](const hold& x) {
    return x.kind != op_kind::semaphore && x.kind != op_kind::rw_read &&
           x.kind != op_kind::rw_write;
  };
  const auto shares = [](const hold& a, const hold& b) {
    return std::any_of(a.resources.begin(), a.resources.end(), [&](const std::string& r) {
      return std::find(b.resources.begin(), b.resources.end(), r) != b.resources.end();
    });
  };
  // Until when a hold kept its locks: its release's end; unknown (never) when it did not end in
  // a successful release.
  const auto held_until = [](const hold& x) -> std::optional<time_point> {
    if (x.release_done && !x.release_error) return x.release_done;
    return std::nullopt;
  };
  for (std::size_t i = 0; i < h.holds.size(); ++i) {
    const hold& released = h.holds[i];
    if (!lock_like(released) || !released.acquired) continue;
    const auto t = held_until(released);
    if (!t || *t < *calm) continue;
    for (std::size_t j = 0; j < h.holds.size(); ++j) {
      const hold& waiter = h.holds[j];
      if (j == i || !lock_like(waiter) || waiter.kind == op_kind::try_lock) continue;
      if (!shares(released, waiter) || !(waiter.started < *t)) continue;
      // Still waiting at t, and for at least the bound after it.
      if (waiter.acquire_done && *waiter.acquire_done <= *t + bound && !waiter.acquired) continue;
      if (waiter.acquired && *waiter.acquired <= *t) continue;
      // Every lock the waiter needs is free at t, and so is every lock of each waiter that may be
      // ahead of it in a queue (a set waiting for a lock that is held keeps its place in the
      // queues of its other locks: fair waiting).
      const auto free_for = [&](std::size_t w) {
        for (std::size_t k = 0; k < h.holds.size(); ++k) {
          const hold& other = h.holds[k];
          if (k == w || !lock_like(other) || !other.acquired || !shares(other, h.holds[w])) {
            continue;
          }
          if (*other.acquired > *t) continue;
          const auto until = held_until(other);
          if (!until || *until > *t) return false;
        }
        return true;
      };
      const auto waiting_at_t = [&](const hold& x) {
        return x.started < *t && !(x.acquired && *x.acquired <= *t) &&
               !(x.acquire_done && *x.acquire_done <= *t);
      };
      if (!free_for(j)) continue;
      bool blocked_ahead = false;
      for (std::size_t k = 0; k < h.holds.size() && !blocked_ahead; ++k) {
        const hold& other = h.holds[k];
        if (k == j || !lock_like(other) || other.kind == op_kind::try_lock) continue;
        if (shares(other, waiter) && waiting_at_t(other) && !free_for(k)) blocked_ahead = true;
      }
      if (blocked_ahead) continue;
      // Progress: some lease acquired soon after t of the waiter's locks, or of the locks of a
      // waiter that may be ahead of it (whose winning may rightly keep it waiting).
      std::vector<std::size_t> contenders{j};
      for (std::size_t k = 0; k < h.holds.size(); ++k) {
        const hold& other = h.holds[k];
        if (k != j && lock_like(other) && shares(other, waiter) && waiting_at_t(other)) {
          contenders.push_back(k);
        }
      }
      const bool someone_acquired = std::any_of(h.holds.begin(), h.holds.end(), [&](const hold& x) {
        if (!lock_like(x) || !x.acquired || !(*t < *x.acquired) || *x.acquired > *t + bound) {
          return false;
        }
        return std::any_of(contenders.begin(), contenders.end(),
                           [&](std::size_t c) { return shares(x, h.holds[c]); });
      });
      if (someone_acquired) continue;
      problems.push_back(fmt::format(
          "liveness: {} released at {} while {} waited, and nobody acquired within {} ms",
          describe(h, i), at_text(*t), describe(h, j),
          std::chrono::duration_cast<std::chrono::milliseconds>(bound).count()));
      break;
    }
  }
  return problems;
}

std::vector<std::string> check_all(const scenario& s, const history& h) {
  std::vector<std::string> problems;
  for (auto&& part :
       {check_exclusion(s, h), check_fencing(s, h), check_sets(h), check_completions(h),
        check_outcomes(h), check_leftovers(s, h), check_liveness(s, h)}) {
    problems.insert(problems.end(), part.begin(), part.end());
  }
  return problems;
}

}  // namespace redlock::sim
