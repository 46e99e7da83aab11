#include "rw_status.hpp"

#include "json_line.hpp"
#include "lock/key_names.hpp"
#include "lock/scripts.hpp"
#include "messages.hpp"
#include "resp/value.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>

namespace redlock::cli {

// Read-only: TIME, GET, PTTL and ZRANGE, no write, so that status leaves every key (and a reader
// past its deadline, which the lock's own scripts remove) as it found it.
const std::string_view rw_read_script =
    "local clock = redis.call('TIME') "
    "local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) "
    "local function read(key) "
    "local value = redis.pcall('GET', key) "
    "if type(value) == 'table' and value.err then return value end "
    "return {value, redis.call('PTTL', key)} end "
    "return {now, read(KEYS[1]), redis.pcall('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES'), "
    "read(KEYS[3])}";

std::vector<std::string> rw_status_keys(std::string_view name) {
  return {detail::rw_writer_key(name), detail::rw_readers_key(name), detail::rw_mark_key(name)};
}

std::optional<std::string> rw_lock_of_key(std::string_view key) {
  for (const std::string_view suffix : {":write-waiting", ":write", ":read"}) {
    if (!key.ends_with(suffix)) continue;
    const std::string_view prefix = key.substr(0, key.size() - suffix.size());
    // A name without a hash tag is put in one ("{catalog}:read"); a name with one keeps it.
    std::vector<std::string_view> names;
    if (prefix.size() > 2 && prefix.front() == '{' && prefix.back() == '}')
      names.push_back(prefix.substr(1, prefix.size() - 2));
    names.push_back(prefix);
    for (const auto name : names) {
      if (name.empty()) continue;
      const auto keys = rw_status_keys(name);
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) return std::string(name);
    }
  }
  return std::nullopt;
}

namespace {

// {value, pttl} of the writer's key or the mark; a key of another type is a note.
void read_entry(const resp::value& reply, std::string_view what, std::optional<rw_entry>& entry,
                std::vector<std::string>& notes, std::optional<std::string>& error) {
  if (reply.is_error()) {
    if (reply.error_code_word() == "WRONGTYPE") {
      notes.push_back(fmt::format("the {} holds a value of another type", what));
    } else {
      error = fmt::format("error reply: {}", one_line(reply.text));
    }
    return;
  }
  if (reply.kind != resp::type::array || reply.elements.size() != 2 ||
      reply.elements[1].kind != resp::type::integer) {
    error = fmt::format("unexpected reply: {}", one_line(resp::to_debug_string(reply)));
    return;
  }
  if (reply.elements[0].is_null()) return;
  entry = rw_entry{reply.elements[0].text, reply.elements[1].integer};
}

std::optional<double> number_in(const resp::value& reply) {
  if (reply.kind == resp::type::integer) return static_cast<double>(reply.integer);
  double number = 0;
  const auto& text = reply.text;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return number;
}

void read_readers(const resp::value& reply, long long now, rw_node_report& report) {
  if (reply.is_error()) {
    if (reply.error_code_word() == "WRONGTYPE") {
      report.notes.push_back("the readers' key holds a value of another type");
    } else {
      report.error = fmt::format("error reply: {}", one_line(reply.text));
    }
    return;
  }
  if (reply.kind != resp::type::array || reply.elements.size() % 2 != 0) {
    report.error = fmt::format("unexpected reply: {}", one_line(resp::to_debug_string(reply)));
    return;
  }
  for (std::size_t i = 0; i < reply.elements.size(); i += 2) {
    const auto deadline = number_in(reply.elements[i + 1]);
    if (!deadline) {
      report.error = fmt::format("unexpected reader deadline: {}",
                                 one_line(resp::to_debug_string(reply.elements[i + 1])));
      return;
    }
    // The lock's scripts drop entries whose deadline is now or earlier: those count for nothing.
    const auto left = static_cast<long long>(std::floor(*deadline)) - now;
    if (left > 0) {
      report.readers.push_back({reply.elements[i].text, left});
    } else {
      ++report.expired_readers;
    }
  }
  std::stable_sort(report.readers.begin(), report.readers.end(),
                   [](const rw_entry& a, const rw_entry& b) { return a.ttl_ms > b.ttl_ms; });
}

}  // namespace

