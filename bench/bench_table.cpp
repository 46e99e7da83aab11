#include "bench_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace redlock::bench {

namespace {

// "errors" and its sum over the runs get their own column; every other figure is listed.
bool own_column(std::string_view name) {
  return name == "errors" || name == "errors_total";
}

std::string errors_cell(const std::vector<figure>& medians) {
  for (const auto& f : medians)
    if (f.name == "errors_total") return fmt::format("{:.0f}", f.value);
  return "-";
}

}  // namespace

std::string format_table(const std::vector<table_row>& rows, int runs, std::size_t nodes,
                         std::size_t width) {
  std::size_t name_width = std::string_view("workload").size();
  for (const auto& row : rows)
    name_width = std::max(name_width, row.workload.size());
  constexpr std::size_t errors_width = 6;
  const std::size_t indent = name_width + 2 + errors_width + 2;

  std::string out = fmt::format(
      "\nMedians of {} run{} on {} nodes; errors: failed operations over all the runs\n", runs,
      runs == 1 ? "" : "s", nodes);
  out += fmt::format("{:<{}}  {:>{}}  {}\n", "workload", name_width, "errors", errors_width,
                     "figures");
  out += std::string(std::max(width, indent + 7), '-') + "\n";
  for (const auto& row : rows) {
    std::string line = fmt::format("{:<{}}  {:>{}}", row.workload, name_width,
                                   errors_cell(row.medians), errors_width);
    std::size_t column = line.size();
    bool first = true;
    for (const auto& f : row.medians) {
      if (own_column(f.name)) continue;
      const std::string cell = fmt::format("{} {:.{}f}", f.name, f.value, f.decimals);
      if (!first && column + 2 + cell.size() > width) {
        out += line + "\n";
        line = std::string(indent - 2, ' ');
        column = line.size();
        first = true;
      }
      line += "  " + cell;
      column += 2 + cell.size();
      first = false;
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace redlock::bench
