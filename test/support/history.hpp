#ifndef REDLOCK_TEST_SUPPORT_HISTORY_HPP
#define REDLOCK_TEST_SUPPORT_HISTORY_HPP

#include <chrono>
#include <cstdint>
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

  // One line of text, and back; used to merge the histories of several processes.
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
};

struct overlap {
  hold first;
  hold second;
  mono_ns by = 0;  // nanoseconds both believed they held the resource
};

struct check_result {
  std::vector<hold> holds;
  // Two certain holds of one resource overlapping by more than epsilon: mutual exclusion failed.
  std::vector<overlap> violations;
  // A certain hold overlapping a maybe-hold. Not a violation: the unknown acquire may as well
  // have failed, and its caller never believed it held the lock.
  std::vector<overlap> ambiguous;

  bool ok() const noexcept { return violations.empty(); }
  // "2 violations: p1/c0 [token 3f2a..] and p2/c5 [...] both held "r" for 12.3 ms from ..."
  std::string describe() const;
};

// The mutual-exclusion check over a merged history. Overlaps up to `epsilon` are tolerated: the
// clocks agree, but each event's time is taken a little before or after the library acted.
check_result check_mutual_exclusion(
    const std::vector<event>& events,
    std::chrono::nanoseconds epsilon = std::chrono::milliseconds(5));

}  // namespace redlock::test

#endif
