#include "resp/parser.hpp"

#include "redlock/error.hpp"
#include "resp/number_syntax.hpp"
#include "resp/peer_text.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace redlock::resp {

using peer_text::excerpt;
using peer_text::hex_byte;
using peer_text::num;
using peer_text::size_word;

namespace {

using number_syntax::int_status;
using number_syntax::is_digit;
using number_syntax::parse_double;
using number_syntax::parse_int64;
using number_syntax::valid_big_number;

// A declared size is a claim by the peer, not a fact: never reserve more than this up front.
constexpr std::size_t k_max_reserve = 1024;

// A top-level reply's value, emptied for the next one: cleared, not replaced, so that its strings
// and its vector keep their storage. reset_keeping_text leaves the text as it was.
[[gnu::always_inline]] inline void reset_keeping_text(value& v) noexcept {
  v.kind = type::null;
  v.format.clear();
  v.integer = 0;
  v.number = 0.0;
  if (!v.elements.empty()) v.elements.clear();  // nearly always empty: no call then
}

[[gnu::always_inline]] inline void reset_reusing_storage(value& v) noexcept {
  reset_keeping_text(v);
  v.text.clear();
}

}  // namespace

parser::parser(parser_limits limits)
    : limits_(limits),
      common_replies_within_limits_(limits.max_reply_size >= 5 &&
                                    limits.max_reply_memory >= sizeof(value) + 2) {}

bool parser::failed() const noexcept {
  return failed_;
}

const std::string& parser::error_message() const noexcept {
  return error_message_;
}

parser::step parser::fail(std::string message) {
  failed_ = true;
  error_ = make_error_code(error::protocol_error);
  error_message_ = std::move(message);
  prepared_ = 0;
  return step::failed;
}

void parser::consume(std::size_t n) noexcept {
  read_pos_ += n;
  reply_bytes_ += n;
  scanned_ = 0;
}

// The replies a lock gets most, whole in the buffer: a script's ":0" / ":1" (each key of a batch
// of renewals is one) and SET's "+OK". They skip the line scan and the number parser; what they
// produce and consume is exactly what parse_element's general path would. `out` is reset only for
// these. A connection reads every reply into one value, which often holds the "OK" of the reply
// before: kept, not cleared and appended again (append is a call into the standard library).
inline bool parser::take_common_reply(value& out) noexcept {
  const char* const at = buffer_.data() + read_pos_;
  const std::size_t left = end_ - read_pos_;
  if (left >= 4 && at[0] == ':' && is_digit(at[1]) && at[2] == '\r' && at[3] == '\n') {
    reset_reusing_storage(out);
    out.kind = type::integer;
    out.integer = at[1] - '0';
    consume(4);
    return true;
  }
  if (left >= 5 && at[0] == '+' && std::memcmp(at + 1, "OK\r\n", 4) == 0) {
    if (out.text.size() == 2 && out.text[0] == 'O' && out.text[1] == 'K') {
      reset_keeping_text(out);
    } else {
      reset_reusing_storage(out);
      out.text.append("OK", 2);
    }
    out.kind = type::simple_string;
    reply_memory_ += 2;
    consume(5);
    return true;
  }
  return false;
}

std::optional<value> parser::next(boost::system::error_code& ec) {
  value v;
  if (next(v, ec)) return std::optional<value>(std::move(v));
  return std::nullopt;
}

bool parser::next(value& v, boost::system::error_code& ec) {
  if (failed_) {
    ec = error_;
    return false;
  }
  ec.clear();
  // Nothing buffered: the general path would only find that out (a reader asks once more after the
  // last buffered reply of every read).
  if (read_pos_ == end_ && !payload_pending_) return false;
  if (stack_.empty() && !payload_pending_ && reply_bytes_ == 0 && common_replies_within_limits_) {
    // A whole reply of the commonest kinds, with none of the general path's bookkeeping: nothing
    // of it was read before, it fits every limit, and it leaves nothing open.
    if (take_common_reply(v)) {
      reply_bytes_ = 0;
      reply_memory_ = 0;
      return true;
    }
  }
  return next_element_by_element(v, ec);
}

