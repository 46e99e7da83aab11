#ifndef REDLOCK_ALGO_REPLIES_HPP
#define REDLOCK_ALGO_REPLIES_HPP

#include "algo/node_answer.hpp"
#include "redlock/error.hpp"
#include "resp/value.hpp"

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace redlock::detail {

// How a round asked for the key, which decides how its answers read. Each form accepts exactly
// the grants its request can answer: a reply of another shape is a failure, never a grant (a
// connection whose replies were matched to the wrong requests, as behind a broken proxy, must not
// turn another request's answer into a vote).
enum class set_form : std::uint8_t {
  plain,       // SET NX PX: OK, or nil
  asking_ttl,  // acquire_script: OK, or the holder's PTTL (or nil)
  // With fencing, a grant's counters are decimal text (exact to 2^63 - 1; scripts.hpp).
  fenced,       // fenced_acquire_script: {counter}, or the holder's PTTL (or nil)
  slot,         // semaphore_acquire_script: OK, or every slot's PTTL
  fenced_slot,  // the same with fencing: {counter}, or every slot's PTTL
  // A read-write lock's (rw_read_acquire_script, rw_write_acquire_script in scripts.hpp):
  read,          // a reader's: OK, or the writer's or waiting writer's PTTL (or nil)
  fenced_read,   // the same with fencing: {the counter as it is, 0 or more}, or the PTTL
  write,         // a writer's: OK, the PTTL (or nil), or {"readers", ms} with its mark set
  fenced_write,  // the same with fencing: {the counter after its increment}, or a refusal
  // A set of locks' (multi_acquire_script): with fencing, {every resource's counter after its
  // increment}, or the longest PTTL (or nil). Without fencing a set's round is asking_ttl.
  fenced_set,
};

inline bool is_slot_form(set_form form) noexcept {
  return form == set_form::slot || form == set_form::fenced_slot;
}

// One node's answer to an acquire round's request, read once into what the round and the wait
// after it need.
struct set_answer {
  node_answer::kind what = node_answer::kind::failed;
  std::string detail;  // failed: why
  // Refused by a form that asks (asking_ttl, fenced), with the holder's PTTL in milliseconds:
  // -1 for a key without TTL, -2 for one gone since; absent when the reply was nil.
  std::optional<long long> holder_pttl;
  // Refused by a slot form: every slot's PTTL, slot 0 first.
  std::vector<long long> slot_ttls;
  // Granted by a fenced form: the node's fencing counter after its increment (>= 1); by
  // fenced_read, the counter as the reader found it (0 when no writer has had a token).
  std::optional<std::uint64_t> counter;
  // Granted by fenced_set: each resource's counter after its increment (each >= 1), in the set's
  // order.
  std::vector<std::uint64_t> counters;
  // Refused by a write form because readers still hold the lock there: the node now carries this
  // writer's mark, which keeps new readers out (holder_pttl: until the last reader's deadline).
  bool marked = false;
  // Failed by a slot form because the node records another number of permits for the semaphore:
  // that number.
  std::optional<std::size_t> recorded_permits;
};

// Reads the reply (or the request's error `ec`) of a request of form `form`.
set_answer read_set_reply(const boost::system::error_code& ec, const resp::value& reply,
                          set_form form);

// A token-checked script's answer (release, extend, fence write-back): 1 yes (done), 0 no (the key
// is not ours), anything else a failure explained in `detail`.
node_answer::kind classify_script_reply(const boost::system::error_code& ec,
                                        const resp::value& reply, std::string& detail);

// The text of a failure for a reply of a shape the request cannot have: a NOPERM error in the
// server's words (the caller names the ACL user and keys), anything else shown as it came.
std::string unexpected_reply(const resp::value& reply);

// fill_answer's whole work, for any reply; fill_answer calls it for one with something more to
// record than a grant or refusal: a failure, or a detail to keep or clear.
void fill_answer_in_full(node_answer& answer, node_answer::kind what,
                         const boost::system::error_code& ec, const resp::value& reply,
                         std::string&& detail);

// A node's reply as an answer, written into `answer` (a vote's answers are reused from ballot to
// ballot, so nothing is built and moved per reply): `what` as classified from the reply, whether
// the request certainly never reached the node, and for a failure the code that explains it.
[[gnu::always_inline]] inline void fill_answer(node_answer& answer, node_answer::kind what,
                                               const boost::system::error_code& ec,
                                               const resp::value& reply, std::string&& detail) {
  // Nearly every reply is a grant or a refusal, with nothing to explain: a few stores.
  if (!ec && what != node_answer::kind::failed && detail.empty() && answer.detail.empty()) {
    answer.what = what;
    answer.unsent = false;
    answer.failure = {};
    return;
  }
  fill_answer_in_full(answer, what, ec, reply, std::move(detail));
}

// The same as a new node_answer.
inline node_answer make_answer(node_answer::kind what, boost::system::error_code ec,
                               const resp::value& reply, std::string detail) {
  node_answer answer;
  fill_answer(answer, what, ec, reply, std::move(detail));
  return answer;
}

}  // namespace redlock::detail

#endif
