#include "acquire_command.hpp"

#include "exit_codes.hpp"
#include "json_line.hpp"
#include "lock_steps.hpp"
#include "messages.hpp"
#include "redlock/redlock.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <signal.h>
#include <string>
#include <string_view>
#include <tuple>

namespace redlock::cli {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using std::chrono::steady_clock;

// What `acquire` tells, in both forms: the text on stderr, or with --json the one object on
// stdout, which is the command's outcome whatever it is (the token's object on success).
void tell(const acquire_options& options, std::string_view text, const json_line& json) {
  if (options.json) {
    fmt::print(stdout, "{}\n", json.str());
  } else {
    fmt::print(stderr, "{}\n", text);
  }
}

json_line json_event(const acquire_options& options, std::string_view event) {
  json_line line;
  line.string("event", event).string("resource", options.resource);
  return line;
}

// One `redlock acquire` on one io_context and one thread. Until the token is out, SIGINT, SIGTERM
// and SIGHUP cancel the acquire (which releases whatever it had set) and nothing is left on the
// nodes; once it is out, the lock is the caller's.
class acquire_session {
 public:
  acquire_session(asio::io_context& io, const acquire_options& options,
                  const inheritance& inherited)
      : options_(options), signals_(io) {
    for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
      if (!inherited.ignored(signal)) signals_.add(signal);
    }
    client_options settings;
    settings.client_name = "redlock-cli";
    node_timeout_ = settings.node_timeout;
    connect_timeout_ = settings.connect_timeout;
    client_.emplace(io.get_executor(), options_.nodes, settings);
  }

  asio::awaitable<int> run() {
    asio::co_spawn(signals_.get_executor(), watch_signals(), asio::detached);
    co_return co_await acquire_and_hand_over();
  }

  // Lets the io_context run out of work. A lease still held (only after an internal error) is
  // released by the client as it closes; a handed-over one is not the client's any more.
  void shut_down() {
    signals_.cancel();
    client_.reset();
  }

 private:
  asio::awaitable<int> acquire_and_hand_over() {
    lock_options lock;
    lock.ttl = options_.ttl;
    lock.fencing = options_.fencing;
    // Nobody would be there to renew it: the tool exits once the token is out.
    lock.auto_renew = false;
    const auto interrupted = [this] { return interrupted_by_.has_value(); };
    auto token = [this] {
      return asio::bind_cancellation_slot(acquire_cancel_.slot(),
                                          asio::as_tuple(asio::use_awaitable));
    };
    error_code ec;
    lease acquired;
    // The connections are opened first, so that every node's SET goes out at once (see below).
    co_await open_connections(*client_, options_.resource, connect_timeout_, acquire_cancel_.slot(),
                              interrupted);
    if (interrupted_by_) co_return co_await give_up_interrupted();
    // Each co_await is a statement of its own (g++ 12 garbled a co_await's tuple in an arm of a
    // conditional expression; see run_command.cpp).
    if (options_.wait == std::chrono::milliseconds::zero()) {
      // --wait 0: one round, as `run` makes it.
      std::tie(ec, acquired) =
          co_await client_->async_try_acquire(options_.resource, lock, token());
    } else {
      lock.wait = options_.wait;
      std::tie(ec, acquired) = co_await client_->async_acquire(options_.resource, lock, token());
    }
    acquiring_ = false;
    lease_ = std::move(acquired);
    if (interrupted_by_) co_return co_await give_up_interrupted();
    if (ec) {
      const auto refused = report_not_acquired(options_.resource, options_.wait, ec,
                                               lease_.diagnostics(), options_.conflict_exit_code);
      tell(options_, refused.text, refused.json);
      co_return refused.exit_code;
    }
    // Every node's answer is waited for (each has node_timeout): a SET still on its way when the
    // token is out could reach its node after the `redlock release` of another process, and leave
    // a key there until its TTL. Within one client the release follows the SET on the same
    // connection; across processes only this wait orders them. It also tells how many nodes hold
    // the lock, which nobody counts again after the hand-over. A SET written to a node that then
    // stalls past node_timeout can still run late there: a key on a minority, which expires.
    co_await await_late_answers(*client_, lease_, node_timeout_, interrupted);
    if (interrupted_by_) co_return co_await give_up_interrupted();
    co_return co_await hand_over();
  }

