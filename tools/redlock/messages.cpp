#include "messages.hpp"

#include "exit_codes.hpp"
#include "json_line.hpp"
#include "rw_status.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sys/wait.h>

namespace redlock::cli {

std::string one_line(std::string_view message) {
  constexpr std::string_view prefix = "redlock: ";
  if (message.starts_with(prefix)) message.remove_prefix(prefix.size());
  std::string out(message);
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return out;
}

acquire_failure classify_acquire_failure(error_code ec, std::string_view diagnostics) {
  if (ec == error::contended) return acquire_failure::contended;
  if (ec == error::no_quorum) return acquire_failure::no_quorum;
  if (ec == error::validity_expired) return acquire_failure::validity_expired;
  if (ec == condition::node_failure) return acquire_failure::misconfigured;
  if (ec == error::invalid_argument) return acquire_failure::invalid;
  if (ec != error::wait_timeout) return acquire_failure::other;
  // The last round's account quotes its outcome's message; a wait spent queued behind another
  // lease of the same client says so in its own words.
  auto mentions = [diagnostics](error e) {
    return diagnostics.find(make_error_code(e).message()) != std::string_view::npos;
  };
  if (mentions(error::contended)) return acquire_failure::contended;
  if (diagnostics.find("held by another lease") != std::string_view::npos) {
    return acquire_failure::contended;
  }
  if (mentions(error::no_quorum)) return acquire_failure::no_quorum;
  if (mentions(error::validity_expired)) return acquire_failure::validity_expired;
  return acquire_failure::wait_timeout;
}

std::string_view failure_name(acquire_failure failure) noexcept {
  switch (failure) {
    case acquire_failure::contended:
      return "contended";
    case acquire_failure::no_quorum:
      return "no_quorum";
    case acquire_failure::validity_expired:
      return "validity_expired";
    case acquire_failure::wait_timeout:
      return "wait_timeout";
    case acquire_failure::misconfigured:
      return "misconfigured";
    case acquire_failure::invalid:
      return "invalid";
    case acquire_failure::other:
      break;
  }
  return "other";
}

int not_acquired_exit_code(error_code ec, std::string_view diagnostics, int conflict_code) {
  switch (classify_acquire_failure(ec, diagnostics)) {
    case acquire_failure::contended:
    case acquire_failure::wait_timeout:
      return conflict_code;
    case acquire_failure::no_quorum:
    case acquire_failure::validity_expired:
      return exit_code::not_acquired;
    case acquire_failure::misconfigured:
    case acquire_failure::invalid:
    case acquire_failure::other:
      break;
  }
  return exit_code::failure;
}

std::string not_acquired_message(std::string_view resource, std::chrono::milliseconds wait,
                                 error_code ec, std::string_view diagnostics,
                                 std::optional<std::size_t> permits,
                                 std::span<const std::string> resources) {
  std::string cause;
  switch (classify_acquire_failure(ec, diagnostics)) {
    case acquire_failure::contended:
      cause = permits ? fmt::format("contended: all {} permits held by other owners", *permits)
                      : "contended: held by another owner";
      break;
    case acquire_failure::no_quorum:
      cause = "no quorum: too few nodes answered";
      break;
    case acquire_failure::validity_expired:
      cause = "no validity left: a quorum granted it too late";
      break;
    case acquire_failure::wait_timeout:
      cause = "wait timeout";
      break;
    case acquire_failure::misconfigured:
      cause = "misconfigured nodes, not retried";
      break;
    case acquire_failure::invalid:
      cause = "refused, not retried";
      break;
    case acquire_failure::other:
      cause = "failed";
      break;
  }
  const std::string when =
      ec == error::wait_timeout ? fmt::format(" within {} ms", wait.count()) : std::string();
  std::string subject = fmt::format("\"{}\"", resource);
  if (resources.size() > 1) {
    subject.clear();
    for (std::size_t i = 0; i < resources.size(); ++i) {
      if (i > 0) subject += i + 1 == resources.size() ? " and " : ", ";
      subject += fmt::format("\"{}\"", resources[i]);
    }
  }
  std::string line = fmt::format("redlock: {} not acquired{}: {}", subject, when, cause);
  if (!diagnostics.empty()) {
    line += fmt::format("; last attempt: {}", one_line(diagnostics));
  } else if (ec) {
    line += fmt::format(" ({})", ec.message());
  }
  return line;
}

not_acquired_report report_not_acquired(std::string_view resource, std::chrono::milliseconds wait,
                                        error_code ec, std::string_view diagnostics,
                                        int conflict_code, std::optional<std::size_t> permits,
                                        std::span<const std::string> resources) {
  not_acquired_report report;
  report.exit_code = not_acquired_exit_code(ec, diagnostics, conflict_code);
  report.text = not_acquired_message(resource, wait, ec, diagnostics, permits, resources);
  report.json.string("event", "not_acquired");
  if (resources.size() > 1) {
    report.json.strings("resources", resources);
  } else {
    report.json.string("resource", resource);
  }
  report.json.string("reason", failure_name(classify_acquire_failure(ec, diagnostics)))
      .integer("exit_code", report.exit_code)
      .string("message", one_line(report.text));
  return report;
}

std::vector<std::string> acquired_notes(const acquired_lock& lock) {
  const std::string resource = shell_word(lock.resource);
  const std::string token = shell_word(lock.token);
  const std::string ttl = duration_text(lock.ttl);
  const std::string fence =
      lock.fencing_token ? fmt::format(", fencing token {}", *lock.fencing_token) : std::string();
  return {
      fmt::format("redlock: acquired {} (valid {} ms, granted by {} of {} nodes{}, quorum {}{}); "
                  "nobody renews it: it expires within {} unless extended",
                  lock.resource, lock.validity_ms, lock.granted_nodes, lock.nodes,
                  lock.all_nodes_answered ? "" : " so far", lock.quorum, fence, ttl),
      fmt::format("redlock: extend it: redlock extend {} --token {} --ttl {}", resource, token,
                  ttl),
      fmt::format("redlock: release it: redlock release {} --token {}", resource, token),
  };
}

std::string json_of(const acquired_lock& lock) {
  json_line line;
  line.string("event", "acquired")
      .string("resource", lock.resource)
      .string("token", lock.token)
      .optional_integer("fencing_token", lock.fencing_token)
      .integer("validity_ms", lock.validity_ms)
      .integer("ttl_ms", lock.ttl.count())
      .integer("granted_nodes", lock.granted_nodes)
      .integer("nodes", lock.nodes)
      .integer("quorum", lock.quorum);
  return line.str();
}

std::string shell_word(std::string_view text) {
  const auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
  };
  if (!text.empty() && std::all_of(text.begin(), text.end(), plain)) return std::string(text);
  std::string word = "'";
  for (const char c : text) {
    if (c == '\'') {
      word += "'\\''";
    } else {
      word += c;
    }
  }
  return word + "'";
}