bool parser::next_element_by_element(value& v, boost::system::error_code& ec) {
  for (;;) {
    // An element of an open aggregate is parsed where it will stay, at the end of the aggregate's
    // vector, not built aside and moved in: a reply of many elements (a batch of renewals) moved
    // each one once more. A step that produces no element takes its place back. The place stays
    // valid across the step even when the step opens an aggregate: stack_ may reallocate, but the
    // frames' element vectors keep their storage when they are moved.
    const std::size_t owner = stack_.size();  // 1 + the frame the element goes to; 0: top level
    value* into = &v;
    if (owner == 0) {
      reset_reusing_storage(v);
    } else {
      into = &stack_[owner - 1].aggregate.elements.emplace_back();
    }
    // The value a new top-level reply will fill. Its elements and text are charged as they come.
    if (reply_memory_ == 0) reply_memory_ = sizeof(value);
    const step result = parse_element(*into);
    if (owner != 0 && result != step::produced) stack_[owner - 1].aggregate.elements.pop_back();
    switch (result) {
      // Offsets are not rewound here even when everything is consumed: a span from prepare()
      // may be outstanding (a pending socket read) and must stay where commit() expects it.
      case step::need_more:
        return false;
      case step::failed:
        ec = error_;
        return false;
      case step::pushed:
      case step::skipped:
      case step::produced:
        break;
    }
    // One step consumes at most one line or one bulk payload, so the overshoot is bounded too.
    if (reply_bytes_ > limits_.max_reply_size) {
      fail("resp: reply of " + num(reply_bytes_) + "+ bytes exceeds limit " +
           num(limits_.max_reply_size));
      ec = error_;
      return false;
    }
    if (reply_memory_ > limits_.max_reply_memory) {
      fail("resp: reply needs " + num(reply_memory_) + "+ bytes of memory, over the limit of " +
           num(limits_.max_reply_memory));
      ec = error_;
      return false;
    }
    if (result != step::produced) continue;
    if (owner == 0) {
      reply_bytes_ = 0;
      reply_memory_ = 0;
      return true;
    }
    // The element is in its aggregate. Close every aggregate it completes, handing each up to its
    // parent. A finished attribute is dropped: it annotates the value that follows it and is not
    // an element of its parent (nor took a place in it).
    while (--stack_.back().remaining == 0) {
      const bool attribute = stack_.back().attribute;
      value done = std::move(stack_.back().aggregate);
      stack_.pop_back();
      if (attribute) break;
      if (stack_.empty()) {
        v = std::move(done);
        reply_bytes_ = 0;
        reply_memory_ = 0;
        return true;
      }
      stack_.back().aggregate.elements.push_back(std::move(done));
    }
  }
}

