#include "run_command.hpp"

#include "exit_codes.hpp"
#include "json_line.hpp"
#include "lock/key_names.hpp"
#include "lock/scripts.hpp"
#include "lock_steps.hpp"
#include "messages.hpp"
#include "redlock/redlock.hpp"
#include "redlock/rw_lock.hpp"
#include "redlock/semaphore.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <signal.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <tuple>
#include <vector>

namespace redlock::cli {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using std::chrono::steady_clock;

static_assert(max_permits == semaphore::max_permits,
              "--permits must accept exactly the semaphore's range");
static_assert(max_run_resources == detail::max_set_size,
              "run must accept exactly as many RESOURCEs as a set of locks may have");

long long ms_between(steady_clock::time_point from, steady_clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

// run --json: one object per line on stderr, saying what happened ("event") to which RESOURCE,
// or to which "resources" when several were given.
json_line json_event(const run_options& options, std::string_view event) {
  json_line line;
  line.string("event", event);
  if (options.resources.size() > 1) {
    line.strings("resources", options.resources);
  } else {
    line.string("resource", options.resource);
  }
  return line;
}

// Every line on stderr is made in both forms, so that each says the same facts; --json picks the
// object.
void tell(const run_options& options, std::string_view text, const json_line& json) {
  if (options.json) {
    fmt::print(stderr, "{}\n", json.str());
  } else {
    fmt::print(stderr, "{}\n", text);
  }
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
    settings.logger = [this, &io](log_level level, std::string_view message) {
      if (level < log_level::warning) return;
      remember_warning(message);
      // A warning about our lease (acquired on fewer than all nodes, a renewal that failed) is
      // also its diagnostics(); the connections' own (a node that is down, reconnecting every
      // few seconds) are not, and stay out of COMMAND's stderr. Posted: the library logs a loss
      // before the lease stops being held, and finish() reports a loss in its own words.
      if (!options_.quiet && message == lease_.diagnostics()) {
        asio::post(io, [this, text = std::string(message)] { report_lease_warning(text); });
      }
    };
    node_timeout_ = settings.node_timeout;
    connect_timeout_ = settings.connect_timeout;
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
    const int code = co_await acquire_run_and_release();
    // Every path above has released the lease and reported how; this ends anything still under
    // way and closes the connections once the releases are out, so that the process exits
    // without leaving a request unsent. Its outcome adds nothing to what was said.
    co_await client_->async_shutdown(asio::as_tuple(asio::use_awaitable));
    co_return code;
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

  asio::awaitable<int> acquire_run_and_release() {
    if (const auto failed = co_await acquire()) co_return *failed;
    if (const auto failed = co_await start_command()) co_return *failed;
    while (!child_status_) {
      co_await child_reaped_.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    phase_ = phase::finishing;
    grace_timer_.cancel();
    co_return co_await finish();
  }

  // Empty when the lock is held, else the exit code.
  asio::awaitable<std::optional<int>> acquire() {
    lock_options lock;
    lock.ttl = options_.ttl;
    lock.fencing = options_.fencing;
    auto token = [this] {
      return asio::bind_cancellation_slot(acquire_cancel_.slot(),
                                          asio::as_tuple(asio::use_awaitable));
    };
    error_code ec;
    lease acquired;
    const bool one_round = options_.wait == std::chrono::milliseconds::zero();
    if (one_round) {
      // --wait 0, as flock -n: exactly one round; held elsewhere or too few nodes is final. The
      // connections open first: a round's node_timeout counts the connect and handshake, which on
      // a distant or busy node can take longer, and "not acquired" must mean the lock, not that.
      co_await open_connections(*client_, options_.resources.front(), connect_timeout_,
                                acquire_cancel_.slot(),
                                [this] { return interrupted_by_.has_value(); });
      if (interrupted_by_) co_return co_await give_up_interrupted();
    } else {
      lock.wait = options_.wait;
    }
    // Each co_await is a statement of its own: with g++ 12, the tuple a co_await in an arm of a
    // conditional expression yielded here was garbage (a lease with a corrupt token).
    if (options_.side) {
      // As the semaphore below: copied when the acquire starts.
      rw_lock shared(*client_, options_.resource, lock);
      const bool write = *options_.side == rw_side::write;
      if (one_round && write) {
        std::tie(ec, acquired) = co_await shared.async_try_acquire_write(token());
      } else if (one_round) {
        std::tie(ec, acquired) = co_await shared.async_try_acquire_read(token());
      } else if (write) {
        std::tie(ec, acquired) = co_await shared.async_acquire_write(token());
      } else {
        std::tie(ec, acquired) = co_await shared.async_acquire_read(token());
      }
    } else if (options_.permits) {
      // The semaphore copies what it needs when an acquire starts; this one may go at any time.
      semaphore permits(*client_, options_.resource, *options_.permits, lock);
      if (one_round) {
        std::tie(ec, acquired) = co_await permits.async_try_acquire(token());
      } else {
        std::tie(ec, acquired) = co_await permits.async_acquire(token());
      }
    } else if (several_resources() && one_round) {
      std::tie(ec, acquired) =
          co_await client_->async_try_acquire_all(options_.resources, lock, token());
    } else if (several_resources()) {
      std::tie(ec, acquired) =
          co_await client_->async_acquire_all(options_.resources, lock, token());
    } else if (one_round) {
      std::tie(ec, acquired) =
          co_await client_->async_try_acquire(options_.resource, lock, token());
    } else {
      std::tie(ec, acquired) = co_await client_->async_acquire(options_.resource, lock, token());
    }
    phase_ = phase::starting;
    lease_ = std::move(acquired);
    if (interrupted_by_) co_return co_await give_up_interrupted();
    if (ec) {
      // Misconfigured nodes and two names of one server fail at once and would fail every retry:
      // the generic failure code, not the conflict code a script may take for "another run has
      // it". The library's diagnostics name each node and what it answered.
      const auto refused =
          report_not_acquired(options_.resource, options_.wait, ec, lease_.diagnostics(),
                              options_.conflict_exit_code, options_.permits, options_.resources);
      tell(options_, refused.text, refused.json);
      co_return refused.exit_code;
    }
    if (options_.permits) {
      permit_ = slot_of(lease_.resource());
      held_ = fmt::format("{} permit {}", options_.resource, permit_);
    } else if (options_.side) {
      held_ = fmt::format("{} for {}", options_.resource,
                          *options_.side == rw_side::read ? "reading" : "writing");
    }
    acquired_at_ = steady_clock::now();
    if (!options_.quiet) co_await announce_acquired();
    co_return std::nullopt;
  }

  // The line waits for the nodes that had not answered when the quorum granted, up to
  // min(node_timeout, 50 ms) (see await_late_answers): then COMMAND starts at most 50 ms later,
  // and the line says "so far". --quiet skips the line and the wait.
  asio::awaitable<void> announce_acquired() {
    co_await await_late_answers(*client_, lease_,
                                std::min<std::chrono::milliseconds>(node_timeout_, 50ms),
                                [this] { return interrupted_by_.has_value(); });
    const auto valid_ms = ms_between(steady_clock::now(), lease_.valid_until());
    const auto fence = lease_.fencing_token();
    const auto fences = fencing_tokens();
    // A permit is named by its slot, out of the whole range, with the key that holds it, for
    // `status --permits` and for looking at the nodes by hand.
    std::string what = fmt::format("{} (", options_.resource);
    if (options_.permits) {
      what = fmt::format("{} permit {} of 0..{} (key {}, ", options_.resource, permit_,
                         *options_.permits - 1, lease_.resource());
    } else if (options_.side) {
      what = fmt::format("{} (key {}, ", held_, lease_.resource());
    }
    std::string fencing;
    if (fence) fencing = fmt::format(", fencing token {}", *fence);
    for (std::size_t i = 0; i < fences.size(); ++i) {
      fencing += fmt::format("{} {} {}", i == 0 ? ", fencing tokens" : ",", options_.resources[i],
                             fences[i]);
    }
    auto json = json_event(options_, "acquired");
    json.optional_integer("permit", permit());
    if (several_resources()) {
      // The keys on the nodes are the resources themselves; one token each with --fencing.
      json.null("key").string("token", lease_.token()).null("fencing_token");
      if (options_.fencing) {
        json.integers("fencing_tokens", fences);
      } else {
        json.null("fencing_tokens");
      }
    } else {
      json.string("key", lease_.resource())
          .string("token", lease_.token())
          .optional_integer("fencing_token", fence);
    }
    json.integer("validity_ms", valid_ms)
        .integer("granted_nodes", lease_.granted_nodes())
        .integer("nodes", client_->size())
        .integer("quorum", client_->quorum())
        .boolean("all_nodes_answered", all_nodes_answered());
    tell(options_,
         fmt::format("redlock: acquired {}valid {} ms, granted by {} of {} nodes{}, quorum {}{})",
                     what, valid_ms, lease_.granted_nodes(), client_->size(),
                     all_nodes_answered() ? "" : " so far", client_->quorum(), fencing),
         json);
    announced_ = true;
    // Once every node has answered and fewer than all granted, the library says which nodes
    // failed and how (the same text is logged as a warning, which was held back until now).
    if (!lease_.diagnostics().empty()) report_lease_warning(lease_.diagnostics());
  }

  bool all_nodes_answered() const { return cli::all_nodes_answered(*client_, lease_); }

  bool several_resources() const { return options_.resources.size() > 1; }

  // A set's fencing tokens, one per RESOURCE in the order given; empty without --fencing or for
  // one RESOURCE.
  std::vector<std::uint64_t> fencing_tokens() const {
    std::vector<std::uint64_t> tokens;
    if (!options_.fencing || !several_resources()) return tokens;
    for (const auto& resource : options_.resources)
      tokens.push_back(lease_.fencing_token(resource).value_or(0));
    return tokens;
  }

  // A warning about the held lease, once: the same text logged again (a renewal failing the same
  // way on each retry) is not repeated. Nothing once COMMAND has ended or the lease is lost.
  void report_lease_warning(const std::string& text) {
    if (!announced_ || lost_ || !lease_.held() || text == reported_warning_) return;
    if (phase_ != phase::starting && phase_ != phase::running) return;
    reported_warning_ = text;
    warn(one_line(text));
  }

  // A signal cancelled the acquire, or arrived just after it succeeded: leave nothing behind.
  asio::awaitable<int> give_up_interrupted() {
    if (lease_.held()) co_await lease_.async_release(asio::as_tuple(asio::use_awaitable));
    const int code = exit_code::signal_base + *interrupted_by_;
    if (!options_.quiet) {
      tell(options_,
           fmt::format("redlock: {} while waiting for {}; nothing was run",
                       signal_name(*interrupted_by_), options_.resource),
           json_event(options_, "interrupted")
               .string("signal", signal_name(*interrupted_by_))
               .integer("exit_code", code));
    }
    co_return code;
  }

  // Empty when COMMAND runs, else the exit code.
  asio::awaitable<std::optional<int>> start_command() {
    if (interrupted_by_) co_return co_await give_up_interrupted();
    // Added only now, so that a stray SIGCHLD (a child of whoever exec'd us) cannot matter
    // earlier; added before the fork, so that COMMAND's cannot be missed.
    signals_.add(SIGCHLD);
    std::vector<std::string> environment = {"REDLOCK_TOKEN=" + lease_.token()};
    // Without --fencing, one inherited from an enclosing run is removed: it is not this lock's.
    // A set has one token per RESOURCE, in REDLOCK_FENCING_TOKENS and not in the singular.
    const auto fence = lease_.fencing_token();
    environment.push_back(fence ? fmt::format("REDLOCK_FENCING_TOKEN={}", *fence)
                                : std::string("REDLOCK_FENCING_TOKEN"));
    const auto fences = fencing_tokens();
    environment.push_back(fences.empty()
                              ? std::string("REDLOCK_FENCING_TOKENS")
                              : fmt::format("REDLOCK_FENCING_TOKENS={}", fmt::join(fences, " ")));
    // Likewise REDLOCK_PERMIT: set only under a permit of ours.
    environment.push_back(options_.permits ? fmt::format("REDLOCK_PERMIT={}", permit_)
                                           : std::string("REDLOCK_PERMIT"));
    const auto spawned =
        spawn_command(options_.command, inherited_, environment,
                      options_.grace == std::chrono::milliseconds::zero() ? SIGKILL : SIGTERM);
    if (spawned.pid > 0) {
      child_ = spawned.pid;
      phase_ = phase::running;
      lease_.async_wait_lost([this](error_code ec) { on_lost(ec); });
      co_return std::nullopt;
    }
    co_await lease_.async_release(asio::as_tuple(asio::use_awaitable));
    if (!spawned.exec_failed) {
      co_return cannot_run(
          fmt::format("redlock: cannot start COMMAND: {}", std::strerror(spawned.error)),
          exit_code::failure);
    }
    const bool missing = spawned.error == ENOENT;
    co_return cannot_run(
        fmt::format("redlock: cannot run \"{}\": {}{}", options_.command.front(),
                    std::strerror(spawned.error), missing ? " (command not found)" : ""),
        missing ? exit_code::not_found : exit_code::cannot_execute);
  }

  asio::awaitable<int> finish() {
    const int status = *child_status_;
    const std::string ended = describe_wait_status(status);
    if (lost_) {
      std::string stopped = "SIGTERM";
      if (options_.grace == std::chrono::milliseconds::zero()) {
        stopped = "SIGKILL at once (--grace 0)";
      } else if (killed_) {
        stopped =
            fmt::format("SIGTERM, then SIGKILL after the {} ms grace,", options_.grace.count());
      }
      co_return report_lost(
          fmt::format("redlock: lost the lock on {} while COMMAND ran: {}; COMMAND got {} and {}",
                      held_, lost_because_, stopped, ended));
    }
    auto [ec] = co_await lease_.async_release(asio::as_tuple(asio::use_awaitable));
    if (ec == error::not_held) {
      // Lost while COMMAND was ending, or unnoticed: it may have run without the lock.
      const std::string why =
          lost_because_.empty() ? one_line(lease_.diagnostics()) : lost_because_;
      co_return report_lost(fmt::format(
          "redlock: lost the lock on {} before COMMAND ended (COMMAND {}): {}", held_, ended, why));
    }
    const int code = exit_code_of(status);
    if (ec) {
      warn(fmt::format("releasing {} failed: {}; what is left expires within {} ms", held_,
                       lease_.diagnostics().empty() ? ec.message() : one_line(lease_.diagnostics()),
                       options_.ttl.count()));
    } else if (!options_.quiet) {
      const auto held_ms = ms_between(acquired_at_, steady_clock::now());
      tell(options_, fmt::format("redlock: released {} after {} ms", held_, held_ms),
           json_event(options_, "released")
               .optional_integer("permit", permit())
               .integer("held_ms", held_ms)
               .integer("exit_code", code));
    }
    co_return code;
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
    if (options_.grace == std::chrono::milliseconds::zero()) {
      // --grace 0: COMMAND gets no chance to clean up, and not a moment more without the lock.
      killed_ = true;
      ::kill(child_, SIGKILL);
      return;
    }
    ::kill(child_, SIGTERM);
    grace_timer_.expires_after(options_.grace);
    grace_timer_.async_wait([this](error_code timer) {
      if (timer || child_status_) return;
      killed_ = true;
      ::kill(child_, SIGKILL);
    });
  }

  // With --permits, the slot held; "permit" in the JSON objects, null without.
  std::optional<std::size_t> permit() const {
    return options_.permits ? std::optional(permit_) : std::nullopt;
  }

  void warn(std::string_view message) const {
    tell(options_, fmt::format("redlock: warning: {}", message),
         json_event(options_, "warning").string("message", message));
  }

  int cannot_run(std::string_view text, int code) const {
    tell(options_, text,
         json_event(options_, "cannot_run")
             .integer("exit_code", code)
             .string("message", one_line(text)));
    return code;
  }

  int report_lost(std::string_view text) const {
    tell(options_, text,
         json_event(options_, "lost")
             .optional_integer("permit", permit())
             .integer("exit_code", exit_code::lock_lost)
             .string("message", one_line(text)));
    return exit_code::lock_lost;
  }

  // The slot of options_.resource whose key is `key` (a permit lease's resource()).
  std::size_t slot_of(const std::string& key) const {
    const auto slot = detail::slot_of_key(key, detail::permit_queue_key(options_.resource));
    if (slot && *slot < *options_.permits) return *slot;
    throw std::logic_error(
        fmt::format("the permit's key {} is none of the slots of {}", key, options_.resource));
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
  // What the lines after "acquired" call what is held: RESOURCE, or "NAME permit 3" for a permit.
  std::string held_ = options_.resource;
  std::size_t permit_ = 0;  // with --permits: the slot held
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
  bool lost_ = false;       // COMMAND was running when the lock was lost, and was signalled
  bool killed_ = false;     // ... with SIGKILL: after the grace period, or at once with --grace 0
  bool announced_ = false;  // the "acquired" line is out: lease warnings may follow it
  std::string reported_warning_;
  std::chrono::milliseconds node_timeout_{};
  std::chrono::milliseconds connect_timeout_{};
  std::string lost_because_;
  steady_clock::time_point acquired_at_{};
  std::string last_warning_;
  std::string previous_warning_;
  steady_clock::time_point last_warning_at_{};
  steady_clock::time_point previous_warning_at_{};
};

int report_error(const run_options& options, std::string_view message, int code) {
  tell(options, fmt::format("redlock: {}", message),
       json_event(options, "error").integer("exit_code", code).string("message", message));
  return code;
}

}  // namespace

int run_command(const run_options& options, const inheritance& inherited) {
  return run_to_exit_code<run_session>(options, inherited, [&](std::string_view message, int code) {
    report_error(options, message, code);
  });
}

}  // namespace redlock::cli
