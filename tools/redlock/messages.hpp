#ifndef REDLOCK_TOOLS_REDLOCK_MESSAGES_HPP
#define REDLOCK_TOOLS_REDLOCK_MESSAGES_HPP

// What the tool tells its user, computed without I/O: why a lock was not had, how COMMAND ended,
// and what `status` concludes from the nodes' answers.

#include "json_line.hpp"
#include "redlock/error.hpp"
#include "redlock/inspection.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
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

// The failure as run --json names it in "reason": "contended", "no_quorum", "validity_expired",
// "wait_timeout", "misconfigured", "invalid" or "other".
std::string_view failure_name(acquire_failure failure) noexcept;

// The exit code for an acquire that failed with `ec`. The lock held elsewhere, or a wait that
// ran out without a clearer cause, gets `conflict_code` (--conflict-exit-code, as flock -E);
// too few nodes answering or too slow a quorum gets exit_code::not_acquired (75), so that a
// conflict code chosen to mean "another run has it, skip quietly" never hides an outage; failures
// that retrying cannot fix (misconfigured nodes, two names of one server) get exit_code::failure.
int not_acquired_exit_code(error_code ec, std::string_view diagnostics, int conflict_code);

// The one line for a lock not acquired: the cause first (contended / no quorum / wait timeout /
// misconfigured nodes), then the library's account of the last round, which names every node's
// answer. With `permits` (run --permits N) `resource` is a semaphore's name, and contention means
// that every one of its permits is held. With several `resources` (a run of a set) the line names
// each of them: "a", "b" and "c" not acquired.
std::string not_acquired_message(std::string_view resource, std::chrono::milliseconds wait,
                                 error_code ec, std::string_view diagnostics,
                                 std::optional<std::size_t> permits = std::nullopt,
                                 std::span<const std::string> resources = {});

// A lock not acquired, as `run` and `acquire` tell it: the exit code (not_acquired_exit_code), the
// line (not_acquired_message), and the same facts as a --json object:
// {"event":"not_acquired","resource":...,"reason":"contended","exit_code":75,"message":...}
// with reason as failure_name() says it and message the line without "redlock: ".
struct not_acquired_report {
  int exit_code = 0;
  std::string text;
  json_line json;
};

// With several `resources` (a run of a set), `resource` is what the line calls them, and the
// object has "resources": [...] in place of "resource".
not_acquired_report report_not_acquired(std::string_view resource, std::chrono::milliseconds wait,
                                        error_code ec, std::string_view diagnostics,
                                        int conflict_code,
                                        std::optional<std::size_t> permits = std::nullopt,
                                        std::span<const std::string> resources = {});

// A lock `acquire` took and leaves behind, unrenewed.
struct acquired_lock {
  std::string resource;
  std::string token;
  std::optional<std::uint64_t> fencing_token;
  std::chrono::milliseconds ttl{};
  long long validity_ms = 0;  // what is left of the lock's validity when it is handed over
  std::size_t granted_nodes = 0;
  std::size_t nodes = 0;
  std::size_t quorum = 0;
  bool all_nodes_answered = true;  // false: granted_nodes counts the grants "so far"
};

// `acquire`'s lines on stderr (unless --quiet): that the lock is held, how long and on how many
// nodes, that nobody renews it, and the commands that extend and release it, the token in full
// so that they can be pasted:
//   redlock: acquired job (valid 59390 ms, granted by 5 of 5 nodes, quorum 3); nobody renews
//   it: it expires in 60s unless extended
//   redlock: extend it: redlock extend job --token 1a2b... --ttl 60s
//   redlock: release it: redlock release job --token 1a2b...
std::vector<std::string> acquired_notes(const acquired_lock& lock);

// acquire --json: the one object on stdout, the token being what a script takes from it:
// {"event":"acquired","resource":...,"token":...,"fencing_token":null,"validity_ms":59390,
//  "ttl_ms":60000,"granted_nodes":5,"nodes":5,"quorum":3}
std::string json_of(const acquired_lock& lock);

// `text` as one word for a POSIX shell: as it is when it has nothing the shell would take apart
// or expand, else in single quotes ('it'\''s').
std::string shell_word(std::string_view text);

// A duration as the tool's options take it: "60s" for whole seconds, else "1500ms".
std::string duration_text(std::chrono::milliseconds duration);

// What `extend` and `release` do with a lock known by its token.
enum class by_token { extend, release };

// Their outcome as a script needs it: the exit code (0; exit_code::not_held when a quorum says
// the key is gone or someone else's; not_acquired (75) when too few nodes answered; usage when
// the library refused the arguments; failure for the rest), the event of the --json object
// ("extended" or "released", "not_held", "failed"), the one line, and the object itself:
// {"event":"extended","resource":...,"exit_code":0,"message":...}.
struct by_token_report {
  int exit_code = 0;
  std::string_view event;
  std::string text;
  json_line json;
};

// `diagnostics` is the library's account of the nodes' answers (it logs one when the operation
// fails); `not_held_because`, with error::not_held, says what the nodes hold instead
// (why_not_held).
by_token_report report_by_token(by_token action, std::string_view resource, std::string_view token,
                                std::chrono::milliseconds ttl, error_code ec,
                                std::string_view diagnostics, std::string_view not_held_because);

// After a quorum refused an extend or a release by `token`, a look at the nodes
// (client::async_inspect, completed with `ec`) tells the user which of the two it was: "it is
// gone from every node that answered (expired or released)", "it is held by another owner now
// (token 9f8e7d6c)", or, when the look cannot settle it, "a quorum of nodes says it is gone or
// someone else's".
std::string why_not_held(error_code ec, const inspection& seen, std::string_view token);

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

