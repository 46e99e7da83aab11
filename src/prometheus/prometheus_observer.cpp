#include "redlock/error.hpp"
#include "redlock/prometheus.hpp"

#include <boost/asio/error.hpp>

#include <chrono>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <string>

namespace redlock {

namespace {

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Lock latencies: a local hand-off takes tens of microseconds, a round on loopback a few hundred,
// a wait behind a holder up to its TTL (seconds).
prometheus::Histogram::BucketBoundaries acquire_buckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,    0.1,    0.25,    0.5,    1.0,   2.5,    5.0,   10.0};
}

prometheus::Histogram::BucketBoundaries hold_buckets() {
  return {0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0};
}

prometheus::Histogram::BucketBoundaries round_buckets() {
  return {1, 2, 3, 5, 10, 20, 50, 100};
}

}  // namespace

// Every series but the nodes' is made once here, so that an event only updates atomics.
struct prometheus_observer::metrics {
  explicit metrics(prometheus::Registry& registry)
      : acquire_family(prometheus::BuildHistogram()
                           .Name("redlock_acquire_seconds")
                           .Help("Time from the call of an acquire to its outcome, by outcome")
                           .Register(registry)),
        acquired(acquire_family.Add({{"outcome", "acquired"}}, acquire_buckets())),
        not_acquired(acquire_family.Add({{"outcome", "not_acquired"}}, acquire_buckets())),
        node_failure(acquire_family.Add({{"outcome", "node_failure"}}, acquire_buckets())),
        cancelled(acquire_family.Add({{"outcome", "cancelled"}}, acquire_buckets())),
        acquire_error(acquire_family.Add({{"outcome", "error"}}, acquire_buckets())),
        rounds(prometheus::BuildHistogram()
                   .Name("redlock_acquire_rounds")
                   .Help("Rounds of SET requests per acquire")
                   .Register(registry)
                   .Add({}, round_buckets())),
        hold(prometheus::BuildHistogram()
                 .Name("redlock_hold_seconds")
                 .Help("How long leases were held, until released or lost")
                 .Register(registry)
                 .Add({}, hold_buckets())),
        extension_family(
            prometheus::BuildCounter()
                .Name("redlock_extensions_total")
                .Help("Extensions of held leases (renewals and async_extend), by outcome")
                .Register(registry)),
        extended(extension_family.Add({{"outcome", "extended"}})),
        extension_not_held(extension_family.Add({{"outcome", "not_held"}})),
        extension_failed(extension_family.Add({{"outcome", "failed"}})),
        release_family(prometheus::BuildCounter()
                           .Name("redlock_releases_total")
                           .Help("Releases of held leases, by outcome")
                           .Register(registry)),
        released(release_family.Add({{"outcome", "released"}})),
        release_not_held(release_family.Add({{"outcome", "not_held"}})),
        release_failed(release_family.Add({{"outcome", "failed"}})),
        lost(prometheus::BuildCounter()
                 .Name("redlock_leases_lost_total")
                 .Help("Held leases lost before their release")
                 .Register(registry)
                 .Add({})),
        node_up(prometheus::BuildGauge()
                    .Name("redlock_node_up")
                    .Help("1 while the node's link is up, 0 while it is down")
                    .Register(registry)) {}

  prometheus::Family<prometheus::Histogram>& acquire_family;
  prometheus::Histogram& acquired;
  prometheus::Histogram& not_acquired;
  prometheus::Histogram& node_failure;
  prometheus::Histogram& cancelled;
  prometheus::Histogram& acquire_error;
  prometheus::Histogram& rounds;
  prometheus::Histogram& hold;
  prometheus::Family<prometheus::Counter>& extension_family;
  prometheus::Counter& extended;
  prometheus::Counter& extension_not_held;
  prometheus::Counter& extension_failed;
  prometheus::Family<prometheus::Counter>& release_family;
  prometheus::Counter& released;
  prometheus::Counter& release_not_held;
  prometheus::Counter& release_failed;
  prometheus::Counter& lost;
  prometheus::Family<prometheus::Gauge>& node_up;

  prometheus::Histogram& acquire_outcome(const boost::system::error_code& ec) {
    if (!ec) return acquired;
    if (ec == boost::asio::error::operation_aborted) return cancelled;
    if (ec == condition::not_acquired) return not_acquired;
    if (ec == condition::node_failure) return node_failure;
    return acquire_error;
  }
};

prometheus_observer::prometheus_observer(prometheus::Registry& registry)
    : metrics_(std::make_unique<metrics>(registry)) {}

prometheus_observer::~prometheus_observer() = default;

void prometheus_observer::on_acquire(const acquire_event& event) {
  metrics_->acquire_outcome(event.error).Observe(seconds(event.took));
  metrics_->rounds.Observe(static_cast<double>(event.rounds));
}

void prometheus_observer::on_extend(const lease_event& event) {
  if (!event.error) return metrics_->extended.Increment();
  if (event.error == error::not_held) return metrics_->extension_not_held.Increment();
  metrics_->extension_failed.Increment();
}

void prometheus_observer::on_lost(const lease_event& event) {
  metrics_->lost.Increment();
  metrics_->hold.Observe(seconds(event.held));
}

void prometheus_observer::on_release(const lease_event& event) {
  // Released, nearly always: no comparison with a category then.
  if (!event.error) {
    metrics_->released.Increment();
  } else if (event.error == error::not_held) {
    return metrics_->release_not_held.Increment();
  } else {
    metrics_->release_failed.Increment();
  }
  // Failed or not, the lease is not held here any more: its hold ends now.
  metrics_->hold.Observe(seconds(event.held));
}

void prometheus_observer::on_node(const node_event& event) {
  // Family::Add returns the existing series for labels it has seen, under its own lock.
  metrics_->node_up.Add({{"node", std::string(event.address)}}).Set(event.up ? 1.0 : 0.0);
}

}  // namespace redlock
