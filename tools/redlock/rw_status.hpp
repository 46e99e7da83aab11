#ifndef REDLOCK_TOOLS_REDLOCK_RW_STATUS_HPP
#define REDLOCK_TOOLS_REDLOCK_RW_STATUS_HPP

// `status --read NAME` / `status --write NAME`: a read-write lock as its nodes show it, read,
// judged and told without I/O. Its keys are those of src/scripts.hpp: the writer's key (the
// writing lease's token), the readers' sorted set (each reading lease's token scored by its
// deadline in milliseconds of the node's clock) and the waiting writer's mark (the mark id of a
// writer that found live readers, which keeps new readers out).

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::resp {
struct value;
}

namespace redlock::cli {

// Reads the three keys of one read-write lock in one step and changes nothing: a reader past its
// deadline is shown for what it is, not removed as the lock's own scripts would. KEYS = writer's
// key, readers' key, mark. Answers {now, writer, readers, mark}: now in milliseconds of the
// node's clock (TIME); writer and mark each {value, PTTL}, or the key's error reply (WRONGTYPE);
// readers as ZRANGE WITHSCORES (token, deadline, ...), or the key's error reply.
extern const std::string_view rw_read_script;

// The keys rw_read_script takes for the read-write lock `name`, in its order.
std::vector<std::string> rw_status_keys(std::string_view name);

// The read-write lock whose writer's key, readers' key or mark `key` is: "catalog" for
// "{catalog}:read"; empty when it is none. `status KEY` of such a key hints at status --read.
std::optional<std::string> rw_lock_of_key(std::string_view key);

// A token (or mark id) and how long it has left on its node: the key's PTTL (-1: no expiry) for
// the writer and the mark, the time to its deadline for a reader.
struct rw_entry {
  std::string token;
  long long ttl_ms = -1;
};

// What one node holds of the lock, or why it could not be asked.
struct rw_node_report {
  std::string address;
  std::optional<std::string> error;  // set when the node could not be asked: why
  bool misconfigured = false;        // as node_report::misconfigured
  std::optional<rw_entry> writer;
  std::vector<rw_entry> readers;         // live ones (deadline in the future), longest left first
  std::size_t expired_readers = 0;       // entries past their deadline: they count for nothing
  std::optional<rw_entry> mark;          // the waiting writer's mark
  std::vector<std::string> notes;        // keys of the lock that hold a value of another type
  std::string link;                      // as node_report::link
  std::optional<long long> subscribers;  // as node_report::subscribers

  // Whether anything of the lock is on the node: a writer, a live reader, a mark, another value.
  bool holds_anything() const noexcept {
    return writer || !readers.empty() || mark || !notes.empty();
  }
};

// The node's answer to rw_read_script (it answered: no transport error). An answer of another
// shape (an error reply for the whole script) sets `error`.
rw_node_report read_rw_node(std::string address, const resp::value& reply);

// "127.0.0.1:6379        reachable    readers 2: 1a2b3c4d 29000 ms, 9f8e7d6c 28000 ms"
// "127.0.0.1:6380        reachable    writer 5a6b7c8d ttl 29512 ms"
// "127.0.0.1:6381        reachable    free"; a node that could not be asked as format_node_report.
std::string format_rw_node(const rw_node_report& report);

// status --read/--write --json, one object per node:
// {"type":"rw_node","resource":NAME,"index":0,"address":...,"state":"held","writer":null,
//  "writer_pttl_ms":null,"readers":[...],"readers_left_ms":[...],"expired_readers":0,
//  "waiting_writer":null,"waiting_writer_pttl_ms":null,"note":null,"error":null,
//  "subscribers":0,"link":null}
// state is "held" (something of the lock is there), "free", "unreachable" or "misconfigured";
// what the node could not say is null.
std::string json_of(const rw_node_report& report, std::size_t index, std::string_view name);

enum class rw_state {
  write_locked,  // one writer's token on a quorum of nodes
  read_locked,   // at least one reader live on a quorum of nodes
  free,          // nothing of the lock on any node that answered, and the others no quorum
  not_locked,    // something on some nodes, but no writer or reader has (or could have) a quorum
  unknown,       // too few nodes answered, or the others could complete a quorum
};

struct rw_verdict {
  std::string name;
  rw_state state = rw_state::unknown;
  std::string writer;                  // with write_locked: the writer's token
  std::vector<std::string> readers;    // the readers live on a quorum
  std::optional<std::string> waiting;  // a waiting writer's mark id on a quorum
  std::size_t nodes = 0;
  std::size_t quorum = 0;
  std::size_t reachable = 0;
  std::size_t unreachable = 0;
  std::size_t misconfigured = 0;
  std::size_t writer_nodes = 0;   // nodes with a writer's key
  std::size_t reader_nodes = 0;   // nodes with at least one live reader
  std::size_t mark_nodes = 0;     // nodes with a waiting writer's mark
  bool enough_reachable = false;  // a quorum answered, so the verdict is certain
  // "catalog: writer on 0 of 5 nodes, readers on 5, waiting writer on 0 (quorum 3): read-locked
  // by 2 readers"
  std::string line;
  std::vector<std::string> counts;  // as status_verdict::counts
};

// A writer holds the lock when its token is on a quorum, a reader when its entry is live on a
// quorum; a waiting writer keeps new readers out when its mark is on a quorum. Nodes that could
// not be asked count as possibly holding anything, as for a lock (judge_status).
rw_verdict judge_rw(std::string_view name, std::span<const rw_node_report> reports);

// "write_locked", "read_locked", "free", "not_locked" or "unknown".
std::string_view state_name(rw_state state) noexcept;

// status --read/--write --json: the verdict as one object:
// {"type":"rw_verdict","resource":NAME,"state":"read_locked","writer":null,"readers":[...],
//  "waiting_writer":null,"nodes":5,"quorum":3,"answered":5,"unreachable":0,"misconfigured":0,
//  "writer_nodes":0,"reader_nodes":5,"waiting_writer_nodes":0,"quorum_answered":true}
std::string json_of(const rw_verdict& verdict);

}  // namespace redlock::cli

#endif
