#include "force_release.hpp"

#include "exit_codes.hpp"
#include "messages.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace redlock::cli {
namespace {

std::string joined(std::span<const std::string> parts, std::string_view separator) {
  std::string out;
  for (const auto& part : parts) {
    if (!out.empty()) out += separator;
    out += part;
  }
  return out;
}

}  // namespace

force_release_plan plan_force_release(const inspection& seen) {
  force_release_plan plan;
  plan.resource = seen.resource;
  plan.nodes = seen.nodes.size();
  plan.quorum = seen.quorum;
  for (const auto& node : seen.nodes) {
    if (!node.answered()) {
      // The library's text names the node already.
      plan.silent.push_back(node.error_text.empty()
                                ? fmt::format("{}: {}", node.address, node.error.message())
                                : one_line(node.error_text));
      continue;
    }
    ++plan.answered;
    if (node.not_a_lock) {
      plan.not_a_lock.push_back(node.address);
      continue;
    }
    if (!node.holder) continue;
    auto holder = std::find_if(plan.holders.begin(), plan.holders.end(),
                               [&](const holder_on_nodes& h) { return h.token == *node.holder; });
    if (holder == plan.holders.end()) {
      plan.holders.push_back({.token = *node.holder, .nodes = {}});
      holder = std::prev(plan.holders.end());
    }
    holder->nodes.push_back(node.address);
  }
  // Stable: holders on as many nodes stay in the order of the first node each was seen on.
  std::stable_sort(plan.holders.begin(), plan.holders.end(),
                   [](const holder_on_nodes& a, const holder_on_nodes& b) {
                     return a.nodes.size() > b.nodes.size();
                   });
  return plan;
}

std::string confirmation_question(const force_release_plan& plan) {
  std::vector<std::string> holders;
  for (const auto& holder : plan.holders) {
    holders.push_back(fmt::format("{} on {} of {} nodes", token_prefix(holder.token),
                                  holder.nodes.size(), plan.nodes));
  }
  return fmt::format("release {} held by {}? [y/N] ", one_line(plan.resource),
                     joined(holders, " and by "));
}

bool confirms(std::string_view answer) {
  const auto first = answer.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return false;
  answer = answer.substr(first, answer.find_last_not_of(" \t\r\n") - first + 1);
  std::string word(answer);
  std::transform(word.begin(), word.end(), word.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return word == "y" || word == "yes";
}

bool released(error_code outcome) noexcept {
  return !outcome || outcome == error::not_held;
}

std::string audit_line(std::string_view user, std::string_view host, const force_release_plan& plan,
                       std::span<const error_code> outcomes) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < plan.holders.size(); ++i) {
    const auto& holder = plan.holders[i];
    const error_code outcome = i < outcomes.size() ? outcomes[i] : error_code{};
    parts.push_back(
        fmt::format("token {} on {} ({})", one_line(holder.token), joined(holder.nodes, ","),
                    released(outcome) ? std::string("released")
                                      : fmt::format("not released: {}", outcome.message())));
  }
  if (!plan.not_a_lock.empty()) {
    parts.push_back(fmt::format("not a lock, left alone on {}", joined(plan.not_a_lock, ",")));
  }
  return fmt::format("{} on {} released \"{}\" by force: {}", one_line(user), one_line(host),
                     one_line(plan.resource), joined(parts, "; "));
}

int force_release_exit_code(const force_release_plan& plan, std::span<const error_code> outcomes) {
  if (plan.holders.empty()) return exit_code::not_held;
  int code = 0;
  for (const auto outcome : outcomes) {
    if (released(outcome)) continue;
    // Too few nodes answering may pass; any other failure will not, so it says more.
    if (outcome != error::no_quorum) return exit_code::failure;
    code = exit_code::not_acquired;
  }
  return code;
}

std::vector<std::string> released_tokens(const force_release_plan& plan,
                                         std::span<const error_code> outcomes) {
  std::vector<std::string> tokens;
  for (std::size_t i = 0; i < plan.holders.size() && i < outcomes.size(); ++i) {
    if (released(outcomes[i])) tokens.push_back(plan.holders[i].token);
  }
  return tokens;
}

json_line json_of_force_release(std::string_view event, std::string_view resource, int exit_code,
                                std::string_view message, std::span<const std::string> tokens,
                                std::string_view user, std::string_view host) {
  json_line line;
  line.string("event", event)
      .string("resource", resource)
      .integer("exit_code", exit_code)
      .string("message", message)
      .strings("tokens", tokens)
      .string("user", user)
      .string("host", host);
  return line;
}

}  // namespace redlock::cli