parser::step parser::parse_element(value& out) {
  if (payload_pending_) return take_payload(out);
  if (read_pos_ == end_) return step::need_more;

  if (take_common_reply(out)) return step::produced;
  const char* const base = buffer_.data();
  const char type_byte = base[read_pos_];
  switch (type_byte) {
    case '+':
    case '-':
    case ':':
    case '$':
    case '_':
    case '*':
    case '%':
    case '~':
    case '>':
    case ',':
    case '#':
    case '(':
    case '=':
    case '!':
    case '|':
      break;
    case ';':
    case '.':
      return fail(std::string("resp: streamed aggregates are unsupported (type byte '") +
                  type_byte + "')");
    default:
      return fail("resp: unknown type byte " + hex_byte(type_byte));
  }

  // The header line: everything up to CRLF. A CR inside a line must start the CRLF.
  const std::size_t line_start = read_pos_ + 1;
  const std::size_t from = read_pos_ + std::max<std::size_t>(scanned_, 1);
  const void* const cr_ptr = from < end_ ? std::memchr(base + from, '\r', end_ - from) : nullptr;
  if (cr_ptr == nullptr) {
    if (end_ - line_start > limits_.max_line_length) {
      return fail("resp: line longer than " + num(limits_.max_line_length) + " bytes without CRLF");
    }
    scanned_ = end_ - read_pos_;
    return step::need_more;
  }
  const auto cr = static_cast<std::size_t>(static_cast<const char*>(cr_ptr) - base);
  if (cr - line_start > limits_.max_line_length) {
    return fail("resp: line longer than " + num(limits_.max_line_length) + " bytes without CRLF");
  }
  if (cr + 1 == end_) {
    scanned_ = cr - read_pos_;  // look at this CR again once its LF may have arrived
    return step::need_more;
  }
  if (base[cr + 1] != '\n') return fail("resp: CR not followed by LF in a line");
  const std::string_view line(base + line_start, cr - line_start);
  const std::size_t line_total = cr + 2 - read_pos_;

  switch (type_byte) {
    case '+':
      out.kind = type::simple_string;
      out.text.assign(line);
      reply_memory_ += line.size();
      break;
    case '-':
      out.kind = type::simple_error;
      out.text.assign(line);
      reply_memory_ += line.size();
      break;
    case ':': {
      switch (parse_int64(line, true, out.integer)) {
        case int_status::ok:
          break;
        case int_status::empty:
          return fail("resp: empty integer");
        case int_status::bad:
          return fail("resp: bad integer " + excerpt(line));
        case int_status::overflow:
          return fail("resp: integer " + excerpt(line) + " out of int64 range");
      }
      out.kind = type::integer;
      break;
    }
    case '_':
      if (!line.empty()) return fail("resp: bad null with payload " + excerpt(line));
      out.kind = type::null;
      break;
    case ',':
      if (!parse_double(line, out.number)) return fail("resp: bad double " + excerpt(line));
      out.kind = type::double_number;
      out.text.assign(line);
      reply_memory_ += line.size();
      break;
    case '#':
      if (line == "t") {
        out.integer = 1;
      } else if (line == "f") {
        out.integer = 0;
      } else {
        return fail("resp: bad boolean " + excerpt(line));
      }
      out.kind = type::boolean;
      break;
    case '(':
      if (!valid_big_number(line)) return fail("resp: bad big number " + excerpt(line));
      out.kind = type::big_number;
      out.text.assign(line);
      reply_memory_ += line.size();
      break;
    default: {
      // A sized type: bulk-like ($ = !) or aggregate (* % ~ > |).
      if (line == "?") {
        std::string why = "resp: streamed aggregates are unsupported ('";
        why += type_byte;
        why += "?')";
        return fail(std::move(why));
      }
      std::int64_t n = 0;
      switch (parse_int64(line, false, n)) {
        case int_status::ok:
          break;
        case int_status::empty:
          return fail(std::string("resp: empty ") + size_word(type_byte) + " length");
        case int_status::bad:
          return fail(std::string("resp: bad ") + size_word(type_byte) + " length " +
                      excerpt(line));
        case int_status::overflow:
          return fail(std::string("resp: ") + size_word(type_byte) + " length " + excerpt(line) +
                      " overflows");
      }
      if (line[0] == '-') {
        // Only RESP2's "$-1" and "*-1" are allowed a sign, and only in exactly that spelling.
        if ((type_byte == '$' || type_byte == '*') && line == "-1") {
          consume(line_total);
          out.kind = type::null;
          return step::produced;
        }
        return fail(std::string("resp: negative ") + size_word(type_byte) + " length " +
                    excerpt(line));
      }
      const auto count = static_cast<std::uint64_t>(n);

      if (type_byte == '$' || type_byte == '=' || type_byte == '!') {
        if (count > limits_.max_bulk_length) {
          return fail(std::string("resp: ") + size_word(type_byte) + " length " + num(count) +
                      " exceeds limit " + num(limits_.max_bulk_length));
        }
        consume(line_total);
        reply_memory_ += static_cast<std::size_t>(count);
        payload_pending_ = true;
        payload_type_ = type_byte;
        payload_length_ = static_cast<std::size_t>(count);
        return take_payload(out);
      }

      if (stack_.size() >= limits_.max_depth) {
        return fail("resp: nesting depth " + num(stack_.size() + 1) + " exceeds limit " +
                    num(limits_.max_depth));
      }
      const bool pairs = type_byte == '%' || type_byte == '|';
      // count <= INT64_MAX, so doubling it cannot wrap a uint64.
      const std::uint64_t elements = pairs ? 2 * count : count;
      if (elements > limits_.max_reply_memory / sizeof(value)) {
        return fail("resp: aggregate of " + num(elements) + " elements needs more memory than " +
                    "the reply limit of " + num(limits_.max_reply_memory) + " bytes");
      }
      if (elements > limits_.max_aggregate_size) {
        return fail("resp: aggregate of " + num(elements) + " elements exceeds limit " +
                    num(limits_.max_aggregate_size));
      }
      consume(line_total);
      // Each declared element will be a value in this aggregate's vector, whatever it holds.
      reply_memory_ += static_cast<std::size_t>(elements) * sizeof(value);
      type kind = type::array;
      switch (type_byte) {
        case '%':
        case '|':
          kind = type::map;
          break;
        case '~':
          kind = type::set;
          break;
        case '>':
          kind = type::push;
          break;
        default:
          break;
      }
      if (elements == 0) {
        if (type_byte == '|') return step::skipped;
        out.kind = kind;
        return step::produced;
      }
      frame f;
      f.aggregate.kind = kind;
      f.aggregate.elements.reserve(std::min<std::size_t>(elements, k_max_reserve));
      f.remaining = static_cast<std::size_t>(elements);
      f.attribute = type_byte == '|';
      stack_.push_back(std::move(f));
      return step::pushed;
    }
  }
  consume(line_total);
  return step::produced;
}

parser::step parser::take_payload(value& out) {
  const std::size_t length = payload_length_;
  if (end_ - read_pos_ < length + 2) return step::need_more;
  const char* const p = buffer_.data() + read_pos_;
  if (p[length] != '\r' || p[length + 1] != '\n') {
    return fail("resp: missing CRLF after " + std::string(size_word(payload_type_)) +
                " payload of " + num(length) + " bytes");
  }
  switch (payload_type_) {
    case '=':
      // "txt:Some string": a three-letter format, a colon, then the text.
      if (length < 4 || p[3] != ':') {
        return fail("resp: verbatim string of " + num(length) +
                    " bytes lacks its 3-letter format and ':'");
      }
      out.kind = type::verbatim_string;
      out.format.assign(p, 3);
      out.text.assign(p + 4, length - 4);
      break;
    case '!':
      out.kind = type::blob_error;
      out.text.assign(p, length);
      break;
    default:
      out.kind = type::bulk_string;
      out.text.assign(p, length);
      break;
  }
  payload_pending_ = false;
  consume(length + 2);
  return step::produced;
}

}  // namespace redlock::resp
