#include "sim/model/commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>

namespace redlock::sim {

namespace {

constexpr std::string_view wrong_type =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
constexpr std::string_view not_an_integer = "ERR value is not an integer or out of range";
constexpr std::string_view syntax_error = "ERR syntax error";

bool same_word(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

resp::value wrong_arity(std::string_view name) {
  return error_reply(
      fmt::format("ERR wrong number of arguments for '{}' command", lower_case(name)));
}

resp::value not_modelled(std::string_view what) {
  return error_reply(fmt::format("ERR the model node does not support {}", what));
}

// Redis's getDoubleFromObject / zslParseRange: strtod over the whole text, no leading space, no
// NaN.
std::optional<double> parse_double(std::string_view text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || std::isnan(value)) return std::nullopt;
  if (errno == ERANGE && !std::isinf(value) && value != 0) return std::nullopt;
  return value;
}

resp::value score_reply(double score, const command_context& at) {
  if (!at.resp3) return bulk_reply(score_text(score));
  resp::value v;
  v.kind = resp::type::double_number;
  v.text = score_text(score);
  v.number = score;
  return v;
}

resp::value array_reply(std::vector<resp::value> elements) {
  resp::value v;
  v.kind = resp::type::array;
  v.elements = std::move(elements);
  return v;
}

// An expiry `delta` milliseconds after `base`, unless it overflows (Redis: "invalid expire time").
std::optional<std::int64_t> expiry_after(std::int64_t base, std::int64_t delta) {
  std::int64_t when = 0;
  if (__builtin_add_overflow(base, delta, &when)) return std::nullopt;
  return when;
}

using args_t = std::span<const std::string>;

resp::value cmd_set(keyspace& keys, args_t args, const command_context& at) {
  if (args.size() < 3) return wrong_arity(args[0]);
  bool nx = false, xx = false, get = false, keepttl = false;
  enum class unit { none, seconds, milliseconds, at_seconds, at_milliseconds } expire = unit::none;
  std::string_view expire_text;
  for (std::size_t i = 3; i < args.size(); ++i) {
    const std::string_view word = args[i];
    const bool has_next = i + 1 < args.size();
    if (same_word(word, "NX") && !xx) {
      nx = true;
    } else if (same_word(word, "XX") && !nx) {
      xx = true;
    } else if (same_word(word, "GET")) {
      get = true;
    } else if (same_word(word, "KEEPTTL") && expire == unit::none) {
      keepttl = true;
    } else if (expire == unit::none && !keepttl && has_next &&
               (same_word(word, "EX") || same_word(word, "PX") || same_word(word, "EXAT") ||
                same_word(word, "PXAT"))) {
      expire = same_word(word, "EX")     ? unit::seconds
               : same_word(word, "PX")   ? unit::milliseconds
               : same_word(word, "EXAT") ? unit::at_seconds
                                         : unit::at_milliseconds;
      expire_text = args[++i];
    } else {
      return error_reply(std::string(syntax_error));
    }
  }
  std::optional<std::int64_t> expires_at;
  if (expire != unit::none) {
    std::int64_t n = 0;
    if (!parse_integer(expire_text, n)) return error_reply(std::string(not_an_integer));
    const auto invalid = [] { return error_reply("ERR invalid expire time in 'set' command"); };
    if (n <= 0) return invalid();
    const bool in_seconds = expire == unit::seconds || expire == unit::at_seconds;
    std::int64_t ms = n;
    if (in_seconds && __builtin_mul_overflow(n, 1000, &ms)) return invalid();
    const bool absolute = expire == unit::at_seconds || expire == unit::at_milliseconds;
    expires_at = absolute ? std::optional<std::int64_t>(ms) : expiry_after(at.now_ms(), ms);
    if (!expires_at) return invalid();
  }

  stored_value* old = keys.find(args[1], at.now_ms());
  if (get && old && !old->is_string()) return error_reply(std::string(wrong_type));
  resp::value previous = old && get ? bulk_reply(old->text()) : null_reply();
  if ((nx && old) || (xx && !old)) return get ? previous : null_reply();

  std::optional<std::int64_t> kept;
  if (keepttl && old) kept = old->expires_at_ms;
  stored_value& now_stored = keys.assign(args[1], stored_value{args[2], std::nullopt});
  now_stored.expires_at_ms = keepttl ? kept : expires_at;
  // An absolute time already past deletes the key at once (Redis: SET ... PXAT in the past).
  if (now_stored.expires_at_ms && *now_stored.expires_at_ms <= at.now_ms() && !keepttl) {
    keys.erase(args[1]);
  }
  return get ? previous : status_reply("OK");
}

resp::value cmd_get(keyspace& keys, args_t args, const command_context& at) {
  if (args.size() != 2) return wrong_arity(args[0]);
  stored_value* v = keys.find(args[1], at.now_ms());
  if (!v) return null_reply();
  if (!v->is_string()) return error_reply(std::string(wrong_type));
  return bulk_reply(v->text());
}

resp::value cmd_del(keyspace& keys, args_t args, const command_context& at) {
  if (args.size() < 2) return wrong_arity(args[0]);
  std::int64_t deleted = 0;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (keys.find(args[i], at.now_ms()) && keys.erase(args[i])) ++deleted;
  }
  return integer_reply(deleted);
}

resp::value cmd_exists(keyspace& keys, args_t args, const command_context& at) {
  if (args.size() < 2) return wrong_arity(args[0]);
  std::int64_t found = 0;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (keys.find(args[i], at.now_ms())) ++found;
  }
  return integer_reply(found);
}

