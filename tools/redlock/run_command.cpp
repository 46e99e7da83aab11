#include "run_command.hpp"

#include "exit_codes.hpp"
#include "messages.hpp"
#include "redlock/redlock.hpp"

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

namespace redlock::cli {
namespace {

namespace asio = boost::asio;
using std::chrono::steady_clock;

long long ms_between(steady_clock::time_point from, steady_clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

void say(std::string_view line) {
  fmt::print(stderr, "{}\n", line);
}

// One `redlock run`, on one io_context and one thread: the acquire, COMMAND's life and the lease
// are all watched through Asio (signal_set for SIGCHLD, SIGINT, SIGTERM and SIGHUP; timers), so
// every event is handled in one place, in order, and nothing polls.
//
// Invariant: once COMMAND has been reaped (child_status_ is set) its pid is never signalled again;
// until then it is a child of ours (at worst a zombie), so the pid cannot have been reused.
class run_session {
 public:
  run_session(asio::io_context& io, const run_options& options, const inheritance& inherited)
      : options_(options),
        inherited_(inherited),
        signals_(io),
        grace_timer_(io),
        child_reaped_(io, steady_clock::time_point::max()) {
    for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
      if (!inherited_.ignored(signal)) signals_.add(signal);
    }
    client_options settings;
    settings.client_name = "redlock-cli";
    settings.logger = [this](log_level level, std::string_view message) {
      if (level >= log_level::warning) remember_warning(message);
    };
    client_.emplace(io.get_executor(), options_.nodes, settings);
  }

  run_session(const run_session&) = delete;
  run_session& operator=(const run_session&) = delete;

  // Only an internal error can leave COMMAND running here; it must not outlive its lock.
  ~run_session() {
    if (child_ > 0 && !child_status_) {
      ::kill(child_, SIGKILL);
      while (::waitpid(child_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }

  asio::awaitable<int> run() {
    asio::co_spawn(signals_.get_executor(), watch_signals(), asio::detached);
    if (const auto failed = co_await acquire()) co_return *failed;
    if (const auto failed = co_await start_command()) co_return *failed;
    while (!child_status_) {
      co_await child_reaped_.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    phase_ = phase::finishing;
    grace_timer_.cancel();
    co_return co_await finish();
  }

  // Lets the io_context run out of work: closes the client (its connections stay until the last
  // releases are written, bounded by the node timeout) and stops watching signals. Signals that
  // arrive from now on are swallowed by the still installed handler: the release must go out.
  void shut_down() {
    signals_.cancel();
    grace_timer_.cancel();
    client_.reset();
  }

 private:
  enum class phase { acquiring, starting, running, finishing };

  // Empty when the lock is held, else the exit code.
  asio::awaitable<std::optional<int>> acquire() {
    lock_options lock;
    lock.ttl = options_.ttl;
    lock.wait = options_.wait;
    auto [ec, acquired] = co_await client_->async_acquire(
        options_.resource, lock,
        asio::bind_cancellation_slot(acquire_cancel_.slot(), asio::as_tuple(asio::use_awaitable)));
    phase_ = phase::starting;
    lease_ = std::move(acquired);
    if (interrupted_by_) co_return co_await give_up_interrupted();
    if (ec == error::invalid_argument) {
      say(fmt::format("redlock: {}", one_line(lease_.diagnostics())));
      co_return exit_code::usage;
    }
    if (ec) {
      say(not_acquired_message(options_.resource, options_.wait, ec, lease_.diagnostics()));
      const auto why = classify_acquire_failure(ec, lease_.diagnostics());
      const bool temporary = why != acquire_failure::invalid && why != acquire_failure::other;
      co_return temporary ? exit_code::not_acquired : exit_code::failure;
    }
    acquired_at_ = steady_clock::now();
    if (!options_.quiet) {
      // The round is decided at the quorum-th grant, so that is how many nodes had granted it.
      say(fmt::format("redlock: acquired {} (valid {} ms, {}/{} nodes)", options_.resource,
                      ms_between(acquired_at_, lease_.valid_until()), client_->quorum(),
                      client_->size()));
    }
    co_return std::nullopt;
  }

  // A signal cancelled the acquire, or arrived just after it succeeded: leave nothing behind.
  asio::awaitable<int> give_up_interrupted() {
    if (lease_.held()) co_await lease_.async_release(asio::as_tuple(asio::use_awaitable));
    if (!options_.quiet) {
      say(fmt::format("redlock: {} while waiting for {}; nothing was run",
                      signal_name(*interrupted_by_), options_.resource));
    }
    co_return exit_code::signal_base + *interrupted_by_;
  }

  // Empty when COMMAND runs, else the exit code.
  asio::awaitable<std::optional<int>> start_command() {
    if (interrupted_by_) co_return co_await give_up_interrupted();
    // Added only now, so that a stray SIGCHLD (a child of whoever exec'd us) cannot matter
    // earlier; added before the fork, so that COMMAND's cannot be missed.
    signals_.add(SIGCHLD);
    const auto spawned = spawn_command(options_.command, inherited_);
    if (spawned.pid > 0) {
      child_ = spawned.pid;
      phase_ = phase::running;
      lease_.async_wait_lost([this](error_code ec) { on_lost(ec); });
      co_return std::nullopt;
    }
    co_await lease_.async_release(asio::as_tuple(asio::use_awaitable));
    if (!spawned.exec_failed) {
      say(fmt::format("redlock: cannot start COMMAND: {}", std::strerror(spawned.error)));
      co_return exit_code::failure;
    }
    const bool missing = spawned.error == ENOENT;
    say(fmt::format("redlock: cannot run \"{}\": {}{}", options_.command.front(),
                    std::strerror(spawned.error), missing ? " (command not found)" : ""));
    co_return missing ? exit_code::not_found : exit_code::cannot_execute;
  }

  asio::awaitable<int> finish() {
    const int status = *child_status_;
    const std::string ended = describe_wait_status(status);
    if (lost_) {
      const std::string stopped =
          killed_
              ? fmt::format("SIGTERM, then SIGKILL after the {} ms grace,", options_.grace.count())
              : std::string("SIGTERM");
      say(fmt::format("redlock: lost the lock on {} while COMMAND ran: {}; COMMAND got {} and {}",
                      options_.resource, lost_because_, stopped, ended));
      co_return exit_code::lock_lost;
    }
    auto [ec] = co_await lease_.async_release(asio::as_tuple(asio::use_awaitable));
    if (ec == error::not_held) {
      // Lost while COMMAND was ending, or unnoticed: it may have run without the lock.
      const std::string why =
          lost_because_.empty() ? one_line(lease_.diagnostics()) : lost_because_;
      say(fmt::format("redlock: lost the lock on {} before COMMAND ended (COMMAND {}): {}",
                      options_.resource, ended, why));
      co_return exit_code::lock_lost;
    }
    if (ec) {
      say(fmt::format(
          "redlock: warning: releasing {} failed: {}; what is left expires within {} ms",
          options_.resource,
          lease_.diagnostics().empty() ? ec.message() : one_line(lease_.diagnostics()),
          options_.ttl.count()));
    } else if (!options_.quiet) {
      say(fmt::format("redlock: released {} after {} ms", options_.resource,
                      ms_between(acquired_at_, steady_clock::now())));
    }
    co_return exit_code_of(status);
  }

  asio::awaitable<void> watch_signals() {
    for (;;) {
      auto [ec, signal] = co_await signals_.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;  // shut_down()
      on_signal(signal);
    }
  }

  void on_signal(int signal) {
    if (signal == SIGCHLD) return reap();
    switch (phase_) {
      case phase::acquiring:
        // The acquire completes with operation_aborted and releases whatever it had set.
        if (!interrupted_by_) interrupted_by_ = signal;
        acquire_cancel_.emit(asio::cancellation_type::terminal);
        break;
      case phase::starting:
        if (!interrupted_by_) interrupted_by_ = signal;
        break;
      case phase::running:
        // COMMAND decides what the signal means; we release once it has ended.
        if (!child_status_) ::kill(child_, signal);
        break;
      case phase::finishing:
        break;
    }
  }

  void reap() {
    if (child_ <= 0 || child_status_) return;
    int status = 0;
    pid_t got = 0;
    do {
      got = ::waitpid(child_, &status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got != child_) return;
    child_status_ = status;
    grace_timer_.cancel();
    // Expiring at once rather than cancelling: the main coroutine may not be waiting yet.
    child_reaped_.expires_at(steady_clock::time_point::min());
  }

  void on_lost(error_code ec) {
    if (ec != error::lock_lost) return;  // released or shut down: nothing was lost
    lost_because_ = one_line(lease_.diagnostics());
    if (!previous_warning_.empty() && steady_clock::now() - previous_warning_at_ < options_.ttl) {
      lost_because_ += fmt::format(" (before that: {})", one_line(previous_warning_));
    }
    if (child_status_) return;
    lost_ = true;
    ::kill(child_, SIGTERM);
    grace_timer_.expires_after(options_.grace);
    grace_timer_.async_wait([this](error_code timer) {
      if (timer || child_status_) return;
      killed_ = true;
      ::kill(child_, SIGKILL);
    });
  }

  // The library logs a failed renewal and then the loss itself; the loss message alone says only
  // that validity ran out, so the warning before it is kept to say why.
  void remember_warning(std::string_view message) {
    if (last_warning_ != message) {
      previous_warning_ = std::move(last_warning_);
      previous_warning_at_ = last_warning_at_;
    }
    last_warning_ = message;
    last_warning_at_ = steady_clock::now();
  }

  const run_options& options_;
  const inheritance& inherited_;
  asio::signal_set signals_;
  asio::steady_timer grace_timer_;
  asio::steady_timer child_reaped_;
  asio::cancellation_signal acquire_cancel_;
  std::optional<client> client_;
  lease lease_;  // declared after client_: a lease must not outlive its client's executor work

  phase phase_ = phase::acquiring;
  std::optional<int> interrupted_by_;
  pid_t child_ = -1;
  std::optional<int> child_status_;
  bool lost_ = false;    // COMMAND was running when the lock was lost, and got SIGTERM
  bool killed_ = false;  // ... and SIGKILL after the grace period
  std::string lost_because_;
  steady_clock::time_point acquired_at_{};
  std::string last_warning_;
  std::string previous_warning_;
  steady_clock::time_point last_warning_at_{};
  steady_clock::time_point previous_warning_at_{};
};

}  // namespace

int run_command(const run_options& options, const inheritance& inherited) {
  asio::io_context io;
  std::optional<run_session> session;
  try {
    session.emplace(io, options, inherited);
  } catch (const boost::system::system_error& e) {
    // The client refuses a node list the URL parser accepted (e.g. an ACL user without password).
    say(fmt::format("redlock: {}", one_line(e.what())));
    return e.code() == error::invalid_argument ? exit_code::usage : exit_code::failure;
  }
  int code = exit_code::failure;
  asio::co_spawn(io, session->run(), [&](std::exception_ptr failure, int result) {
    code = result;
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        say(fmt::format("redlock: internal error: {}", one_line(e.what())));
      }
      code = exit_code::failure;
    }
    session->shut_down();
  });
  io.run();
  return code;
}

}  // namespace redlock::cli
