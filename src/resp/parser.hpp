#ifndef REDLOCK_RESP_PARSER_HPP
#define REDLOCK_RESP_PARSER_HPP

#include "resp/value.hpp"

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::resp {

// Bounds that keep a hostile or broken peer from exhausting memory or the stack.
struct parser_limits {
  std::size_t max_depth = 32;                      // nesting of aggregates (a top-level array = 1)
  std::size_t max_bulk_length = 64 * 1024 * 1024;  // one bulk/verbatim/blob-error payload, bytes
  std::size_t max_aggregate_size = 1024 * 1024;    // elements of one aggregate (map: pairs * 2)
  std::size_t max_buffer = 128 * 1024 * 1024;      // unconsumed bytes buffered at once
  std::size_t max_line_length = 64 * 1024;         // a header/simple line without its CRLF
  // Wire bytes of one top-level reply, all of its elements together (and attributes before it).
  // A reply is consumed piece by piece, so it can be far larger than what is buffered at once.
  std::size_t max_reply_size = 128 * 1024 * 1024;
  // Memory one top-level reply may take once parsed (attributes before it included): every value
  // in the tree counts sizeof(value) plus the bytes of its text, and an aggregate's elements count
  // as soon as its header declares them. The wire size alone does not bound this: an empty array
  // is 4 bytes on the wire and a value of about 100 bytes in memory.
  std::size_t max_reply_memory = 256 * 1024 * 1024;
};

// Incremental RESP2 + RESP3 reply parser. Sans-io: bytes go in through prepare()/commit() (zero
// copy from a socket read) or feed(); complete replies come out of next(). A reply may arrive split
// at any byte boundary; the result is the same as if it came in one piece, and already-parsed parts
// of a partial aggregate are not parsed again.
//
// After a protocol error the parser is failed for good: next() keeps returning the same error and
// error_message() names the problem ("resp: bulk length 99999999999 exceeds limit 67108864").
// Errors are reported as redlock::error::protocol_error.
class parser {
 public:
  explicit parser(parser_limits limits = {});

  // Writable space of at least `min_size` bytes at the end of the buffer. Only the first bytes
  // that are then commit()ted become input. A later prepare() invalidates the span; next() may be
  // called between prepare() and commit(). Fails (returns an empty span and sets the error) when
  // buffering `min_size` more bytes would exceed max_buffer.
  std::span<char> prepare(std::size_t min_size);
  void commit(std::size_t n);

  // Copies `bytes` in; same as prepare + memcpy + commit. Returns false when max_buffer is hit.
  bool feed(std::string_view bytes);

  // The next complete reply, or nullopt when more bytes are needed or on error (then `ec` is set).
  std::optional<value> next(boost::system::error_code& ec);
  // The same into `out`, whose storage is reused (a reader loop keeps one value for every reply).
  // Returns false when more bytes are needed or on error; `out` is then unspecified.
  bool next(value& out, boost::system::error_code& ec);

  bool failed() const noexcept;
  const std::string& error_message() const noexcept;

  // Unconsumed bytes held now.
  std::size_t buffered() const noexcept;

  // Forgets all input and any error, e.g. for a new connection.
  void reset();

 private:
  // An aggregate whose header has been consumed but whose elements have not all arrived.
  struct frame {
    value aggregate;
    std::size_t remaining = 0;  // elements still expected; > 0 while the frame is on the stack
    bool attribute = false;     // an attribute map: dropped once complete, never delivered
  };
  enum class step { need_more, produced, pushed, skipped, failed };

  [[gnu::always_inline]] bool take_common_reply(value& out) noexcept;
  // next() past its shortcut: element by element. Out of line, so that the shortcut, which
  // nearly every reply of a lock takes, saves and restores no registers.
  [[gnu::noinline]] bool next_element_by_element(value& v, boost::system::error_code& ec);
  step parse_element(value& out);
  step take_payload(value& out);
  step fail(std::string message);
  void consume(std::size_t n) noexcept;
  void reallocate(std::size_t new_capacity);

  parser_limits limits_;
  // Whether "+OK" and ":<digit>" at the top level fit the limits (next()'s shortcut).
  bool common_replies_within_limits_;
  // The members below belong to the implementation (parser.cpp) and may change freely.
  // The buffer never shrinks below this; below it, reallocating costs more than it saves.
  static constexpr std::size_t shrink_floor = 1024 * 1024;
  // Storage that is not zeroed when it grows: bytes are read only after a transport or feed()
  // wrote them (prepare() hands out [end_, size()), commit() admits what was written).
  struct storage {
    std::unique_ptr<char[]> bytes;
    std::size_t capacity = 0;
    char* data() const noexcept { return bytes.get(); }
    std::size_t size() const noexcept { return capacity; }
  };
  // Input lives in buffer_[read_pos_, end_); buffer_[end_, size()) is writable space.
  storage buffer_;  // grown and shrunk only by prepare()
  std::size_t read_pos_ = 0;
  std::size_t end_ = 0;
  std::size_t prepared_ = 0;  // size of the span last handed out by prepare()
  // Bytes after read_pos_ already searched for CR without success; a line that arrives in many
  // pieces is scanned once, not once per piece.
  std::size_t scanned_ = 0;
  // A bulk-like header ($ = !) already consumed whose payload + CRLF is not fully buffered yet.
  bool payload_pending_ = false;
  char payload_type_ = 0;
  std::size_t payload_length_ = 0;
  std::vector<frame> stack_;     // partially built aggregates, outermost first; size() <= max_depth
  std::size_t reply_bytes_ = 0;  // consumed since the current top-level reply began
  std::size_t reply_memory_ = 0;  // charged to it so far (see parser_limits::max_reply_memory)
  bool failed_ = false;
  boost::system::error_code error_;
  std::string error_message_;
};

}  // namespace redlock::resp

#endif