  // Prints the token and lets the lease go without releasing it. A token that cannot be written
  // (stdout closed) would leave a lock nobody can release before its TTL: it is released instead.
  asio::awaitable<int> hand_over() {
    acquired_lock facts{
        .resource = options_.resource,
        .token = lease_.token(),
        .fencing_token = lease_.fencing_token(),
        .ttl = options_.ttl,
        .validity_ms = std::chrono::duration_cast<std::chrono::milliseconds>(lease_.valid_until() -
                                                                             steady_clock::now())
                           .count(),
        .granted_nodes = lease_.granted_nodes(),
        .nodes = client_->size(),
        .quorum = client_->quorum(),
        .all_nodes_answered = all_nodes_answered(*client_, lease_),
    };
    bool written = false;
    try {
      fmt::print(stdout, "{}\n", options_.json ? json_of(facts) : facts.token);
      written = std::fflush(stdout) == 0 && std::ferror(stdout) == 0;
    } catch (const std::exception&) {
      written = false;
    }
    if (!written) {
      co_await lease_.async_release(asio::as_tuple(asio::use_awaitable));
      fmt::print(stderr, "redlock: cannot write the token of {} on stdout; released it\n",
                 options_.resource);
      co_return exit_code::failure;
    }
    lease_.detach();
    if (!options_.quiet && !options_.json) {
      for (const auto& line : acquired_notes(facts))
        fmt::print(stderr, "{}\n", line);
      // Fewer than all nodes granted it: the library's account names the others' answers.
      if (!lease_.diagnostics().empty()) {
        fmt::print(stderr, "redlock: warning: {}\n", one_line(lease_.diagnostics()));
      }
    }
    co_return 0;
  }

  // A signal cancelled the acquire, or arrived before the token was out: leave nothing behind.
  asio::awaitable<int> give_up_interrupted() {
    if (lease_.held()) co_await lease_.async_release(asio::as_tuple(asio::use_awaitable));
    const int code = exit_code::signal_base + *interrupted_by_;
    if (options_.json || !options_.quiet) {
      tell(options_,
           fmt::format("redlock: {} while waiting for {}; nothing is held",
                       signal_name(*interrupted_by_), options_.resource),
           json_event(options_, "interrupted")
               .string("signal", signal_name(*interrupted_by_))
               .integer("exit_code", code));
    }
    co_return code;
  }

  asio::awaitable<void> watch_signals() {
    for (;;) {
      auto [ec, signal] = co_await signals_.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;  // shut_down()
      if (!interrupted_by_) interrupted_by_ = signal;
      // The acquire completes with operation_aborted and releases whatever it had set.
      if (acquiring_) acquire_cancel_.emit(asio::cancellation_type::terminal);
    }
  }

  const acquire_options& options_;
  asio::signal_set signals_;
  asio::cancellation_signal acquire_cancel_;
  std::optional<client> client_;
  lease lease_;  // declared after client_: a lease must not outlive its client's executor work
  bool acquiring_ = true;
  std::optional<int> interrupted_by_;
  std::chrono::milliseconds node_timeout_{};
  std::chrono::milliseconds connect_timeout_{};
};

int report_error(const acquire_options& options, std::string_view message, int code) {
  tell(options, fmt::format("redlock: {}", message),
       json_event(options, "error").integer("exit_code", code).string("message", message));
  return code;
}

}  // namespace

int acquire_command(const acquire_options& options, const inheritance& inherited) {
  return run_to_exit_code<acquire_session>(
      options, inherited,
      [&](std::string_view message, int code) { report_error(options, message, code); });
}

}  // namespace redlock::cli
