#ifndef REDLOCK_PROMETHEUS_HPP
#define REDLOCK_PROMETHEUS_HPP

// Part of the component redlock::prometheus (find_package(redlock COMPONENTS prometheus)), built
// when prometheus-cpp is found; link that target, which brings prometheus-cpp::core.

#include "redlock/observer.hpp"

#include <memory>

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace redlock {

/// An observer that keeps the client's figures as Prometheus metrics in a registry of the user's
/// (expose it with prometheus-cpp's Exposer, or push it with its Gateway). Families:
///  - redlock_acquire_seconds (histogram), label outcome = acquired | not_acquired | node_failure |
///    cancelled | error: how long acquires took, queueing and waiting included. not_acquired and
///    node_failure are the redlock::condition groups; cancelled is operation_aborted.
///  - redlock_acquire_rounds (histogram): rounds per acquire, whatever its outcome.
///  - redlock_hold_seconds (histogram): how long leases were held, from acquired to released or
///    lost.
///  - redlock_extensions_total (counter), label outcome = extended | not_held | failed.
///  - redlock_releases_total (counter), label outcome = released | not_held | failed.
///  - redlock_leases_lost_total (counter).
///  - redlock_node_up (gauge), label node = the node's address: 1 while its link is up, 0 while
///    down; absent until its first connect attempt.
///
/// No label names a resource: resource names are unbounded, and so would be the series. For
/// figures per resource (or per group of them), write an observer of your own; it may forward to
/// this one.
///
/// @par Buckets
/// Acquire latency from 50 us to 10 s, hold time from 1 ms to 1 h.
///
/// @par Thread safety
/// The metrics are prometheus-cpp's, safe to update and scrape from any thread, so one
/// prometheus_observer may serve several clients on several executors. The registry must outlive
/// it; the families stay registered after it is destroyed (prometheus-cpp cannot remove a family),
/// so create one per registry. Throws what prometheus-cpp throws when a family of the same name
/// with other labels is registered already.
///
/// @see The guide: @ref md_docs_metrics.
class prometheus_observer final : public observer {
 public:
  /// Registers the families in `registry`.
  explicit prometheus_observer(prometheus::Registry& registry);
  ~prometheus_observer() override;
  prometheus_observer(const prometheus_observer&) = delete;
  prometheus_observer& operator=(const prometheus_observer&) = delete;

  /// Observes the acquire's time in redlock_acquire_seconds, under its outcome, and its rounds in
  /// redlock_acquire_rounds.
  void on_acquire(const acquire_event& event) override;
  /// Counts the extension in redlock_extensions_total: extended, not_held, or failed (any other
  /// error).
  void on_extend(const lease_event& event) override;
  /// Counts the loss in redlock_leases_lost_total and observes the lease's hold time in
  /// redlock_hold_seconds.
  void on_lost(const lease_event& event) override;
  /// Counts the release in redlock_releases_total: released, not_held, or failed (any other
  /// error); unless not_held, observes the lease's hold time in redlock_hold_seconds.
  void on_release(const lease_event& event) override;
  /// Sets redlock_node_up for the node's address: 1 when its link is up, 0 when it is down.
  void on_node(const node_event& event) override;

 private:
  struct metrics;
  std::unique_ptr<metrics> metrics_;
};

}  // namespace redlock

#endif