rw_node_report read_rw_node(std::string address, const resp::value& reply) {
  rw_node_report report;
  report.address = std::move(address);
  if (reply.is_error()) {
    report.error = fmt::format("error reply: {}", one_line(reply.text));
    return report;
  }
  if (reply.kind != resp::type::array || reply.elements.size() != 4 ||
      reply.elements[0].kind != resp::type::integer) {
    report.error = fmt::format("unexpected reply: {}", one_line(resp::to_debug_string(reply)));
    return report;
  }
  const long long now = reply.elements[0].integer;
  read_entry(reply.elements[1], "writer's key", report.writer, report.notes, report.error);
  if (!report.error) read_readers(reply.elements[2], now, report);
  if (!report.error) read_entry(reply.elements[3], "mark", report.mark, report.notes, report.error);
  if (report.error) {
    report.writer.reset();
    report.readers.clear();
    report.expired_readers = 0;
    report.mark.reset();
    report.notes.clear();
  }
  return report;
}

namespace {

std::string ttl_text(long long ttl_ms) {
  return ttl_ms >= 0 ? fmt::format("ttl {} ms", ttl_ms) : std::string("no ttl");
}

// As many readers as a line has room for; the JSON object lists them all.
constexpr std::size_t readers_shown = 4;

}  // namespace

std::string format_rw_node(const rw_node_report& report) {
  node_report base;
  base.address = report.address;
  base.error = report.error;
  base.misconfigured = report.misconfigured;
  base.link = report.link;
  base.subscribers = report.subscribers;
  if (report.error || !report.holds_anything()) {
    std::string line = format_node_report(base);  // "... unreachable ..." or "... free"
    if (!report.error && report.expired_readers > 0) {
      line += fmt::format("  ({} reader{} past the deadline)", report.expired_readers,
                          report.expired_readers == 1 ? "" : "s");
    }
    return line;
  }
  std::vector<std::string> parts;
  if (report.writer) {
    parts.push_back(fmt::format("writer {} {}", token_prefix(report.writer->token),
                                ttl_text(report.writer->ttl_ms)));
  }
  if (!report.readers.empty()) {
    std::string readers = fmt::format("readers {}:", report.readers.size());
    for (std::size_t i = 0; i < report.readers.size() && i < readers_shown; ++i) {
      readers += fmt::format("{} {} {} ms", i == 0 ? "" : ",",
                             token_prefix(report.readers[i].token), report.readers[i].ttl_ms);
    }
    if (report.readers.size() > readers_shown)
      readers += fmt::format(" and {} more", report.readers.size() - readers_shown);
    parts.push_back(std::move(readers));
  }
  if (report.expired_readers > 0) {
    parts.push_back(fmt::format("{} reader{} past the deadline", report.expired_readers,
                                report.expired_readers == 1 ? "" : "s"));
  }
  if (report.mark) {
    parts.push_back(fmt::format("waiting writer {} {}", token_prefix(report.mark->token),
                                ttl_text(report.mark->ttl_ms)));
  }
  for (const auto& note : report.notes)
    parts.push_back(note);
  std::string line = fmt::format("{:<21} reachable    {}", report.address, fmt::join(parts, "; "));
  if (report.subscribers) line += fmt::format("  subscribers {}", *report.subscribers);
  if (!report.link.empty()) line += fmt::format("  ({})", report.link);
  return line;
}

std::string json_of(const rw_node_report& report, std::size_t index, std::string_view name) {
  std::string_view state = report.holds_anything() ? "held" : "free";
  if (report.error) state = report.misconfigured ? "misconfigured" : "unreachable";
  json_line line;
  line.string("type", "rw_node")
      .string("resource", name)
      .integer("index", index)
      .string("address", report.address)
      .string("state", state);
  const auto entry = [&](std::string_view token, std::string_view ttl,
                         const std::optional<rw_entry>& value) {
    if (value) {
      line.string(token, value->token).integer(ttl, value->ttl_ms);
    } else {
      line.null(token).null(ttl);
    }
  };
  entry("writer", "writer_pttl_ms", report.writer);
  if (report.error) {
    line.null("readers").null("readers_left_ms").null("expired_readers");
  } else {
    std::vector<std::string> tokens;
    std::vector<std::uint64_t> left;
    for (const auto& reader : report.readers) {
      tokens.push_back(reader.token);
      left.push_back(static_cast<std::uint64_t>(reader.ttl_ms));
    }
    line.strings("readers", tokens)
        .integers("readers_left_ms", left)
        .integer("expired_readers", report.expired_readers);
  }
  entry("waiting_writer", "waiting_writer_pttl_ms", report.mark);
  line.optional_string("note", report.notes.empty() ? std::nullopt
                                                    : std::optional(fmt::format(
                                                          "{}", fmt::join(report.notes, "; "))))
      .optional_string("error", report.error)
      .optional_integer("subscribers", report.error ? std::nullopt : report.subscribers)
      .optional_string("link", report.link.empty() ? std::nullopt : std::optional(report.link));
  return line.str();
}