resp::value cmd_incr(keyspace& keys, args_t args, const command_context& at) {
  if (args.size() != 2) return wrong_arity(args[0]);
  stored_value* v = keys.find(args[1], at.now_ms());
  std::int64_t n = 0;
  if (v) {
    if (!v->is_string()) return error_reply(std::string(wrong_type));
    if (!parse_integer(v->text(), n)) return error_reply(std::string(not_an_integer));
  }
  if (n == std::numeric_limits<std::int64_t>::max()) {
    return error_reply("ERR increment or decrement would overflow");
  }
  ++n;
  if (v) {
    v->text() = std::to_string(n);
  } else {
    keys.assign(args[1], stored_value{std::to_string(n), std::nullopt});
  }
  return integer_reply(n);
}

// PEXPIRE (relative) and PEXPIREAT (absolute), with Redis 7's NX / XX / GT / LT.
resp::value cmd_pexpire(keyspace& keys, args_t args, const command_context& at, bool absolute) {
  if (args.size() < 3) return wrong_arity(args[0]);
  bool nx = false, xx = false, gt = false, lt = false;
  for (std::size_t i = 3; i < args.size(); ++i) {
    if (same_word(args[i], "NX")) {
      nx = true;
    } else if (same_word(args[i], "XX")) {
      xx = true;
    } else if (same_word(args[i], "GT")) {
      gt = true;
    } else if (same_word(args[i], "LT")) {
      lt = true;
    } else {
      return error_reply(fmt::format("ERR Unsupported option {}", args[i]));
    }
  }
  if (nx && (xx || gt || lt)) {
    return error_reply("ERR NX and XX, GT or LT options at the same time are not compatible");
  }
  if (gt && lt) return error_reply("ERR GT and LT options at the same time are not compatible");
  std::int64_t n = 0;
  if (!parse_integer(args[2], n)) return error_reply(std::string(not_an_integer));
  const auto when = absolute ? std::optional<std::int64_t>(n) : expiry_after(at.now_ms(), n);
  if (!when) {
    return error_reply(fmt::format("ERR invalid expire time in '{}' command", lower_case(args[0])));
  }
  stored_value* v = keys.find(args[1], at.now_ms());
  if (!v) return integer_reply(0);
  const auto& current = v->expires_at_ms;
  // No expiry counts as an infinite one for GT and LT.
  if ((nx && current) || (xx && !current) || (gt && (!current || *when <= *current)) ||
      (lt && current && *when >= *current)) {
    return integer_reply(0);
  }
  if (*when <= at.now_ms()) {
    keys.erase(args[1]);
  } else {
    v->expires_at_ms = *when;
  }
  return integer_reply(1);
}

resp::value cmd_pttl(keyspace& keys, args_t args, const command_context& at) {
  if (args.size() != 2) return wrong_arity(args[0]);
  stored_value* v = keys.find(args[1], at.now_ms());
  if (!v) return integer_reply(-2);
  if (!v->expires_at_ms) return integer_reply(-1);
  return integer_reply(std::max<std::int64_t>(0, *v->expires_at_ms - at.now_ms()));
}

