#include "token_commands.hpp"

#include "exit_codes.hpp"
#include "force_release.hpp"
#include "json_line.hpp"
#include "lock_steps.hpp"
#include "messages.hpp"
#include "redlock/redlock.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <iostream>
#include <optional>
#include <pwd.h>
#include <string>
#include <string_view>
#include <syslog.h>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace redlock::cli {
namespace {

namespace asio = boost::asio;

// A client for one short command. The library words why an extension or a release by token
// failed only in its log (a warning naming each node's answer, logged just before the operation
// completes), so the last warning is kept to be quoted.
class command_client {
 public:
  explicit command_client(const std::vector<node_config>& nodes) {
    client_options settings;
    settings.client_name = "redlock-cli";
    settings.logger = [this](log_level level, std::string_view message) {
      if (level >= log_level::warning) last_warning_ = message;
    };
    connect_timeout_ = settings.connect_timeout;
    client_.emplace(io_.get_executor(), nodes, settings);
  }

  command_client(const command_client&) = delete;
  command_client& operator=(const command_client&) = delete;

  // Closes the client and runs what it still has to send: a release for a node that was down goes
  // out if it reconnects in time (bounded by the client's shutdown, about a second).
  ~command_client() {
    client_.reset();
    try {
      io_.run();
    } catch (const std::exception&) {
      // The process is ending; what is left expires with its TTL.
    }
  }

  client& locks() { return *client_; }

  template <class T>
  T run(asio::awaitable<T> work) {
    return run_to_completion(io_, std::move(work));
  }

  // Opens every connection that can open before anything about `resource` is sent: a cold
  // connect counts against each request's node_timeout, and a slow one must neither turn into "no
  // quorum" nor leave a node without the request (see open_every_connection).
  asio::awaitable<void> connect(std::string resource) {
    co_await open_every_connection(*client_, std::move(resource), connect_timeout_);
  }

  void forget_warnings() { last_warning_.clear(); }
  const std::string& last_warning() const noexcept { return last_warning_; }

 private:
  asio::io_context io_;
  std::optional<client> client_;  // after io_: destroyed first
  std::chrono::milliseconds connect_timeout_{};
  std::string last_warning_;
};

struct by_token_outcome {
  error_code ec;
  std::string diagnostics;       // the library's account, when it failed
  std::string not_held_because;  // with error::not_held: what the nodes hold instead
};

asio::awaitable<by_token_outcome> change_by_token(command_client& session, by_token action,
                                                  std::string resource, std::string token,
                                                  std::chrono::milliseconds ttl) {
  co_await session.connect(resource);
  session.forget_warnings();
  by_token_outcome outcome;
  // Each co_await is a statement of its own (g++ 12 and conditional expressions; see
  // run_command.cpp).
  if (action == by_token::extend) {
    std::tie(outcome.ec) = co_await session.locks().async_extend(
        resource, token, ttl, asio::as_tuple(asio::use_awaitable));
  } else {
    std::tie(outcome.ec) = co_await session.locks().async_release(
        resource, token, asio::as_tuple(asio::use_awaitable));
  }
  if (outcome.ec) outcome.diagnostics = session.last_warning();
  if (outcome.ec == error::not_held) {
    // The library does not tell gone from someone else's; the nodes do.
    auto [ec, seen] =
        co_await session.locks().async_inspect(resource, asio::as_tuple(asio::use_awaitable));
    outcome.not_held_because = why_not_held(ec, seen, token);
  }
  co_return outcome;
}

// The client refuses a node list the URL parser accepted (e.g. an ACL user without password).
int refused_nodes(const boost::system::system_error& e) {
  fmt::print(stderr, "redlock: {}\n", one_line(e.what()));
  return e.code() == error::invalid_argument ? exit_code::usage : exit_code::failure;
}

int by_token_command(by_token action, const std::vector<node_config>& nodes,
                     const std::string& resource, const std::string& token,
                     std::chrono::milliseconds ttl, bool quiet, bool json) {
  std::optional<command_client> session;
  try {
    session.emplace(nodes);
  } catch (const boost::system::system_error& e) {
    return refused_nodes(e);
  }
  const auto outcome = session->run(change_by_token(*session, action, resource, token, ttl));
  const auto report = report_by_token(action, resource, token, ttl, outcome.ec, outcome.diagnostics,
                                      outcome.not_held_because);
  if (json) {
    fmt::print(stdout, "{}\n", report.json.str());
  } else if (report.exit_code != 0 || !quiet) {
    fmt::print(stderr, "{}\n", report.text);
  }
  return report.exit_code;
}

// Who runs the forced release, for the record: the login name (which survives su and sudo), and
// the effective user's when that differs ("alice as root").
std::string user_name() {
  const uid_t uid = ::geteuid();
  const passwd* const entry = ::getpwuid(uid);
  const std::string effective = entry != nullptr ? entry->pw_name : fmt::format("uid {}", uid);
  const char* const login = ::getlogin();
  if (login == nullptr || *login == '\0' || effective == login) return effective;
  return fmt::format("{} as {}", login, effective);
}

std::string host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "unknown host";
  return name.data();
}

void log_to_syslog(const std::string& line) {
  ::openlog("redlock", LOG_PID, LOG_AUTH);
  ::syslog(LOG_NOTICE, "%s", line.c_str());
  ::closelog();
}