std::string duration_text(std::chrono::milliseconds duration) {
  if (duration.count() % 1000 == 0) return fmt::format("{}s", duration.count() / 1000);
  return fmt::format("{}ms", duration.count());
}

by_token_report report_by_token(by_token action, std::string_view resource, std::string_view token,
                                std::chrono::milliseconds ttl, error_code ec,
                                std::string_view diagnostics, std::string_view not_held_because) {
  const bool extend = action == by_token::extend;
  const std::string holder = token_prefix(token);
  const std::string_view doing = extend ? "extending" : "releasing";
  const std::string account =
      diagnostics.empty() ? std::string() : fmt::format("; {}", one_line(diagnostics));
  by_token_report report;
  if (!ec) {
    report.exit_code = 0;
    report.event = extend ? "extended" : "released";
    report.text = extend ? fmt::format(
                               "redlock: extended {}: it expires within {} unless extended again "
                               "(token {})",
                               resource, duration_text(ttl), holder)
                         : fmt::format("redlock: released {} (token {})", resource, holder);
  } else if (ec == error::not_held) {
    report.exit_code = exit_code::not_held;
    report.event = "not_held";
    report.text = fmt::format("redlock: {} is not held by token {}: {}; nothing was {}", resource,
                              holder, not_held_because, extend ? "extended" : "released");
  } else if (ec == error::no_quorum) {
    // What the library promises for the nodes that did answer, or did not.
    const std::string_view left =
        extend ? "the nodes that answered were extended"
               : "the nodes that did not answer keep the key until its TTL runs out";
    report.exit_code = exit_code::not_acquired;
    report.event = "failed";
    report.text = fmt::format("redlock: {} {} failed: no quorum: too few nodes answered ({}){}",
                              doing, resource, left, account);
  } else if (ec == error::invalid_argument) {
    report.exit_code = exit_code::usage;
    report.event = "failed";
    report.text = fmt::format("redlock: cannot {} {}: {}", extend ? "extend" : "release", resource,
                              diagnostics.empty() ? ec.message() : one_line(diagnostics));
  } else {
    report.exit_code = exit_code::failure;
    report.event = "failed";
    report.text =
        fmt::format("redlock: {} {} failed: {}{}", doing, resource, ec.message(), account);
  }
  report.json.string("event", report.event)
      .string("resource", resource)
      .integer("exit_code", report.exit_code)
      .string("message", one_line(report.text));
  return report;
}

