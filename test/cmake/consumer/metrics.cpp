// consumer_metrics: a program outside the redlock tree that uses the component redlock::prometheus
// with nothing but that target. It feeds a prometheus_observer one event of each kind and checks
// that the text exposition names every family with the right values. Exit 1 on a mismatch.

#include <redlock/prometheus.hpp>
#include <redlock/redlock.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <string>

int main() {
  using namespace std::chrono_literals;
  auto registry = std::make_shared<prometheus::Registry>();
  redlock::prometheus_observer metrics(*registry);

  metrics.on_acquire({.resource = "r", .error = {}, .took = 2ms, .rounds = 1, .granted_nodes = 3});
  metrics.on_acquire({.resource = "r",
                      .error = redlock::error::wait_timeout,
                      .took = 1s,
                      .rounds = 7,
                      .granted_nodes = 1});
  metrics.on_extend({.resource = "r", .error = {}, .held = 5s});
  metrics.on_lost({.resource = "r", .error = redlock::error::lock_lost, .held = 6s});
  metrics.on_release({.resource = "r", .error = {}, .held = 3s});
  metrics.on_node({.node = 0, .address = "127.0.0.1:7000", .up = true, .error = {}});

  const std::string text = prometheus::TextSerializer().Serialize(registry->Collect());
  const char* wanted[] = {
      "redlock_acquire_seconds_count{outcome=\"acquired\"} 1",
      "redlock_acquire_seconds_count{outcome=\"not_acquired\"} 1",
      "redlock_acquire_rounds_sum 8",
      "redlock_hold_seconds_count 2",
      "redlock_extensions_total{outcome=\"extended\"} 1",
      "redlock_releases_total{outcome=\"released\"} 1",
      "redlock_leases_lost_total 1",
      "redlock_node_up{node=\"127.0.0.1:7000\"} 1",
  };
  int missing = 0;
  for (const char* line : wanted) {
    if (text.find(line) == std::string::npos) {
      std::cerr << "consumer_metrics: the exposition lacks \"" << line << "\"\n";
      ++missing;
    }
  }
  if (missing != 0) {
    std::cerr << text;
    return 1;
  }
  std::cout << "consumer_metrics: every family is exposed\n";
  return 0;
}
