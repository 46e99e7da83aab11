// Fuzz entry point for the RESP parser and encoder.
//
// Input layout: three control bytes, then the RESP stream.
//   byte 0: how the stream is cut (chunk size, feed() or prepare()/commit())
//   byte 1: depth, bulk and aggregate limits (bit 7 set: all defaults)
//   byte 2: line and buffer limits
// Properties checked (abort on violation):
//   - cutting the stream differently never changes the replies or the error (when the buffer
//     limit is out of reach, since that one legitimately depends on the cutting);
//   - a failed parser stays failed with the same message, and never yields a value;
//   - an array of strings, re-encoded as a command and parsed again, gives back the same strings;
//   - encoded_size() is the encoder's exact output size.
#include "resp/encoder.hpp"
#include "resp/parser.hpp"
#include "resp/value.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace resp = redlock::resp;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "resp_fuzz: property violated: %s\n", what);
    std::abort();
  }
}

// Deep equality in which NaN equals NaN (the parser keeps ",nan" as a NaN double).
bool same(const resp::value& a, const resp::value& b) {
  if (a.kind != b.kind || a.text != b.text || a.format != b.format || a.integer != b.integer) {
    return false;
  }
  if (!(a.number == b.number) && !(std::isnan(a.number) && std::isnan(b.number))) return false;
  if (a.elements.size() != b.elements.size()) return false;
  for (std::size_t i = 0; i < a.elements.size(); ++i) {
    if (!same(a.elements[i], b.elements[i])) return false;
  }
  return true;
}

struct result {
  std::vector<resp::value> values;
  bool failed = false;
  std::string message;
};

bool same(const result& a, const result& b) {
  if (a.failed != b.failed || a.message != b.message || a.values.size() != b.values.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    if (!same(a.values[i], b.values[i])) return false;
  }
  return true;
}

void drain(resp::parser& p, result& r) {
  for (;;) {
    boost::system::error_code ec;
    std::optional<resp::value> v = p.next(ec);
    if (ec) {
      check(!v.has_value(), "a value together with an error");
      check(p.failed(), "an error but not failed()");
      r.failed = true;
      r.message = p.error_message();
      // Failed for good: the same error again, never a value.
      boost::system::error_code again;
      check(!p.next(again).has_value() && again == ec, "error not sticky");
      check(p.error_message() == r.message, "error message changed");
      return;
    }
    if (!v) return;
    // Exercise the helpers on whatever came out; they must not crash.
    (void)resp::to_debug_string(*v);
    (void)v->error_code_word();
    r.values.push_back(std::move(*v));
  }
}

constexpr std::size_t k_chunk_sizes[] = {0,  1,  2,  3,  4,   5,   7,    8,
                                         13, 16, 31, 64, 100, 257, 1024, 4096};

// Parses `input` cut into pieces of `chunk` bytes (0: one piece).
result parse(std::string_view input, const resp::parser_limits& limits, std::size_t chunk,
             bool use_prepare) {
  resp::parser p(limits);
  result r;
  if (chunk == 0) chunk = input.size() == 0 ? 1 : input.size();
  for (std::size_t pos = 0; pos < input.size() && !r.failed; pos += chunk) {
    const std::string_view piece = input.substr(pos, chunk);
    bool ok = true;
    if (use_prepare) {
      const std::span<char> space = p.prepare(piece.size());
      ok = space.size() >= piece.size();
      if (ok) {
        std::memcpy(space.data(), piece.data(), piece.size());
        p.commit(piece.size());
      }
    } else {
      ok = p.feed(piece);
    }
    if (!ok) {
      check(p.failed(), "buffer refused without failing");
      r.failed = true;
      r.message = p.error_message();
      break;
    }
    check(p.buffered() <= limits.max_buffer, "buffered beyond max_buffer");
    drain(p, r);
  }
  if (r.failed) {
    check(!p.feed("+OK\r\n"), "feed accepted by a failed parser");
    p.reset();
    check(!p.failed() && p.buffered() == 0, "reset did not clear");
    check(p.feed("+OK\r\n"), "feed refused after reset");
    boost::system::error_code ec;
    const std::optional<resp::value> v = p.next(ec);
    check(!ec && v && v->kind == resp::type::simple_string && v->text == "OK",
          "parser unusable after reset");
  }
  return r;
}

// An array of strings is what a command looks like: encode it and parse it back.
void check_round_trip(const resp::value& v) {
  if (v.kind != resp::type::array) return;
  std::vector<std::string_view> args;
  for (const resp::value& e : v.elements) {
    if (!e.is_string()) return;
    args.push_back(e.text);
  }
  std::string encoded = "junk-before:";
  const std::size_t before = encoded.size();
  resp::encode_command(encoded, args);
  check(encoded.size() - before == resp::encoded_size(args), "encoded_size mismatch");
  resp::parser p;
  check(p.feed(std::string_view(encoded).substr(before)), "encoded command refused");
  boost::system::error_code ec;
  const std::optional<resp::value> back = p.next(ec);
  check(!ec && back.has_value(), "encoded command did not parse");
  check(back->kind == resp::type::array && back->elements.size() == args.size(),
        "round trip changed the shape");
  for (std::size_t i = 0; i < args.size(); ++i) {
    check(back->elements[i].kind == resp::type::bulk_string && back->elements[i].text == args[i],
          "round trip changed an argument");
  }
  check(!p.next(ec).has_value() && !ec && p.buffered() == 0, "round trip left bytes behind");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const std::uint8_t cut = data[0];
  const std::uint8_t l1 = data[1];
  const std::uint8_t l2 = data[2];
  const std::string_view input(reinterpret_cast<const char*>(data + 3), size - 3);

  resp::parser_limits limits;
  if ((l1 & 0x80) == 0) {
    constexpr std::size_t depths[] = {1, 2, 3, 5, 8, 32, 0, 4};
    constexpr std::size_t bulks[] = {0, 4, 16, 1024};
    constexpr std::size_t aggregates[] = {0, 2, 8, 64};
    limits.max_depth = depths[l1 & 7];
    limits.max_bulk_length = bulks[(l1 >> 3) & 3];
    limits.max_aggregate_size = aggregates[(l1 >> 5) & 3];
  }
  constexpr std::size_t lines[] = {2, 8, 64, 64 * 1024};
  constexpr std::size_t buffers[] = {16, 64, 4096, 128 * 1024 * 1024};
  limits.max_line_length = lines[l2 & 3];
  limits.max_buffer = buffers[(l2 >> 2) & 3];

  const std::size_t chunk = k_chunk_sizes[cut & 15];
  const bool use_prepare = (cut & 0x10) != 0;
  const result chunked = parse(input, limits, chunk, use_prepare);

  if (limits.max_buffer >= input.size() + 4096) {
    // With the buffer limit out of reach, the result cannot depend on the cutting.
    const result whole = parse(input, limits, 0, false);
    check(same(whole, chunked), "result depends on how the input is cut");
    const result bytewise = parse(input, limits, 1, !use_prepare);
    check(same(whole, bytewise), "byte-at-a-time result differs");
  }
  for (const resp::value& v : chunked.values)
    check_round_trip(v);
  return 0;
}
