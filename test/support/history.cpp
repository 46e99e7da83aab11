#include "support/history.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <istream>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string_view>
#include <tuple>
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

constexpr std::string_view shared_field = "shared";

std::string event::to_line() const {
  return fmt::format("{} {} {} {} {} {} {} {} {} {}{}{}", line_tag, encode(process),
                     encode(resource), encode(token), to_string(kind), to_string(result), invoke,
                     complete, valid_until, ttl, shared ? " " : "", shared ? shared_field : "");
}

event event::from_line(std::string_view line) {
  std::vector<std::string_view> fields;
  while (!line.empty()) {
    const auto space = line.find(' ');
    fields.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  if (fields.size() < 10 || fields.size() > 11 || fields[0] != line_tag) {
    throw std::invalid_argument(
        fmt::format("history: expected '{}' and 9 fields (10 for a shared lease), got {} fields",
                    line_tag, fields.size()));
  }
  if (fields.size() == 11 && fields[10] != shared_field) {
    throw std::invalid_argument(
        fmt::format("history: the eleventh field is '{}', not '{}'", fields[10], shared_field));
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
  e.shared = fields.size() == 11;
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
      result.push_back(
          {e.process, e.resource, e.token, e.invoke, e.invoke + e.ttl, true, e.shared});
    } else if (e.result == op_result::ok) {
      by_lease[{e.resource, e.token}] = result.size();
      result.push_back(
          {e.process, e.resource, e.token, e.complete, e.valid_until, false, e.shared});
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
  return fmt::format("{} [{}{}{}]", h.process, h.token.substr(0, 8), h.shared ? ", reader" : "",
                     h.maybe ? ", unknown outcome" : "");
}

// Which lease a hold belongs to: holds of one lease (one resource, one token) count once.
struct lease_key {
  std::string resource;
  std::string token;  // empty: a lease of its own (`index` tells it apart)
  bool maybe = false;
  std::size_t index = 0;
  bool operator<(const lease_key& other) const {
    return std::tie(resource, token, maybe, index) <
           std::tie(other.resource, other.token, other.maybe, other.index);
  }
};

lease_key key_of(const std::vector<hold>& holds, std::size_t i) {
  const hold& h = holds[i];
  if (h.token.empty()) return {h.resource, {}, h.maybe, i};
  return {h.resource, h.token, h.maybe, 0};
}

// What a group allows at one instant, given how many distinct leases hold it: of them, how many
// are not shared (writers, or plain leases) and how many are shared (readers).
struct holder_rule {
  std::size_t limit = 1;         // at most this many leases at once
  bool readers_writers = false;  // instead: readers together, or one writer alone

  bool too_many(std::size_t exclusive, std::size_t shared) const {
    if (readers_writers) return exclusive > 1 || (exclusive == 1 && shared > 0);
    return exclusive + shared > limit;
  }
};

// The holds of one group, swept in time. Each hold is cut short by epsilon, [begin, end -
// epsilon): several holds then share an instant exactly when all of them overlapped by more than
// epsilon (intervals on a line meet in a common point when every two of them meet).
void sweep_group(const std::vector<hold>& holds, const std::vector<std::size_t>& members,
                 const std::string& group, const holder_rule& rule, mono_ns epsilon,
                 check_result& result) {
  struct edge {
    mono_ns at;
    bool begins;
    std::size_t hold;
  };
  std::vector<edge> edges;
  for (const std::size_t i : members) {
    if (holds[i].end - epsilon <= holds[i].begin) continue;  // too short to overlap by epsilon
    edges.push_back({holds[i].begin, true, i});
    edges.push_back({holds[i].end - epsilon, false, i});
  }
  // Ends before beginnings at one instant: the shortened holds are half-open.
  std::sort(edges.begin(), edges.end(), [](const edge& a, const edge& b) {
    return std::tie(a.at, a.begins, a.hold) < std::tie(b.at, b.begins, b.hold);
  });

  std::map<lease_key, std::size_t> active;  // lease -> how many of its holds are active
  std::vector<std::size_t> active_holds;
  // Distinct leases among the active holds, [shared]: certain ones, and all (maybe ones too).
  std::size_t certain[2] = {0, 0};
  std::size_t all[2] = {0, 0};
  enum class state { fine, ambiguous, violated };
  state now = state::fine;
  overlap open;
  std::vector<std::size_t> open_holders;  // indices into `holds`
  const auto add_holder = [&](std::size_t i) {
    if (now == state::violated && holds[i].maybe) return;  // not one of the certain ones
    if (std::find(open_holders.begin(), open_holders.end(), i) == open_holders.end())
      open_holders.push_back(i);
  };
  const auto close = [&](mono_ns at) {
    if (now == state::fine) return;
    open.by = at + epsilon - open.from;
    std::sort(open_holders.begin(), open_holders.end(), [&](std::size_t a, std::size_t b) {
      return std::tie(holds[a].begin, a) < std::tie(holds[b].begin, b);
    });
    for (const std::size_t i : open_holders)
      open.holders.push_back(holds[i]);
    (now == state::violated ? result.violations : result.ambiguous).push_back(std::move(open));
    open = {};
    open_holders.clear();
  };
  for (std::size_t e = 0; e < edges.size();) {
    const mono_ns at = edges[e].at;
    for (; e < edges.size() && edges[e].at == at; ++e) {
      const std::size_t i = edges[e].hold;
      const lease_key key = key_of(holds, i);
      if (edges[e].begins) {
        if (active[key]++ == 0) {
          ++all[holds[i].shared];
          if (!holds[i].maybe) ++certain[holds[i].shared];
        }
        active_holds.push_back(i);
        if (now != state::fine) add_holder(i);
      } else {
        if (--active[key] == 0) {
          active.erase(key);
          --all[holds[i].shared];
          if (!holds[i].maybe) --certain[holds[i].shared];
        }
        active_holds.erase(std::find(active_holds.begin(), active_holds.end(), i));
      }
    }
    state next = state::fine;
    if (rule.too_many(certain[0], certain[1])) {
      next = state::violated;
    } else if (rule.too_many(all[0], all[1]) && certain[0] + certain[1] > 0) {
      next = state::ambiguous;
    }
    if (next == now) continue;
    close(at);
    now = next;
    if (now == state::fine) continue;
    open.group = group;
    open.limit = rule.limit;
    open.readers_writers = rule.readers_writers;
    open.from = at;
    for (const std::size_t i : active_holds)
      add_holder(i);
  }
}

std::string describe_overlap(const overlap& o, mono_ns origin) {
  const bool one_resource = std::all_of(o.holders.begin(), o.holders.end(),
                                        [&](const hold& h) { return h.resource == o.group; });
  std::string who;
  for (std::size_t i = 0; i < o.holders.size(); ++i) {
    if (i > 0) who += i + 1 == o.holders.size() ? " and " : ", ";
    who += describe_hold(o.holders[i]);
    if (!one_resource) who += fmt::format(" on \"{}\"", o.holders[i].resource);
  }
  const std::string how = o.holders.size() == 2 ? "both held" : "all held";
  const std::string limit = o.readers_writers ? " (a writer with anyone)"
                            : o.limit == 1    ? ""
                                              : fmt::format(" at once (at most {})", o.limit);
  return fmt::format("{} {} \"{}\"{} for {:.3f} ms from {:+.3f} ms", who, how, o.group, limit,
                     static_cast<double>(o.by) / 1e6, static_cast<double>(o.from - origin) / 1e6);
}

}  // namespace

std::string each_resource(std::string_view resource) {
  return std::string(resource);
}

std::string semaphore_of_slot(std::string_view resource) {
  constexpr std::string_view marker = ":slot:";
  const auto at = resource.rfind(marker);
  if (at == std::string_view::npos) return std::string(resource);
  const std::string_view digits = resource.substr(at + marker.size());
  const bool numbered = !digits.empty() && std::all_of(digits.begin(), digits.end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
  return std::string(numbered ? resource.substr(0, at) : resource);
}

namespace {

check_result check_holders(const std::vector<event>& events, const group_of_fn& group_of,
                           const holder_rule& rule, std::chrono::nanoseconds epsilon) {
  check_result result;
  result.holds = holds_of(events);
  if (!events.empty()) {
    result.origin =
        std::min_element(events.begin(), events.end(), [](const event& a, const event& b) {
          return a.invoke < b.invoke;
        })->invoke;
  }
  std::map<std::string, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < result.holds.size(); ++i)
    groups[group_of(result.holds[i].resource)].push_back(i);
  for (const auto& [group, members] : groups)
    sweep_group(result.holds, members, group, rule, epsilon.count(), result);
  return result;
}

}  // namespace

check_result check_at_most(const std::vector<event>& events, const group_of_fn& group_of,
                           std::size_t limit, std::chrono::nanoseconds epsilon) {
  return check_holders(events, group_of, holder_rule{limit, false}, epsilon);
}

check_result check_readers_writers(const std::vector<event>& events,
                                   std::chrono::nanoseconds epsilon) {
  return check_holders(events, each_resource, holder_rule{1, true}, epsilon);
}

check_result check_mutual_exclusion(const std::vector<event>& events,
                                    std::chrono::nanoseconds epsilon) {
  return check_at_most(events, each_resource, 1, epsilon);
}

std::string check_result::describe() const {
  std::string out = fmt::format("{} holds, {} violations, {} ambiguous overlaps", holds.size(),
                                violations.size(), ambiguous.size());
  constexpr std::size_t shown = 10;
  for (std::size_t i = 0; i < std::min(shown, violations.size()); ++i)
    out += "\n  " + describe_overlap(violations[i], origin);
  return out;
}

}  // namespace redlock::test