std::string why_not_held(error_code ec, const inspection& seen, std::string_view token) {
  const std::string unsettled = "a quorum of nodes says it is gone or someone else's";
  if (ec) return unsettled;
  switch (seen.state) {
    case inspection::verdict::held:
      if (seen.holder && *seen.holder != token) {
        return fmt::format("it is held by another owner now (token {})",
                           token_prefix(*seen.holder));
      }
      break;
    case inspection::verdict::free:
      return "it is gone from every node that answered (expired or released)";
    case inspection::verdict::not_held:
      if (const auto ours = seen.nodes_holding(token); ours > 0) {
        return fmt::format("this token is left on {} of {} nodes, below the quorum of {}", ours,
                           seen.nodes.size(), seen.quorum);
      }
      return "no node that answered holds this token, and no owner has a quorum";
    case inspection::verdict::unknown:
      break;
  }
  return unsettled;
}

std::string signal_name(int signal) {
  if (const char* abbrev = ::sigabbrev_np(signal)) return fmt::format("SIG{}", abbrev);
  return fmt::format("signal {}", signal);
}

int exit_code_of(int wait_status) noexcept {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exited with code {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return fmt::format("was killed by {}{}", signal_name(WTERMSIG(wait_status)),
                       WCOREDUMP(wait_status) ? " (core dumped)" : "");
  }
  return fmt::format("ended with wait status {:#x}", wait_status);
}

std::string token_prefix(std::string_view value) {
  std::string out(value.substr(0, 8));
  for (char& c : out) {
    if (c < 0x21 || c > 0x7e) c = '?';
  }
  return out;
}

std::string node_failure_reason(error_code ec, std::string_view text) {
  const std::string reason = text.empty() ? ec.message() : one_line(text);
  if (ec == error::permission_denied) return "permission denied: " + reason;
  return reason;
}

std::string format_node_report(const node_report& report) {
  std::string link = report.link.empty() ? std::string() : fmt::format("  ({})", report.link);
  if (report.subscribers && !report.error) {
    link = fmt::format("  subscribers {}", *report.subscribers) + link;
  }
  if (report.error) {
    // "misconfigured" is one character wider than the state column; the reason follows it.
    return fmt::format("{:<21} {}{}{}", report.address,
                       report.misconfigured ? "misconfigured " : "unreachable  ", *report.error,
                       link);
  }
  if (!report.held) return fmt::format("{:<21} reachable    free{}", report.address, link);
  const std::string held = fmt::format("{:<21} reachable    held  ", report.address);
  if (!report.note.empty()) return held + report.note + link;
  const std::string ttl =
      report.pttl_ms >= 0 ? fmt::format("ttl {} ms", report.pttl_ms) : std::string("no ttl");
  return held + fmt::format("{}  token {}{}", ttl, token_prefix(report.value), link);
}

