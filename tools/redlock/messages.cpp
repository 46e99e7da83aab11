#include "messages.hpp"

#include "exit_codes.hpp"

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
                                 std::optional<std::size_t> permits) {
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
  std::string line = fmt::format("redlock: \"{}\" not acquired{}: {}", resource, when, cause);
  if (!diagnostics.empty()) {
    line += fmt::format("; last attempt: {}", one_line(diagnostics));
  } else if (ec) {
    line += fmt::format(" ({})", ec.message());
  }
  return line;
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

status_verdict judge_status(std::string_view resource, std::span<const node_report> reports) {
  status_verdict v;
  v.nodes = reports.size();
  v.quorum = v.nodes / 2 + 1;
  std::map<std::string, std::size_t> owners;
  std::string top_owner;
  for (const auto& report : reports) {
    if (report.error) {
      ++(report.misconfigured ? v.misconfigured : v.unreachable);
      continue;
    }
    ++v.reachable;
    if (!report.held) continue;
    ++v.held;
    // A key that is not a string is nobody's token; it still blocks SET NX on that node.
    if (!report.note.empty()) continue;
    const std::size_t count = ++owners[report.value];
    if (count > v.owner_nodes) {
      v.owner_nodes = count;
      top_owner = report.value;
    }
  }
  v.enough_reachable = v.reachable >= v.quorum;
  const std::size_t unasked = v.unreachable + v.misconfigured;
  // The wording of the common case (no misconfigured node) is kept as it always was: scripts
  // may match it.
  std::string_view unasked_nodes = "unreachable";
  if (v.misconfigured > 0) {
    unasked_nodes = v.unreachable > 0 ? "unreachable and misconfigured" : "misconfigured";
  }

  std::string state;
  v.state = lock_state::unknown;
  if (v.owner_nodes >= v.quorum) {
    v.state = lock_state::locked;
    state = fmt::format("locked (token {})", token_prefix(top_owner));
  } else if (!v.enough_reachable) {
    state = v.misconfigured == 0
                ? fmt::format("unknown: only {} of {} nodes reachable", v.reachable, v.nodes)
                : fmt::format("unknown: only {} of {} nodes usable ({} misconfigured)", v.reachable,
                              v.nodes, v.misconfigured);
  } else if (v.owner_nodes + unasked >= v.quorum) {
    state = fmt::format("unknown: the {} nodes could complete a quorum", unasked_nodes);
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
  if (v.unreachable > 0) v.counts.push_back(fmt::format("unreachable nodes: {}", v.unreachable));
  if (v.misconfigured > 0) {
    v.counts.push_back(fmt::format(
        "misconfigured nodes: {} (the lock cannot use them until their configuration is fixed)",
        v.misconfigured));
  }
  return v;
}

semaphore_verdict judge_semaphore(std::string_view name, std::span<const status_verdict> slots) {
  semaphore_verdict v;
  v.permits = slots.size();
  v.enough_reachable = !slots.empty();
  for (const auto& slot : slots) {
    if (slot.state == lock_state::locked) ++v.held;
    if (slot.state == lock_state::unknown) ++v.unknown;
    v.enough_reachable = v.enough_reachable && slot.enough_reachable;
  }
  const std::size_t nodes = slots.empty() ? 0 : slots.front().nodes;
  const std::size_t quorum = slots.empty() ? 0 : slots.front().quorum;
  v.line = fmt::format("{}: {} of {} permits held (quorum {} of {} nodes)", name, v.held, v.permits,
                       quorum, nodes);
  if (v.unknown > 0) v.line += fmt::format(", {} unknown", v.unknown);
  if (!slots.empty()) v.counts = slots.front().counts;
  return v;
}

}  // namespace redlock::cli
