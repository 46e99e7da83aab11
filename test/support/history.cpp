#include "support/history.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <istream>
#include <map>
#include <ostream>
#include <stdexcept>
#include <utility>

namespace redlock::test {

mono_ns to_mono_ns(std::chrono::steady_clock::time_point t) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

mono_ns mono_now() noexcept {
  return to_mono_ns(std::chrono::steady_clock::now());
}

std::string_view to_string(op_kind kind) noexcept {
  switch (kind) {
    case op_kind::acquire:
      return "acquire";
    case op_kind::extend:
      return "extend";
    case op_kind::release:
      return "release";
    case op_kind::lost:
      return "lost";
  }
  return "?";
}

std::string_view to_string(op_result result) noexcept {
  switch (result) {
    case op_result::ok:
      return "ok";
    case op_result::failed:
      return "failed";
    case op_result::unknown:
      return "unknown";
  }
  return "?";
}

namespace {

// Fields are separated by single spaces; text is percent-encoded so that it never contains one,
// and "~" stands for an empty text.
bool plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '/' || c == ':' || c == '-';
}

std::string encode(std::string_view text) {
  if (text.empty()) return "~";
  std::string out;
  for (const char c : text) {
    if (plain(c)) {
      out += c;
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

std::string decode(std::string_view field, std::string_view name) {
  if (field == "~") return {};
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '%') {
      out += field[i];
      continue;
    }
    unsigned value = 0;
    const char* first = field.data() + i + 1;
    const char* last = first + std::min<std::size_t>(2, field.size() - i - 1);
    const auto [end, ec] = std::from_chars(first, last, value, 16);
    if (ec != std::errc() || end != first + 2) {
      throw std::invalid_argument(fmt::format("history: bad escape in field {}", name));
    }
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

mono_ns number(std::string_view field, std::string_view name) {
  mono_ns value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec != std::errc() || end != field.data() + field.size()) {
    throw std::invalid_argument(
        fmt::format("history: field {} is not a number: '{}'", name, field));
  }
  return value;
}

template <class Enum, std::size_t N>
Enum named(std::string_view field, std::string_view name, const Enum (&values)[N]) {
  for (const Enum value : values) {
    if (to_string(value) == field) return value;
  }
  throw std::invalid_argument(fmt::format("history: unknown {} '{}'", name, field));
}

constexpr std::string_view line_tag = "lock-event/1";

}  // namespace

std::string event::to_line() const {
  return fmt::format("{} {} {} {} {} {} {} {} {} {}", line_tag, encode(process), encode(resource),
                     encode(token), to_string(kind), to_string(result), invoke, complete,
                     valid_until, ttl);
}

event event::from_line(std::string_view line) {
  std::vector<std::string_view> fields;
  while (!line.empty()) {
    const auto space = line.find(' ');
    fields.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  if (fields.size() != 10 || fields[0] != line_tag) {
    throw std::invalid_argument(
        fmt::format("history: expected '{}' and 9 fields, got {} fields", line_tag, fields.size()));
  }
  static constexpr op_kind kinds[] = {op_kind::acquire, op_kind::extend, op_kind::release,
                                      op_kind::lost};
  static constexpr op_result results[] = {op_result::ok, op_result::failed, op_result::unknown};
  event e;
  e.process = decode(fields[1], "process");
  e.resource = decode(fields[2], "resource");
  e.token = decode(fields[3], "token");
  e.kind = named(fields[4], "kind", kinds);
  e.result = named(fields[5], "result", results);
  e.invoke = number(fields[6], "invoke");
  e.complete = number(fields[7], "complete");
  e.valid_until = number(fields[8], "valid_until");
  e.ttl = number(fields[9], "ttl");
  return e;
}

void history::record(event e) {
  const std::lock_guard lock(mutex_);
  events_.push_back(std::move(e));
}

std::vector<event> history::events() const {
  const std::lock_guard lock(mutex_);
  return events_;
}

void history::write(std::ostream& out) const {
  for (const auto& e : events())
    out << e.to_line() << '\n';
}

std::vector<event> history::read_lines(std::istream& in) {
  std::vector<event> result;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) result.push_back(event::from_line(line));
  }
  return result;
}

namespace {

// The certain holds, one per successful acquire, and the maybe-holds of unknown acquires.
std::vector<hold> holds_of(const std::vector<event>& events) {
  std::vector<hold> result;
  std::map<std::pair<std::string, std::string>, std::size_t> by_lease;  // (resource, token)
  for (const auto& e : events) {
    if (e.kind != op_kind::acquire) continue;
    if (e.result == op_result::unknown) {
      result.push_back({e.process, e.resource, e.token, e.invoke, e.invoke + e.ttl, true});
    } else if (e.result == op_result::ok) {
      by_lease[{e.resource, e.token}] = result.size();
      result.push_back({e.process, e.resource, e.token, e.complete, e.valid_until, false});
    }
  }

  // Extensions in the order they completed, each only if it came while the lease was still
  // believed (a late confirmation does not bring a lapsed lock back). A confirmed one sets the end
  // to the validity the client reported after it (longer, or shorter when it asked for less); a
  // failed or unknown one can only shorten it: an extension that may have run on the nodes
  // shortens what its holder may believe, whatever its answer.
  std::vector<const event*> later;
  for (const auto& e : events) {
    if (e.kind != op_kind::acquire) later.push_back(&e);
  }
  std::sort(later.begin(), later.end(),
            [](const event* a, const event* b) { return a->complete < b->complete; });
  std::map<std::size_t, mono_ns> cut;  // hold index -> when its holder stopped believing
  for (const event* e : later) {
    const auto found = by_lease.find({e->resource, e->token});
    if (found == by_lease.end()) continue;
    hold& h = result[found->second];
    switch (e->kind) {
      case op_kind::extend:
        if (e->complete > h.end || e->valid_until == 0) break;
        h.end = e->result == op_result::ok ? e->valid_until : std::min(h.end, e->valid_until);
        break;
      case op_kind::release: {
        // The holder stops relying on the lock when it asks for the release.
        auto [at, fresh] = cut.try_emplace(found->second, e->invoke);
        if (!fresh) at->second = std::min(at->second, e->invoke);
        break;
      }
      case op_kind::lost: {
        auto [at, fresh] = cut.try_emplace(found->second, e->complete);
        if (!fresh) at->second = std::min(at->second, e->complete);
        break;
      }
      case op_kind::acquire:
        break;
    }
  }
  for (const auto& [index, at] : cut)
    result[index].end = std::min(result[index].end, at);
  return result;
}

std::string describe_hold(const hold& h) {
  return fmt::format("{} [{}{}]", h.process, h.token.substr(0, 8),
                     h.maybe ? ", unknown outcome" : "");
}

}  // namespace

check_result check_mutual_exclusion(const std::vector<event>& events,
                                    std::chrono::nanoseconds epsilon) {
  check_result result;
  result.holds = holds_of(events);
  std::vector<const hold*> sorted;
  for (const auto& h : result.holds)
    sorted.push_back(&h);
  std::sort(sorted.begin(), sorted.end(), [](const hold* a, const hold* b) {
    return std::tie(a->resource, a->begin) < std::tie(b->resource, b->begin);
  });
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const hold& a = *sorted[i];
    for (std::size_t j = i + 1; j < sorted.size(); ++j) {
      const hold& b = *sorted[j];
      if (b.resource != a.resource || b.begin >= a.end) break;
      if (a.maybe && b.maybe) continue;
      if (!a.token.empty() && a.token == b.token) continue;  // one lease
      const mono_ns by = std::min(a.end, b.end) - b.begin;
      if (by <= epsilon.count()) continue;
      (a.maybe || b.maybe ? result.ambiguous : result.violations).push_back({a, b, by});
    }
  }
  return result;
}

std::string check_result::describe() const {
  std::string out = fmt::format("{} holds, {} violations, {} ambiguous overlaps", holds.size(),
                                violations.size(), ambiguous.size());
  constexpr std::size_t shown = 10;
  for (std::size_t i = 0; i < std::min(shown, violations.size()); ++i) {
    const auto& v = violations[i];
    out += fmt::format("\n  {} and {} both held \"{}\" for {:.3f} ms", describe_hold(v.first),
                       describe_hold(v.second), v.first.resource, static_cast<double>(v.by) / 1e6);
  }
  return out;
}

}  // namespace redlock::test