std::string json_of(const node_report& report, std::size_t index, std::string_view resource) {
  std::string_view state = report.held ? "held" : "free";
  if (report.error) state = report.misconfigured ? "misconfigured" : "unreachable";
  const bool lock_key = !report.error && report.held && report.note.empty();
  json_line line;
  line.string("type", "node")
      .string("resource", resource)
      .integer("index", index)
      .string("address", report.address)
      .string("state", state);
  if (lock_key) {
    line.string("token", report.value).integer("pttl_ms", report.pttl_ms);
  } else {
    line.null("token").null("pttl_ms");
  }
  line.optional_string("note", report.note.empty() ? std::nullopt : std::optional(report.note))
      .optional_string("error", report.error)
      // As the text line: subscribers are counted only on a node that could be asked.
      .optional_integer("subscribers", report.error ? std::nullopt : report.subscribers)
      .optional_string("link", report.link.empty() ? std::nullopt : std::optional(report.link));
  return line.str();
}

std::optional<std::string> unknown_state(const node_counts& counts, std::size_t top) {
  const std::size_t unasked = counts.unreachable + counts.misconfigured;
  if (counts.reachable < counts.quorum) {
    if (counts.misconfigured == 0) {
      return fmt::format("unknown: only {} of {} nodes reachable", counts.reachable, counts.nodes);
    }
    return fmt::format("unknown: only {} of {} nodes usable ({} misconfigured)", counts.reachable,
                       counts.nodes, counts.misconfigured);
  }
  if (top + unasked < counts.quorum) return std::nullopt;
  // The wording of the common case (no misconfigured node) is kept as it always was: scripts
  // may match it.
  std::string_view unasked_nodes = "unreachable";
  if (counts.misconfigured > 0) {
    unasked_nodes = counts.unreachable > 0 ? "unreachable and misconfigured" : "misconfigured";
  }
  return fmt::format("unknown: the {} nodes could complete a quorum", unasked_nodes);
}

std::vector<std::string> unasked_lines(const node_counts& counts) {
  std::vector<std::string> lines;
  if (counts.unreachable > 0)
    lines.push_back(fmt::format("unreachable nodes: {}", counts.unreachable));
  if (counts.misconfigured > 0) {
    lines.push_back(fmt::format(
        "misconfigured nodes: {} (the lock cannot use them until their configuration is fixed)",
        counts.misconfigured));
  }
  return lines;
}

status_verdict judge_status(std::string_view resource, std::span<const node_report> reports) {
  status_verdict v;
  v.resource = resource;
  v.nodes = reports.size();
  v.quorum = v.nodes / 2 + 1;
  std::map<std::string, std::size_t> owners;
  std::string top_owner;
  std::size_t other_values = 0;
  for (const auto& report : reports) {
    if (report.error) {
      ++(report.misconfigured ? v.misconfigured : v.unreachable);
      continue;
    }
    ++v.reachable;
    if (!report.held) continue;
    ++v.held;
    // A key that is not a string is nobody's token; it still blocks SET NX on that node.
    if (!report.note.empty()) {
      ++other_values;
      continue;
    }
    const std::size_t count = ++owners[report.value];
    if (count > v.owner_nodes) {
      v.owner_nodes = count;
      top_owner = report.value;
    }
  }
  v.enough_reachable = v.reachable >= v.quorum;
  const node_counts counts{v.nodes, v.quorum, v.reachable, v.unreachable, v.misconfigured};

  std::string state;
  v.state = lock_state::unknown;
  if (v.owner_nodes >= v.quorum) {
    v.state = lock_state::locked;
    v.owner = top_owner;
    state = fmt::format("locked (token {})", token_prefix(top_owner));
  } else if (other_values >= v.quorum) {
    v.state = lock_state::not_a_lock;
    state =
        "not a lock (a value of another type is on a quorum of nodes: no lock can be taken "
        "under this name)";
  } else if (auto unknown = unknown_state(counts, v.owner_nodes)) {
    state = std::move(*unknown);
  } else if (v.held == 0) {
    v.state = lock_state::free;
    state = "free";
  } else if (owners.size() > 1) {
    v.state = lock_state::not_locked;
    state = fmt::format("not locked (below quorum, split between {} owners)", owners.size());
  } else {
    v.state = lock_state::not_locked;
    state = "not locked (below quorum)";
  }
  v.line = fmt::format("{}: held on {} of {} nodes (quorum {}): {}", resource, v.held, v.nodes,
                       v.quorum, state);
  if (const auto name = rw_lock_of_key(resource)) {
    v.hint = fmt::format(
        "\"{}\" is a key of the read-write lock \"{}\": redlock status --read {} shows its "
        "writer, readers and waiting writer",
        resource, *name, shell_word(*name));
  }
  v.counts = unasked_lines(counts);
  return v;
}