namespace {

// The token held on the most nodes, and on how many.
std::pair<std::string, std::size_t> top_of(const std::map<std::string, std::size_t>& counts) {
  std::pair<std::string, std::size_t> top;
  for (const auto& [token, nodes] : counts) {
    if (nodes > top.second) top = {token, nodes};
  }
  return top;
}

}  // namespace

rw_verdict judge_rw(std::string_view name, std::span<const rw_node_report> reports) {
  rw_verdict v;
  v.name = name;
  v.nodes = reports.size();
  v.quorum = v.nodes / 2 + 1;
  std::map<std::string, std::size_t> writers;
  std::map<std::string, std::size_t> readers;
  std::map<std::string, std::size_t> marks;
  bool anything = false;
  for (const auto& report : reports) {
    if (report.error) {
      ++(report.misconfigured ? v.misconfigured : v.unreachable);
      continue;
    }
    ++v.reachable;
    anything = anything || report.holds_anything();
    if (report.writer) {
      ++v.writer_nodes;
      ++writers[report.writer->token];
    }
    if (!report.readers.empty()) ++v.reader_nodes;
    for (const auto& reader : report.readers)
      ++readers[reader.token];
    if (report.mark) {
      ++v.mark_nodes;
      ++marks[report.mark->token];
    }
  }
  v.enough_reachable = v.reachable >= v.quorum;
  const node_counts counts{v.nodes, v.quorum, v.reachable, v.unreachable, v.misconfigured};
  const auto [writer, writer_count] = top_of(writers);
  const auto [reader, reader_count] = top_of(readers);
  const auto [mark, mark_count] = top_of(marks);
  for (const auto& [token, count] : readers) {
    if (count >= v.quorum) v.readers.push_back(token);
  }
  if (mark_count >= v.quorum) v.waiting = mark;

  std::string state;
  if (writer_count >= v.quorum) {
    v.state = rw_state::write_locked;
    v.writer = writer;
    state = fmt::format("write-locked (token {})", token_prefix(writer));
  } else if (!v.readers.empty()) {
    v.state = rw_state::read_locked;
    state = fmt::format("read-locked by {} reader{}", v.readers.size(),
                        v.readers.size() == 1 ? "" : "s");
  } else if (auto unknown = unknown_state(counts, std::max(writer_count, reader_count))) {
    v.state = rw_state::unknown;
    state = std::move(*unknown);
  } else if (!anything) {
    v.state = rw_state::free;
    state = "free";
  } else {
    v.state = rw_state::not_locked;
    state = "not locked (below quorum)";
  }
  if (v.waiting) {
    state += fmt::format("; a writer waits (mark {} on a quorum): new readers are kept out",
                         token_prefix(*v.waiting));
  }
  v.line = fmt::format(
      "{}: writer on {} of {} nodes, readers on {}, waiting writer on {} (quorum "
      "{}): {}",
      name, v.writer_nodes, v.nodes, v.reader_nodes, v.mark_nodes, v.quorum, state);
  v.counts = unasked_lines(counts);
  return v;
}

std::string_view state_name(rw_state state) noexcept {
  switch (state) {
    case rw_state::write_locked:
      return "write_locked";
    case rw_state::read_locked:
      return "read_locked";
    case rw_state::free:
      return "free";
    case rw_state::not_locked:
      return "not_locked";
    case rw_state::unknown:
      break;
  }
  return "unknown";
}

std::string json_of(const rw_verdict& verdict) {
  json_line line;
  line.string("type", "rw_verdict")
      .string("resource", verdict.name)
      .string("state", state_name(verdict.state))
      .optional_string("writer", verdict.state == rw_state::write_locked
                                     ? std::optional(verdict.writer)
                                     : std::nullopt)
      .strings("readers", verdict.readers)
      .optional_string("waiting_writer", verdict.waiting)
      .integer("nodes", verdict.nodes)
      .integer("quorum", verdict.quorum)
      .integer("answered", verdict.reachable)
      .integer("unreachable", verdict.unreachable)
      .integer("misconfigured", verdict.misconfigured)
      .integer("writer_nodes", verdict.writer_nodes)
      .integer("reader_nodes", verdict.reader_nodes)
      .integer("waiting_writer_nodes", verdict.mark_nodes)
      .boolean("quorum_answered", verdict.enough_reachable);
  return line.str();
}

}  // namespace redlock::cli
