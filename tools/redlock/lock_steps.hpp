#ifndef REDLOCK_TOOLS_REDLOCK_LOCK_STEPS_HPP
#define REDLOCK_TOOLS_REDLOCK_LOCK_STEPS_HPP

// Steps that the commands talking to the nodes share: opening the connections before a request
// that must not fail for a slow connect, waiting for the grants that arrive after the quorum, and
// running a command's session, or its work, to its end on an io_context that a client keeps busy.

#include "child_process.hpp"
#include "exit_codes.hpp"
#include "messages.hpp"
#include "redlock/client.hpp"
#include "redlock/error.hpp"
#include "redlock/lease.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>
#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace redlock::cli {

// Reads `key` (client::async_inspect: the lock's key, so that a cluster node opens the
// connection to the master that serves it) until a quorum of nodes answers, for at most `limit`
// (the client's connect_timeout): afterwards the connections that can open are open. A request
// gives each node node_timeout, its connect included, so it is this loop that lets a slow first
// connect (a distant or busy node, a TLS handshake) finish: the reads that fail meanwhile do not
// stop the connects. It ends at once when no node is still connecting (connect_wait.hpp): nodes
// that are down or refuse us fail the request that follows as they would after any wait. Each
// read is bound to `cancel`; `stop` is asked after each one, and true ends the wait (a signal
// arrived).
boost::asio::awaitable<void> open_connections(client& locks, std::string key,
                                              std::chrono::milliseconds limit,
                                              boost::asio::cancellation_slot cancel,
                                              std::function<bool()> stop);

// For a command about a lock another process took (extend or release by token, release --force):
// every node's connection open, or known not to open, before the request goes out. Such a
// command shuts its client down as soon as a quorum has answered, and a client that shuts down
// closes a connection still connecting at once, with what is queued on it: nothing this client
// sent can be on that node, but the other process's key can. So this reads `resource`
// (async_inspect) until no node is still connecting (every one has answered it or failed
// otherwise than by being slow), for at most `limit`.
boost::asio::awaitable<void> open_every_connection(client& locks, std::string resource,
                                                   std::chrono::milliseconds limit);

// Whether every node has answered the acquire that returned `held`: the lease's diagnostics stay
// empty after a successful acquire until every node has answered with fewer than all granting,
// and all granting ends the count.
bool all_nodes_answered(const client& locks, const lease& held);

// An acquire completes at the quorum-th grant; the other nodes' answers usually follow within a
// millisecond or two, and how many granted is what the user needs to know: a lock on 3 of 5 nodes
// survives no further node failure, one on 5 of 5 two. So this waits for them, up to `limit`, or
// until `stop` says true. A node that is down or refuses us answers at once (failed); only a
// stalled or far too slow one makes it last.
boost::asio::awaitable<void> await_late_answers(const client& locks, const lease& held,
                                                std::chrono::milliseconds limit,
                                                std::function<bool()> stop);

// Runs one command's session to its exit code on an io_context of its own: `Session(io, options,
// inherited)` whose run() gives the code and whose shut_down() ends what it keeps running.
// `report(message, code)` tells a failure the way the command tells everything: a node list the
// client refuses (exit_code::usage when it is invalid, e.g. an ACL user without password), or an
// exception from the session (exit_code::failure).
template <class Session, class Options, class Report>
int run_to_exit_code(const Options& options, const inheritance& inherited, Report report) {
  boost::asio::io_context io;
  std::optional<Session> session;
  try {
    session.emplace(io, options, inherited);
  } catch (const boost::system::system_error& e) {
    const int code = e.code() == error::invalid_argument ? exit_code::usage : exit_code::failure;
    report(one_line(e.what()), code);
    return code;
  }
  int code = exit_code::failure;
  boost::asio::co_spawn(io, session->run(), [&](std::exception_ptr failure, int result) {
    code = result;
    if (failure) {
      code = exit_code::failure;
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        report(fmt::format("internal error: {}", one_line(e.what())), code);
      }
    }
    session->shut_down();
  });
  io.run();
  return code;
}

// Runs `work` on `io` to its end and returns its result, or rethrows what it threw. A client's
// connections keep `io` busy for as long as the client lives, so io.run() would not return here;
// between two such runs nothing of `io` runs (say, while a question waits for its answer).
template <class T>
T run_to_completion(boost::asio::io_context& io, boost::asio::awaitable<T> work) {
  std::optional<T> result;
  std::exception_ptr failure;
  boost::asio::co_spawn(io, std::move(work), [&](std::exception_ptr thrown, T value) {
    failure = thrown;
    result.emplace(std::move(value));
  });
  while (!result && io.run_one() > 0) {
  }
  if (failure) std::rethrow_exception(failure);
  if (!result) throw std::logic_error("the io_context ran out of work before the command ended");
  return std::move(*result);
}

}  // namespace redlock::cli

#endif