std::string_view state_name(lock_state state) noexcept {
  switch (state) {
    case lock_state::locked:
      return "locked";
    case lock_state::free:
      return "free";
    case lock_state::not_locked:
      return "not_locked";
    case lock_state::not_a_lock:
      return "not_a_lock";
    case lock_state::unknown:
      break;
  }
  return "unknown";
}

std::string json_of(const status_verdict& verdict) {
  json_line line;
  line.string("type", "verdict")
      .string("resource", verdict.resource)
      .string("state", state_name(verdict.state))
      .optional_string("token", verdict.state == lock_state::locked ? std::optional(verdict.owner)
                                                                    : std::nullopt)
      .integer("nodes", verdict.nodes)
      .integer("quorum", verdict.quorum)
      .integer("answered", verdict.reachable)
      .integer("unreachable", verdict.unreachable)
      .integer("misconfigured", verdict.misconfigured)
      .integer("held", verdict.held)
      .integer("owner_nodes", verdict.owner_nodes)
      .boolean("quorum_answered", verdict.enough_reachable)
      .optional_string("hint", verdict.hint.empty() ? std::nullopt : std::optional(verdict.hint));
  return line.str();
}

semaphore_verdict judge_semaphore(std::string_view name, std::span<const status_verdict> slots) {
  semaphore_verdict v;
  v.name = name;
  v.permits = slots.size();
  v.enough_reachable = !slots.empty();
  for (const auto& slot : slots) {
    if (slot.state == lock_state::locked) ++v.held;
    if (slot.state == lock_state::unknown) ++v.unknown;
    v.enough_reachable = v.enough_reachable && slot.enough_reachable;
    v.slots.push_back(slot.state);
  }
  if (!slots.empty()) {
    const auto& first = slots.front();
    v.nodes = first.nodes;
    v.quorum = first.quorum;
    v.unreachable = first.unreachable;
    v.misconfigured = first.misconfigured;
    v.counts = first.counts;
  }
  v.line = fmt::format("{}: {} of {} permits held (quorum {} of {} nodes)", name, v.held, v.permits,
                       v.quorum, v.nodes);
  if (v.unknown > 0) v.line += fmt::format(", {} unknown", v.unknown);
  return v;
}

std::string json_of(const semaphore_verdict& verdict) {
  std::vector<std::string> slots;
  for (const auto state : verdict.slots)
    slots.emplace_back(state_name(state));
  json_line line;
  line.string("type", "semaphore")
      .string("resource", verdict.name)
      .integer("permits", verdict.permits)
      .integer("held", verdict.held)
      .integer("unknown", verdict.unknown)
      .strings("slots", slots)
      .integer("nodes", verdict.nodes)
      .integer("quorum", verdict.quorum)
      .integer("unreachable", verdict.unreachable)
      .integer("misconfigured", verdict.misconfigured)
      .boolean("quorum_answered", verdict.enough_reachable);
  return line.str();
}

}  // namespace redlock::cli