asio::awaitable<std::tuple<error_code, inspection>> look(command_client& session,
                                                         std::string resource) {
  co_await session.connect(resource);
  auto [ec, seen] =
      co_await session.locks().async_inspect(resource, asio::as_tuple(asio::use_awaitable));
  co_return std::tuple(ec, std::move(seen));
}

// One after the other, each by its own token: a holder that took the lock since the look keeps it.
asio::awaitable<std::vector<by_token_outcome>> release_each(command_client& session,
                                                            force_release_plan plan) {
  std::vector<by_token_outcome> outcomes;
  for (const auto& holder : plan.holders) {
    session.forget_warnings();
    by_token_outcome outcome;
    std::tie(outcome.ec) = co_await session.locks().async_release(
        plan.resource, holder.token, asio::as_tuple(asio::use_awaitable));
    if (outcome.ec) outcome.diagnostics = session.last_warning();
    outcomes.push_back(std::move(outcome));
  }
  co_return outcomes;
}

int force_release(const release_options& options) {
  // Decided before any node is asked: without a terminal nobody can answer the question, and a
  // script that means it says so with --yes.
  if (!options.yes && ::isatty(STDIN_FILENO) == 0) {
    fmt::print(stderr,
               "redlock: release --force needs --yes when stdin is not a terminal (nothing was "
               "released)\n");
    return exit_code::usage;
  }
  const std::string user = user_name();
  const std::string host = host_name();
  const auto tell = [&](std::string_view event, int code, const std::string& text,
                        const std::vector<std::string>& tokens) {
    if (options.json) {
      fmt::print(
          stdout, "{}\n",
          json_of_force_release(event, options.resource, code, one_line(text), tokens, user, host)
              .str());
    } else if (code != 0 || !options.quiet) {
      fmt::print(stderr, "{}\n", text);
    }
    return code;
  };

  std::optional<command_client> session;
  try {
    session.emplace(options.nodes);
  } catch (const boost::system::system_error& e) {
    return refused_nodes(e);
  }
  const auto [look_ec, seen] = session->run(look(*session, options.resource));
  if (look_ec) {
    const bool no_quorum = look_ec == error::no_quorum;
    const int code = no_quorum                            ? exit_code::not_acquired
                     : look_ec == error::invalid_argument ? exit_code::usage
                                                          : exit_code::failure;
    return tell(
        "failed", code,
        fmt::format(
            "redlock: cannot release {} by force: {}{}; nothing was released", options.resource,
            no_quorum ? "no quorum: too few nodes answered" : look_ec.message(),
            seen.diagnostics.empty() ? std::string() : " (" + one_line(seen.diagnostics) + ")"),
        {});
  }
  const auto plan = plan_force_release(seen);
  if (!options.quiet && !options.json) {
    for (const auto& address : plan.not_a_lock) {
      fmt::print(stderr,
                 "redlock: note: {} holds a key {} of another type, not a lock: left alone\n",
                 address, options.resource);
    }
    for (const auto& why : plan.silent) {
      fmt::print(stderr,
                 "redlock: warning: not asked: {}; what it holds stays until its TTL runs out\n",
                 why);
    }
  }
  if (plan.holders.empty()) {
    const std::string others =
        plan.not_a_lock.empty()
            ? std::string()
            : fmt::format(" ({} of them hold a key of another type, left alone)",
                          plan.not_a_lock.size());
    return tell("not_held", exit_code::not_held,
                fmt::format("redlock: nothing to release: no lock holds {} on the {} of {} nodes "
                            "that answered{}",
                            options.resource, plan.answered, plan.nodes, others),
                {});
  }
  if (!options.yes) {
    fmt::print(stderr, "{}", confirmation_question(plan));
    std::fflush(stderr);
    std::string answer;
    std::getline(std::cin, answer);
    if (!confirms(answer)) {
      return tell("failed", exit_code::failure, "redlock: not confirmed; nothing was released", {});
    }
  }

  const auto results = session->run(release_each(*session, plan));
  std::vector<error_code> outcomes;
  for (const auto& result : results)
    outcomes.push_back(result.ec);
  // Written whatever the outcomes: an attempt that failed is worth a record too.
  const std::string record = audit_line(user, host, plan, outcomes);
  fmt::print(stderr, "redlock: {}\n", record);
  log_to_syslog(record);
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (!released(results[i].ec) && !results[i].diagnostics.empty()) {
      fmt::print(stderr, "redlock: releasing token {} of {}: {}\n",
                 token_prefix(plan.holders[i].token), options.resource,
                 one_line(results[i].diagnostics));
    }
  }
  const int code = force_release_exit_code(plan, outcomes);
  if (options.json) {
    fmt::print(stdout, "{}\n",
               json_of_force_release(code == 0 ? "released" : "failed", options.resource, code,
                                     record, released_tokens(plan, outcomes), user, host)
                   .str());
  }
  return code;
}

}  // namespace

int extend_command(const extend_options& options) {
  return by_token_command(by_token::extend, options.nodes, options.resource, options.token,
                          options.ttl, options.quiet, options.json);
}

int release_command(const release_options& options) {
  if (options.force) return force_release(options);
  return by_token_command(by_token::release, options.nodes, options.resource, options.token, {},
                          options.quiet, options.json);
}

}  // namespace redlock::cli
