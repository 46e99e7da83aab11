// The workloads of redlock_bench, one file each; main() lists them in its table.
#ifndef REDLOCK_BENCH_WORKLOADS_HPP
#define REDLOCK_BENCH_WORKLOADS_HPP

#include <string>

#include "bench_support.hpp"

namespace redlock::bench {

// One caller, sequential acquire + release on one key; plain SET and a SET fan-out beside it.
run_result run_latency(const run_context& context);
std::string latency_params(bool quick);

// Distinct keys, 256 coroutines in flight, try_acquire + release pairs.
run_result run_throughput(const run_context& context);
std::string throughput_params(bool quick);

// Contenders in one client on one key, each doing a slow read-modify-write of a witness counter.
run_result run_contention(const run_context& context);
std::string contention_params(bool quick);

}  // namespace redlock::bench

#endif
