#include "sim/scenario.hpp"

#include <algorithm>

namespace redlock::sim {

const char* to_string(op_kind kind) noexcept {
  switch (kind) {
    case op_kind::lock:
      return "lock";
    case op_kind::try_lock:
      return "try_lock";
    case op_kind::with_lock:
      return "with_lock";
    case op_kind::mutex:
      return "mutex";
    case op_kind::semaphore:
      return "semaphore";
    case op_kind::rw_read:
      return "rw_read";
    case op_kind::rw_write:
      return "rw_write";
    case op_kind::set:
      return "set";
  }
  return "?";
}

const char* to_string(fault_kind kind) noexcept {
  switch (kind) {
    case fault_kind::pause:
      return "pause";
    case fault_kind::restart_delayed:
      return "restart_delayed";
    case fault_kind::restart_at_once:
      return "restart_at_once";
    case fault_kind::partition:
      return "partition";
    case fault_kind::reset_links:
      return "reset_links";
    case fault_kind::script_flush:
      return "script_flush";
    case fault_kind::stall_client:
      return "stall_client";
    case fault_kind::shutdown_client:
      return "shutdown_client";
    case fault_kind::failover:
      return "failover";
    case fault_kind::reshard:
      return "reshard";
    case fault_kind::shard_failover:
      return "shard_failover";
  }
  return "?";
}

std::uint32_t scenario::faults_end_ms() const {
  std::uint32_t end = 0;
  for (const auto& f : faults)
    end = std::max(end, f.at_ms + f.duration_ms);
  return end;
}

std::uint32_t scenario::longest_ttl_ms() const {
  std::uint32_t longest = 0;
  for (const auto& op : operations)
    longest = std::max({longest, op.ttl_ms, op.extend_ms});
  return longest;
}

std::ostream& operator<<(std::ostream& os, const operation& op) {
  os << "client " << op.client << ' ' << to_string(op.kind) << " r" << op.resource;
  if (op.kind == op_kind::set) os << "+" << op.set_size;
  if (op.kind == op_kind::semaphore) os << " permits " << op.permits;
  os << " ttl " << op.ttl_ms << " after " << op.start_after_ms << " hold " << op.hold_ms << '/'
     << op.steps;
  if (op.fencing) os << " fencing";
  if (!op.auto_renew) os << " no-renew";
  if (op.extend_ms) os << " extend " << op.extend_ms;
  if (op.cancel_after_ms) os << " cancel " << op.cancel_after_ms;
  if (op.wait_ms) os << " wait " << op.wait_ms;
  if (op.concurrent) os << " concurrent";
  return os;
}

std::ostream& operator<<(std::ostream& os, const fault& f) {
  return os << "at " << f.at_ms << " ms " << to_string(f.kind) << " node " << f.node << " client "
            << f.client << " for " << f.duration_ms << " ms";
}

std::ostream& operator<<(std::ostream& os, const scenario& s) {
  os << "seed " << s.seed << ", " << s.nodes << " nodes (" << s.sentinel_nodes
     << " sentinel-shaped, " << s.cluster_nodes << " cluster-shaped), " << s.clients << " clients, "
     << s.resources << " resources, node_timeout " << s.node_timeout_ms
     << " ms, delays <= " << s.delay_high_us << " us, late " << s.late_permille << "/1000 up to "
     << s.late_most_ms << " ms, reset after execute " << s.reset_after_execute_permille
     << "/1000, network calm after " << s.network_calm_ms << " ms (0: never)";
  if (s.renewal_tick_ms != 0) os << ", renewal ticks of " << s.renewal_tick_ms << " ms";
  os << '\n';
  os << "node drift (ppm):";
  for (auto d : s.node_drift_ppm)
    os << ' ' << d;
  os << '\n';
  for (const auto& op : s.operations)
    os << "  op: " << op << '\n';
  for (const auto& f : s.faults)
    os << "  fault: " << f << '\n';
  return os;
}

namespace {

template <class T>
rc::Gen<T> pick(std::vector<T> choices) {
  return rc::gen::elementOf(std::move(choices));
}

rc::Gen<operation> operation_generator(const scenario_space& space) {
  using namespace rc;
  return gen::build<operation>(
      gen::set(&operation::client, gen::inRange<std::uint32_t>(0, 4)),
      gen::set(&operation::kind, pick(space.kinds)),
      gen::set(&operation::resource, gen::inRange<std::uint32_t>(0, 3)),
      gen::set(&operation::set_size, gen::inRange<std::uint32_t>(1, 4)),
      gen::set(&operation::permits, gen::inRange<std::uint32_t>(1, 4)),
      gen::set(&operation::ttl_ms, pick<std::uint32_t>({200, 500, 1000, 3000})),
      // Some start with the client's previous one: concurrent leases whose renewals fall due
      // in one tick, and go out in one batch.
      gen::set(&operation::start_after_ms,
               gen::weightedOneOf<std::uint32_t>(
                   {{1, gen::just<std::uint32_t>(0)}, {3, gen::inRange<std::uint32_t>(0, 120)}})),
      // Mostly short holds, some very short (a release that lands while a waiter's round is in
      // flight), a few long ones (renewals, waiters that give up).
      gen::set(&operation::hold_ms,
               gen::weightedOneOf<std::uint32_t>({{2, gen::inRange<std::uint32_t>(0, 10)},
                                                  {6, gen::inRange<std::uint32_t>(10, 300)},
                                                  {1, gen::inRange<std::uint32_t>(300, 1500)}})),
      gen::set(&operation::steps, gen::inRange<std::uint32_t>(1, 6)),
      gen::set(&operation::fencing, gen::weightedElement<bool>({{1, true}, {1, false}})),
      gen::set(&operation::auto_renew, gen::weightedElement<bool>({{3, true}, {1, false}})),
      gen::set(&operation::extend_ms,
               gen::weightedElement<std::uint32_t>({{4, 0}, {1, 300}, {1, 2000}})),
      gen::set(&operation::cancel_after_ms,
               gen::weightedElement<std::uint32_t>({{6, 0}, {1, 5}, {1, 40}, {1, 400}})),
      gen::set(&operation::wait_ms,
               gen::weightedElement<std::uint32_t>({{3, 0}, {1, 100}, {1, 1500}})),
      gen::set(&operation::concurrent, gen::weightedElement<bool>({{5, false}, {1, true}})));
}

rc::Gen<fault> fault_generator(const scenario_space& space) {
  using namespace rc;
  return gen::build<fault>(gen::set(&fault::kind, pick(space.faults)),
                           gen::set(&fault::at_ms, gen::inRange<std::uint32_t>(0, 4000)),
                           gen::set(&fault::node, gen::inRange<std::uint32_t>(0, 5)),
                           gen::set(&fault::client, gen::inRange<std::uint32_t>(0, 4)),
                           gen::set(&fault::duration_ms, gen::inRange<std::uint32_t>(0, 800)));
}

}  // namespace

rc::Gen<scenario> scenario_generator(const scenario_space& space) {
  using namespace rc;
  const auto late = space.network_faults
                        ? gen::weightedElement<std::uint32_t>({{3, 0}, {1, 5}, {1, 30}})
                        : gen::just<std::uint32_t>(0);
  const auto resets = space.network_faults
                          ? gen::weightedElement<std::uint32_t>({{3, 0}, {1, 5}, {1, 20}})
                          : gen::just<std::uint32_t>(0);
  // No more sentinel- and cluster-shaped nodes than nodes. And a node_timeout shorter than the
  // network's round trip would be a misconfiguration, not a fault: every request would time out,
  // and the runs without faults could not judge promptness.
  const auto consistent = [](scenario s) {
    s.sentinel_nodes = std::min(s.sentinel_nodes, s.nodes);
    s.cluster_nodes = std::min(s.cluster_nodes, s.nodes - s.sentinel_nodes);
    const std::uint32_t round_trip_ms = 2 * s.delay_high_us / 1000;
    if (s.node_timeout_ms == 0) s.node_timeout_ms = 1;
    while (s.node_timeout_ms < 2 * round_trip_ms)
      s.node_timeout_ms *= 2;
    // An operation that starts with its client's previous one, which runs concurrently, is
    // that one's twin in TTL, renewal and hold: their renewals fall due in one tick and go out
    // in one batch (ops/extend.cpp), which would otherwise happen by chance only.
    const std::uint32_t clients = std::max<std::uint32_t>(1, s.clients);
    for (std::size_t i = 1; i < s.operations.size(); ++i) {
      operation& op = s.operations[i];
      if (op.start_after_ms != 0) continue;
      for (std::size_t j = i; j-- > 0;) {
        const operation& before = s.operations[j];
        if (before.client % clients != op.client % clients) continue;
        if (before.concurrent) {
          op.ttl_ms = before.ttl_ms;
          op.auto_renew = before.auto_renew;
          op.hold_ms = before.hold_ms;
        }
        break;
      }
    }
    return s;
  };
  return gen::map(
      gen::build<scenario>(
          gen::set(&scenario::seed, gen::noShrink(gen::inRange<std::uint64_t>(0, 1ULL << 62))),
          gen::set(&scenario::nodes, gen::weightedElement<std::uint32_t>({{1, 1}, {2, 3}, {4, 5}})),
          // Mostly standalone servers; sometimes one node, sometimes every node, behind sentinels.
          gen::set(&scenario::sentinel_nodes,
                   gen::weightedElement<std::uint32_t>({{4, 0}, {1, 1}, {1, 5}})),
          gen::set(&scenario::cluster_nodes,
                   gen::weightedElement<std::uint32_t>({{4, 0}, {1, 1}, {1, 5}})),
          gen::set(&scenario::clients, gen::inRange<std::uint32_t>(1, 5)),
          // Often one lock for everybody: contention, waiting across clients, hand-offs.
          gen::set(&scenario::resources,
                   gen::weightedElement<std::uint32_t>({{2, 1}, {1, 2}, {1, 3}})),
          gen::set(&scenario::node_drift_ppm,
                   gen::container<std::vector<std::int32_t>>(5, gen::inRange(-9000, 9001))),
          gen::set(&scenario::node_timeout_ms, pick<std::uint32_t>({20, 50, 100})),
          // Mostly a data centre's network; sometimes nodes far apart (a round trip of up to 40
          // ms), where a waiter's round is long enough for a release's announcements to arrive in
          // it.
          gen::set(&scenario::delay_high_us, gen::weightedElement<std::uint32_t>(
                                                 {{2, 100}, {2, 400}, {2, 3000}, {1, 20000}})),
          gen::set(&scenario::late_permille, late),
          gen::set(&scenario::late_most_ms, pick<std::uint32_t>({10, 100, 300})),
          gen::set(&scenario::reset_after_execute_permille, resets),
          // Mostly network faults for a while, then calm, where liveness is judged again.
          gen::set(&scenario::network_calm_ms,
                   gen::weightedElement<std::uint32_t>({{1, 0}, {2, 5000}})),
          gen::set(&scenario::renewal_tick_ms,
                   gen::weightedElement<std::uint32_t>({{1, 0}, {1, 40}})),
          // The size bounds a container's length; the elements are drawn at the nominal size, where
          // rapidcheck's ranges are whole (it scales them down with the size).
          gen::set(&scenario::operations,
                   gen::resize(static_cast<int>(space.most_operations),
                               gen::container<std::vector<operation>>(
                                   gen::resize(rc::kNominalSize, operation_generator(space))))),
          // A third of the runs without injected faults, where promptness and tidiness are judged.
          gen::set(&scenario::faults,
                   gen::weightedOneOf<std::vector<fault>>(
                       {{1, gen::just(std::vector<fault>{})},
                        {2, gen::resize(static_cast<int>(space.most_faults),
                                        gen::container<std::vector<fault>>(gen::resize(
                                            rc::kNominalSize, fault_generator(space))))}}))),
      consistent);
}

}  // namespace redlock::sim