resp::value cmd_time(args_t args, const command_context& at) {
  if (args.size() != 1) return wrong_arity(args[0]);
  return array_reply({bulk_reply(std::to_string(at.now_us / 1000000)),
                      bulk_reply(std::to_string(at.now_us % 1000000))});
}

resp::value cmd_ping(args_t args) {
  if (args.size() > 2) return wrong_arity(args[0]);
  return args.size() == 2 ? bulk_reply(args[1]) : status_reply("PONG");
}

// The sorted set at `key` for reading; `wrong` is set when the key holds a string.
sorted_set* find_zset(keyspace& keys, std::string_view key, const command_context& at,
                      bool& wrong) {
  stored_value* v = keys.find(key, at.now_ms());
  wrong = v && v->is_string();
  return v && !wrong ? &v->zset() : nullptr;
}

resp::value cmd_zadd(keyspace& keys, args_t args, const command_context& at) {
  if (args.size() < 4) return wrong_arity(args[0]);
  bool nx = false, xx = false, gt = false, lt = false, ch = false, incr = false;
  std::size_t i = 2;
  for (; i < args.size(); ++i) {
    const std::string_view word = args[i];
    if (same_word(word, "NX")) {
      nx = true;
    } else if (same_word(word, "XX")) {
      xx = true;
    } else if (same_word(word, "GT")) {
      gt = true;
    } else if (same_word(word, "LT")) {
      lt = true;
    } else if (same_word(word, "CH")) {
      ch = true;
    } else if (same_word(word, "INCR")) {
      incr = true;
    } else {
      break;
    }
  }
  const std::size_t pairs_at = i;
  const std::size_t words = args.size() - pairs_at;
  if (words == 0 || words % 2 != 0) return error_reply(std::string(syntax_error));
  if (nx && xx) return error_reply("ERR XX and NX options at the same time are not compatible");
  if ((gt && nx) || (lt && nx) || (gt && lt)) {
    return error_reply("ERR GT, LT, and/or NX options at the same time are not compatible");
  }
  if (incr && words > 2) {
    return error_reply("ERR INCR option supports a single increment-element pair");
  }
  std::vector<double> scores;
  for (std::size_t p = pairs_at; p < args.size(); p += 2) {
    auto score = parse_double(args[p]);
    if (!score) return error_reply("ERR value is not a valid float");
    scores.push_back(*score);
  }
  bool wrong = false;
  sorted_set* set = find_zset(keys, args[1], at, wrong);
  if (wrong) return error_reply(std::string(wrong_type));
  if (!set) {
    if (xx) return incr ? null_reply() : integer_reply(0);
    set = &keys.assign(args[1], stored_value{sorted_set{}, std::nullopt}).zset();
  }
  std::int64_t added = 0, changed = 0;
  std::optional<double> incr_result;
  for (std::size_t p = pairs_at, s = 0; p < args.size(); p += 2, ++s) {
    const std::string& member = args[p + 1];
    double score = scores[s];
    auto existing = set->scores.find(member);
    if (existing != set->scores.end()) {
      if (nx) continue;
      if (incr) {
        score += existing->second;
        if (std::isnan(score)) {
          if (set->size() == 0) keys.erase(args[1]);
          return error_reply("ERR resulting score is not a number (NaN)");
        }
      }
      if ((gt && score <= existing->second) || (lt && score >= existing->second)) continue;
      incr_result = score;
      if (score != existing->second) {
        set->put(member, score);
        ++changed;
      }
    } else {
      if (xx) continue;
      set->put(member, score);
      incr_result = score;
      ++added;
    }
  }
  if (set->size() == 0) keys.erase(args[1]);
  if (incr) return incr_result ? score_reply(*incr_result, at) : null_reply();
  return integer_reply(ch ? added + changed : added);
}

resp::value cmd_zrem(keyspace& keys, args_t args, const command_context& at) {
  if (args.size() < 3) return wrong_arity(args[0]);
  bool wrong = false;
  sorted_set* set = find_zset(keys, args[1], at, wrong);
  if (wrong) return error_reply(std::string(wrong_type));
  if (!set) return integer_reply(0);
  std::int64_t removed = 0;
  for (std::size_t i = 2; i < args.size(); ++i)
    removed += set->remove(args[i]) ? 1 : 0;
  if (set->size() == 0) keys.erase(args[1]);
  return integer_reply(removed);
}