// status --json: the facts of format_node_report as one JSON object, for node number `index`
// (from 0, in the order of the node list) asked about the key `resource`:
// {"type":"node","resource":...,"index":0,"address":"127.0.0.1:6379","state":"held",
//  "token":...,"pttl_ms":29512,"note":null,"error":null,"subscribers":0,"link":null}
// state is "free", "held", "unreachable" or "misconfigured"; token is the key's whole value
// (the text shows its first 8 characters), null unless held as a lock key; pttl_ms likewise (-1:
// no expiry); note says why a held key is not a lock key; error why the node could not be asked.
std::string json_of(const node_report& report, std::size_t index, std::string_view resource);

// What `status` concludes about one key; status_verdict::line says it in words.
enum class lock_state {
  locked,      // one owner's value on a quorum of nodes
  free,        // on no node, and the nodes that could not be asked cannot make a quorum
  not_locked,  // on some nodes, but no owner has (or, with the unasked nodes, could have) a quorum
  unknown,     // too few nodes answered, or the unasked ones could complete a quorum
  not_a_lock,  // a value of another type on a quorum (a read-write lock's readers, say): no lock
               // can be taken under this name
};

// How many nodes `status` asked and how they answered, for any kind of lock.
struct node_counts {
  std::size_t nodes = 0;
  std::size_t quorum = 0;
  std::size_t reachable = 0;      // answered the question
  std::size_t unreachable = 0;    // down, out of reach, or too slow
  std::size_t misconfigured = 0;  // reached, but refused us for good (node_report::misconfigured)
};

// Why the verdict is unknown, when it is: too few nodes answered ("unknown: only 2 of 5 nodes
// reachable"), or the nodes that could not be asked, with the `top` nodes of the holder that has
// the most, could make a quorum. Empty when the nodes that answered settle it. Asked once no
// holder has a quorum.
std::optional<std::string> unknown_state(const node_counts& counts, std::size_t top);

// The lines after a verdict that count the nodes that could not be asked: "unreachable nodes: 2",
// "misconfigured nodes: 1 (...)"; each only when there are such nodes.
std::vector<std::string> unasked_lines(const node_counts& counts);

struct status_verdict {
  std::string resource;
  lock_state state = lock_state::unknown;
  std::string owner;  // with lock_state::locked: the value (token) held on a quorum
  std::size_t nodes = 0;
  std::size_t quorum = 0;
  std::size_t reachable = 0;      // answered the question
  std::size_t unreachable = 0;    // down, out of reach, or too slow
  std::size_t misconfigured = 0;  // reached, but refused us for good (node_report::misconfigured)
  std::size_t held = 0;
  std::size_t owner_nodes = 0;    // the most nodes on which one and the same value is held
  bool enough_reachable = false;  // a quorum answered, so the verdict is certain
  std::string line;               // "R: held on 3 of 5 nodes (quorum 3): locked (token 1a2b3c4d)"
  // When RESOURCE is a key of a read-write lock (rw_lock_of_key), printed after `line` as "hint:
  // " + this: ""{catalog}:read" is a key of the read-write lock "catalog": redlock status --read
  // catalog shows its writer, readers and waiting writer". Empty otherwise.
  std::string hint;
  // Printed after `line`: unasked_lines.
  std::vector<std::string> counts;
};

// A lock is held when one value (one owner's token) is on a quorum of nodes. Keys on fewer nodes
// are leftovers of failed rounds or of a lock that is ending; nodes that could not be asked
// (unreachable or misconfigured: another client may use them with the right credentials) are
// counted as possibly holding it, so "free" and "not locked" are only said when no quorum could
// exist.
status_verdict judge_status(std::string_view resource, std::span<const node_report> reports);

// "locked", "free", "not_locked", "unknown" or "not_a_lock".
std::string_view state_name(lock_state state) noexcept;

// status --json: the verdict as one JSON object (the counts lines are its fields):
// {"type":"verdict","resource":...,"state":"locked","token":...,"nodes":5,"quorum":3,
//  "answered":5,"unreachable":0,"misconfigured":0,"held":5,"owner_nodes":5,
//  "quorum_answered":true,"hint":null}
// token is the owner's whole value when locked, else null; held counts the nodes the key is on,
// owner_nodes those of the owner with the most; hint is the hint line's text, or null.
std::string json_of(const status_verdict& verdict);

// `status --permits N`: the verdicts on the N slot keys of one semaphore, summed up.
struct semaphore_verdict {
  std::string name;
  std::size_t permits = 0;
  std::size_t held = 0;           // slots locked, each by one owner on a quorum
  std::size_t unknown = 0;        // slots whose state the nodes that answered cannot settle
  bool enough_reachable = false;  // a quorum answered for every slot
  std::string line;  // "S: 1 of 2 permits held (quorum 3 of 5 nodes)", ", 1 unknown" if any
  std::vector<std::string> counts;  // the unreachable and misconfigured nodes, as for one lock
  std::vector<lock_state> slots;    // each slot's state, by its number
  std::size_t nodes = 0;
  std::size_t quorum = 0;
  std::size_t unreachable = 0;
  std::size_t misconfigured = 0;
};

// Every node is asked about every slot at once, so the counts of nodes that could not be asked
// are the same in each slot's verdict; they are told once. Expects at least one verdict.
semaphore_verdict judge_semaphore(std::string_view name, std::span<const status_verdict> slots);

// status --permits N --json: the summary as one JSON object:
// {"type":"semaphore","resource":NAME,"permits":2,"held":1,"unknown":0,
//  "slots":["locked","free"],"nodes":5,"quorum":3,"unreachable":0,"misconfigured":0,
//  "quorum_answered":true}
std::string json_of(const semaphore_verdict& verdict);

}  // namespace redlock::cli

#endif
