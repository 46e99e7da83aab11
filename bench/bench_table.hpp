// A human-readable summary of redlock_bench's median lines (--table), printed after them.
#ifndef REDLOCK_BENCH_TABLE_HPP
#define REDLOCK_BENCH_TABLE_HPP

#include "bench_support.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace redlock::bench {

struct table_row {
  std::string workload;
  std::vector<figure> medians;
};

// One row per workload: its name, the failed operations of all its runs, and every other median
// figure as "name value", wrapped under the row at `width` columns so that workloads with many
// figures stay readable.
std::string format_table(const std::vector<table_row>& rows, int runs, std::size_t nodes,
                         std::size_t width = 100);

}  // namespace redlock::bench

#endif