resp::value cmd_zscore(keyspace& keys, args_t args, const command_context& at) {
  if (args.size() != 3) return wrong_arity(args[0]);
  bool wrong = false;
  sorted_set* set = find_zset(keys, args[1], at, wrong);
  if (wrong) return error_reply(std::string(wrong_type));
  if (!set) return null_reply();
  auto found = set->scores.find(args[2]);
  return found == set->scores.end() ? null_reply() : score_reply(found->second, at);
}

// A score range bound of ZCOUNT / ZREMRANGEBYSCORE: "(" makes it exclusive.
struct score_bound {
  double value = 0;
  bool exclusive = false;
};

std::optional<score_bound> parse_bound(std::string_view text) {
  score_bound bound;
  if (!text.empty() && text.front() == '(') {
    bound.exclusive = true;
    text.remove_prefix(1);
  }
  auto value = parse_double(text);
  if (!value) return std::nullopt;
  bound.value = *value;
  return bound;
}

bool above(double score, const score_bound& min) {
  return min.exclusive ? score > min.value : score >= min.value;
}
bool below(double score, const score_bound& max) {
  return max.exclusive ? score < max.value : score <= max.value;
}

// ZCOUNT (counting) and ZREMRANGEBYSCORE (removing).
resp::value cmd_score_range(keyspace& keys, args_t args, const command_context& at, bool remove) {
  if (args.size() != 4) return wrong_arity(args[0]);
  auto min = parse_bound(args[2]);
  auto max = parse_bound(args[3]);
  if (!min || !max) return error_reply("ERR min or max is not a float");
  bool wrong = false;
  sorted_set* set = find_zset(keys, args[1], at, wrong);
  if (wrong) return error_reply(std::string(wrong_type));
  if (!set) return integer_reply(0);
  std::vector<std::string> in_range;
  for (const auto& [score, member] : set->ordered) {
    if (above(score, *min) && below(score, *max)) in_range.push_back(member);
  }
  if (remove) {
    for (const auto& member : in_range)
      set->remove(member);
    if (set->size() == 0) keys.erase(args[1]);
  }
  return integer_reply(static_cast<std::int64_t>(in_range.size()));
}

resp::value cmd_zrange(keyspace& keys, args_t args, const command_context& at) {
  if (args.size() < 4) return wrong_arity(args[0]);
  bool with_scores = false, reverse = false;
  for (std::size_t i = 4; i < args.size(); ++i) {
    if (same_word(args[i], "WITHSCORES")) {
      with_scores = true;
    } else if (same_word(args[i], "REV")) {
      reverse = true;
    } else if (same_word(args[i], "BYSCORE") || same_word(args[i], "BYLEX") ||
               same_word(args[i], "LIMIT")) {
      return not_modelled(fmt::format("ZRANGE {}", args[i]));
    } else {
      return error_reply(std::string(syntax_error));
    }
  }
  std::int64_t start = 0, stop = 0;
  if (!parse_integer(args[2], start) || !parse_integer(args[3], stop)) {
    return error_reply(std::string(not_an_integer));
  }
  bool wrong = false;
  sorted_set* set = find_zset(keys, args[1], at, wrong);
  if (wrong) return error_reply(std::string(wrong_type));
  std::vector<resp::value> out;
  if (!set) return array_reply(std::move(out));
  const auto size = static_cast<std::int64_t>(set->size());
  if (start < 0) start += size;
  if (stop < 0) stop += size;
  if (start < 0) start = 0;
  if (start > stop || start >= size) return array_reply(std::move(out));
  if (stop >= size) stop = size - 1;
  std::vector<std::pair<double, std::string>> members(set->ordered.begin(), set->ordered.end());
  if (reverse) std::reverse(members.begin(), members.end());
  for (std::int64_t i = start; i <= stop; ++i) {
    const auto& [score, member] = members[static_cast<std::size_t>(i)];
    if (with_scores && at.resp3) {
      out.push_back(array_reply({bulk_reply(member), score_reply(score, at)}));
    } else {
      out.push_back(bulk_reply(member));
      if (with_scores) out.push_back(score_reply(score, at));
    }
  }
  return array_reply(std::move(out));
}

resp::value cmd_publish(args_t args, const command_context& at, bool sharded) {
  if (args.size() != 3) return wrong_arity(args[0]);
  return integer_reply(at.publish ? at.publish(args[1], args[2], sharded) : 0);
}

using handler = resp::value (*)(keyspace&, args_t, const command_context&);

