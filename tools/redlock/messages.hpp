#ifndef REDLOCK_TOOLS_REDLOCK_MESSAGES_HPP
#define REDLOCK_TOOLS_REDLOCK_MESSAGES_HPP

// What the tool tells its user, computed without I/O: why a lock was not had, how COMMAND ended,
// and what `status` concludes from the nodes' answers.

#include "redlock/error.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::cli {

// `message` fit to stand inside one line of ours: without the "redlock: " the library puts in
// front, line breaks (a server's error text may have them) folded into spaces.
std::string one_line(std::string_view message);

enum class acquire_failure {
  contended,
  no_quorum,
  validity_expired,
  wait_timeout,
  misconfigured,  // redlock::condition::node_failure: a wrong password, a missing ACL permission
  invalid,
  other
};

// Why an acquire completed with `ec`. After error::wait_timeout the last round's diagnostics tell
// whether the lock was held elsewhere or too few nodes answered; that is what the user needs to
// hear, not that the waiting ended.
acquire_failure classify_acquire_failure(error_code ec, std::string_view diagnostics);

// The exit code for an acquire that failed with `ec`. The lock held elsewhere, or a wait that
// ran out without a clearer cause, gets `conflict_code` (--conflict-exit-code, as flock -E);
// too few nodes answering or too slow a quorum gets exit_code::not_acquired (75), so that a
// conflict code chosen to mean "another run has it, skip quietly" never hides an outage; failures
// that retrying cannot fix (misconfigured nodes, two names of one server) get exit_code::failure.
int not_acquired_exit_code(error_code ec, std::string_view diagnostics, int conflict_code);

// The one line for a lock not acquired: the cause first (contended / no quorum / wait timeout /
// misconfigured nodes), then the library's account of the last round, which names every node's
// answer. With `permits` (run --permits N) `resource` is a semaphore's name, and contention means
// that every one of its permits is held.
std::string not_acquired_message(std::string_view resource, std::chrono::milliseconds wait,
                                 error_code ec, std::string_view diagnostics,
                                 std::optional<std::size_t> permits = std::nullopt);

// "SIGTERM", or "signal 42" for one without a name.
std::string signal_name(int signal);

// A wait status as a shell reports it: the exit code, or 128 + N for signal N.
int exit_code_of(int wait_status) noexcept;

// "exited with code 3", "was killed by SIGTERM".
std::string describe_wait_status(int wait_status);

// One node's answer to `status`.
struct node_report {
  std::string address;               // host:port
  std::optional<std::string> error;  // set when the node could not be asked: why
  // With `error`: the node answered but cannot serve the lock until its configuration is fixed
  // (redlock::condition::node_failure), as opposed to being down or out of reach.
  bool misconfigured = false;
  bool held = false;       // the key exists
  std::string value;       // its content: the owner's token for a lock key
  long long pttl_ms = -2;  // PTTL: -1 no expiry, -2 no key
  std::string note;        // set when the key is not a plain string (not a lock)
  // How the node was reached when not plain TCP: "tls, verified as NAME", "tls, NOT verified",
  // "unix socket"; shown at the end of the line.
  std::string link;
  // Clients subscribed to release announcements on this node (PUBSUB NUMSUB of the default
  // release channel): lock clients with acquires waiting for some lock. Unset: not asked.
  std::optional<long long> subscribers;
};

// The first 8 characters of a token (or any value), unprintable bytes shown as '?'.
std::string token_prefix(std::string_view value);

// The reason shown for a node whose connect failed with a redlock::condition::node_failure code,
// from the connection's failure text (without the node's address): "permission denied: ACL user
// "bob" may not run EVALSHA, ...", "cannot log in: ...". Permission texts name the user and the
// command but not the kind of failure, so that is put in front; the others say it already.
std::string node_failure_reason(error_code ec, std::string_view text);

// "127.0.0.1:6379        reachable    held  ttl 29512 ms  token 1a2b3c4d"
// "127.0.0.1:6380        misconfigured permission denied: ACL user "bob" may not run EVALSHA, ..."
std::string format_node_report(const node_report& report);

// What `status` concludes about one key; status_verdict::line says it in words.
enum class lock_state {
  locked,      // one owner's value on a quorum of nodes
  free,        // on no node, and the nodes that could not be asked cannot make a quorum
  not_locked,  // on some nodes, but no owner has (or, with the unasked nodes, could have) a quorum
  unknown,     // too few nodes answered, or the unasked ones could complete a quorum
};

struct status_verdict {
  lock_state state = lock_state::unknown;
  std::size_t nodes = 0;
  std::size_t quorum = 0;
  std::size_t reachable = 0;      // answered the question
  std::size_t unreachable = 0;    // down, out of reach, or too slow
  std::size_t misconfigured = 0;  // reached, but refused us for good (node_report::misconfigured)
  std::size_t held = 0;
  std::size_t owner_nodes = 0;    // the most nodes on which one and the same value is held
  bool enough_reachable = false;  // a quorum answered, so the verdict is certain
  std::string line;               // "R: held on 3 of 5 nodes (quorum 3): locked (token 1a2b3c4d)"
  // Printed after `line`: "unreachable nodes: 2", "misconfigured nodes: 1 (...)"; each only when
  // there are such nodes.
  std::vector<std::string> counts;
};

// A lock is held when one value (one owner's token) is on a quorum of nodes. Keys on fewer nodes
// are leftovers of failed rounds or of a lock that is ending; nodes that could not be asked
// (unreachable or misconfigured: another client may use them with the right credentials) are
// counted as possibly holding it, so "free" and "not locked" are only said when no quorum could
// exist.
status_verdict judge_status(std::string_view resource, std::span<const node_report> reports);

// `status --permits N`: the verdicts on the N slot keys of one semaphore, summed up.
struct semaphore_verdict {
  std::size_t permits = 0;
  std::size_t held = 0;           // slots locked, each by one owner on a quorum
  std::size_t unknown = 0;        // slots whose state the nodes that answered cannot settle
  bool enough_reachable = false;  // a quorum answered for every slot
  std::string line;  // "S: 1 of 2 permits held (quorum 3 of 5 nodes)", ", 1 unknown" if any
  std::vector<std::string> counts;  // the unreachable and misconfigured nodes, as for one lock
};

// Every node is asked about every slot at once, so the counts of nodes that could not be asked
// are the same in each slot's verdict; they are told once. Expects at least one verdict.
semaphore_verdict judge_semaphore(std::string_view name, std::span<const status_verdict> slots);

}  // namespace redlock::cli

#endif
