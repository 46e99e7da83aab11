#ifndef REDLOCK_TEST_SUPPORT_HISTORY_HPP
#define REDLOCK_TEST_SUPPORT_HISTORY_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::test {

// Nanoseconds on CLOCK_MONOTONIC, which is what std::chrono::steady_clock reads on Linux: times
// taken by different processes on one machine are comparable, and so are the library's own
// validity deadlines (lease::valid_until()).
using mono_ns = std::int64_t;
mono_ns to_mono_ns(std::chrono::steady_clock::time_point t) noexcept;
mono_ns mono_now() noexcept;

enum class op_kind : std::uint8_t { acquire, extend, release, lost };
enum class op_result : std::uint8_t {
  ok,       // the operation succeeded (for `lost`: the loss was signalled)
  failed,   // it certainly did not take effect for the caller
  unknown,  // it may have taken effect (timed out, cancelled mid-round, process died)
};

std::string_view to_string(op_kind kind) noexcept;
std::string_view to_string(op_result result) noexcept;

// One lock operation as a client saw it. `token` ties the operations of one lease together (each
// acquire has its own token); an acquire that did not succeed may have none.
struct event {
  std::string process;  // who: "p3/c7" for contender 7 of process 3
  std::string resource;
  std::string token;
  op_kind kind = op_kind::acquire;
  op_result result = op_result::ok;
  mono_ns invoke = 0;       // when the call was made
  mono_ns complete = 0;     // when its completion ran (equal to invoke for `lost`)
  mono_ns valid_until = 0;  // acquire ok, extend (any result): the lease's validity afterwards
  mono_ns ttl = 0;          // acquire: the requested TTL, for unknown outcomes
  // A reader's lease of a read-write lock, which may overlap other readers' (never a writer's);
  // false for every other lease. Set on each event of the lease.
  bool shared = false;

  // One line of text, and back; used to merge the histories of several processes. A shared
  // lease's lines have an eleventh field, "shared".
  std::string to_line() const;
  static event from_line(std::string_view line);  // throws std::invalid_argument naming the field
};

// Events from any number of threads of one process, appended under a lock.
class history {
 public:
  void record(event e);
  std::vector<event> events() const;

  // Writes one line per event; read_lines() accepts the concatenation of several such files.
  void write(std::ostream& out) const;
  static std::vector<event> read_lines(std::istream& in);

 private:
  mutable std::mutex mutex_;
  std::vector<event> events_;
};

// When a client believed it held a resource: from the acquire's completion until the first of
// its release call, the loss being signalled, or the end of its validity as the client reported
// it after each extension that completed while it still believed (confirmed extensions set it,
// failed or unknown ones can only shorten it). A `maybe` hold comes from an acquire whose outcome
// is unknown: [invoke, invoke + ttl], the longest its key could have stayed on the nodes.
struct hold {
  std::string process;
  std::string resource;
  std::string token;
  mono_ns begin = 0;
  mono_ns end = 0;
  bool maybe = false;
  bool shared = false;  // a reader's (event::shared)
};

// More holds than allowed at once. Every hold in `holders` believed it held a resource of `group`
// at some moment of [from, from + by], and at every moment of it more than `limit` of them did
// (for a violation: more than `limit` certain holds, each of another lease); for the
// readers-writers check, a writer and anyone else did (`readers_writers`).
struct overlap {
  std::string group;
  std::size_t limit = 1;
  bool readers_writers = false;
  std::vector<hold> holders;  // in the order they began
  mono_ns from = 0;
  mono_ns by = 0;  // nanoseconds the group had more than `limit` holders
};

struct check_result {
  std::vector<hold> holds;
  // More than `limit` certain holds of one group at once, for longer than epsilon: the limit (for
  // mutual exclusion: one holder per resource) was broken.
  std::vector<overlap> violations;
  // Too many holders only if some maybe-holds are counted (and at least one certain hold is
  // among them). Not a violation: an unknown acquire may as well have failed, and its caller
  // never believed it held the lock.
  std::vector<overlap> ambiguous;
  // The earliest time in the history: describe() gives times relative to it.
  mono_ns origin = 0;

  bool ok() const noexcept { return violations.empty(); }
  // One line per violation (the first ten): "p1/c0 [3f2a..] and p2/c5 [...] both held "r" for
  // 12.300 ms from +40.100 ms" (times from `origin`), or for a group "p1 [..] on "{s}:slot:0",
  // p2 [..] on "{s}:slot:1" and p3 [..] on "{s}:slot:0" all held "{s}" at once (at most 2) for
  // ...".
  std::string describe() const;
};

// Which group a resource's holds count in: check_at_most allows `limit` holders per group.
using group_of_fn = std::function<std::string(std::string_view resource)>;

// Every resource on its own: mutual exclusion per resource.
std::string each_resource(std::string_view resource);

// The slot keys of one semaphore ("{jobs}:slot:0" .. "{jobs}:slot:N-1") as one group, named by
// what precedes ":slot:" ("{jobs}"); any other resource is a group of its own.
std::string semaphore_of_slot(std::string_view resource);

// The "at most `limit` holders" check over a merged history: the holds (see `hold`) are grouped
// by `group_of(resource)`, and a violation is reported for every stretch of time in which more
// than `limit` certain holds of one group, each of another lease, overlapped by more than
// `epsilon`. Overlaps up to `epsilon` are tolerated: the clocks agree, but each event's time is
// taken a little before or after the library acted.
check_result check_at_most(const std::vector<event>& events, const group_of_fn& group_of,
                           std::size_t limit,
                           std::chrono::nanoseconds epsilon = std::chrono::milliseconds(5));

// The readers-writers check: per resource, any number of shared holds (readers) at once, but a
// hold that is not shared (a writer) overlaps no other lease's hold, shared or not, by more than
// `epsilon`. Maybe-holds make an overlap ambiguous as in check_at_most.
check_result check_readers_writers(const std::vector<event>& events,
                                   std::chrono::nanoseconds epsilon = std::chrono::milliseconds(5));

// The mutual-exclusion check: check_at_most with one holder per resource.
check_result check_mutual_exclusion(
    const std::vector<event>& events,
    std::chrono::nanoseconds epsilon = std::chrono::milliseconds(5));

}  // namespace redlock::test

#endif