const std::unordered_map<std::string, handler>& handlers() {
  static const std::unordered_map<std::string, handler> table{
      {"set", cmd_set},
      {"get", cmd_get},
      {"del", cmd_del},
      {"exists", cmd_exists},
      {"incr", cmd_incr},
      {"pexpire",
       [](keyspace& k, args_t a, const command_context& c) { return cmd_pexpire(k, a, c, false); }},
      {"pexpireat",
       [](keyspace& k, args_t a, const command_context& c) { return cmd_pexpire(k, a, c, true); }},
      {"pttl", cmd_pttl},
      {"time", [](keyspace&, args_t a, const command_context& c) { return cmd_time(a, c); }},
      {"ping", [](keyspace&, args_t a, const command_context&) { return cmd_ping(a); }},
      {"zadd", cmd_zadd},
      {"zrem", cmd_zrem},
      {"zscore", cmd_zscore},
      {"zrange", cmd_zrange},
      {"zcount", [](keyspace& k, args_t a,
                    const command_context& c) { return cmd_score_range(k, a, c, false); }},
      {"zremrangebyscore", [](keyspace& k, args_t a,
                              const command_context& c) { return cmd_score_range(k, a, c, true); }},
      {"publish",
       [](keyspace&, args_t a, const command_context& c) { return cmd_publish(a, c, false); }},
      {"spublish",
       [](keyspace&, args_t a, const command_context& c) { return cmd_publish(a, c, true); }},
  };
  return table;
}

}  // namespace

resp::value error_reply(std::string text) {
  resp::value v;
  v.kind = resp::type::simple_error;
  v.text = std::move(text);
  return v;
}

resp::value status_reply(std::string text) {
  resp::value v;
  v.kind = resp::type::simple_string;
  v.text = std::move(text);
  return v;
}

resp::value integer_reply(std::int64_t n) {
  resp::value v;
  v.kind = resp::type::integer;
  v.integer = n;
  return v;
}

resp::value bulk_reply(std::string text) {
  resp::value v;
  v.kind = resp::type::bulk_string;
  v.text = std::move(text);
  return v;
}

resp::value null_reply() {
  return resp::value{};
}

bool is_write_command(std::string_view lower_name) {
  static const std::set<std::string_view> writes{"set",       "del",  "incr", "pexpire",
                                                 "pexpireat", "zadd", "zrem", "zremrangebyscore"};
  return writes.contains(lower_name);
}

bool is_data_command(std::string_view name) {
  return handlers().contains(lower_case(name));
}

resp::value run_data_command(keyspace& keys, std::span<const std::string> args,
                             const command_context& at) {
  if (args.empty()) return error_reply("ERR empty command");
  auto found = handlers().find(lower_case(args[0]));
  if (found == handlers().end()) {
    std::string beginning;
    for (std::size_t i = 1; i < args.size() && i < 4; ++i) {
      beginning += fmt::format("'{}' ", args[i]);
    }
    return error_reply(
        fmt::format("ERR unknown command '{}', with args beginning with: {}", args[0], beginning));
  }
  if (at.read_only && is_write_command(found->first)) {
    return error_reply("READONLY You can't write against a read only replica.");
  }
  return found->second(keys, args, at);
}

std::string lower_case(std::string_view text) {
  // ASCII only, as Redis compares command names (strcasecmp in the C locale).
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string score_text(double score) {
  if (std::isinf(score)) return score > 0 ? "inf" : "-inf";
  char text[64];
  const int n = std::snprintf(text, sizeof text, "%.17g", score);
  return std::string(text, static_cast<std::size_t>(n));
}

bool parse_integer(std::string_view text, std::int64_t& out) noexcept {
  if (text.empty() || text.size() > 20) return false;
  if (text == "0") {
    out = 0;
    return true;
  }
  std::size_t i = 0;
  const bool negative = text[0] == '-';
  if (negative) ++i;
  if (i >= text.size() || text[i] < '1' || text[i] > '9') return false;
  std::uint64_t magnitude = 0;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (magnitude > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return false;
    magnitude = magnitude * 10 + digit;
  }
  constexpr auto most = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (negative) {
    if (magnitude > most + 1) return false;
    out = magnitude == most + 1 ? std::numeric_limits<std::int64_t>::min()
                                : -static_cast<std::int64_t>(magnitude);
  } else {
    if (magnitude > most) return false;
    out = static_cast<std::int64_t>(magnitude);
  }
  return true;
}

}  // namespace redlock::sim
