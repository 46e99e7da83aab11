#ifndef REDLOCK_RESP_ENCODER_HPP
#define REDLOCK_RESP_ENCODER_HPP

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace redlock::resp {

// Appends one command, as a RESP array of bulk strings, to `out`. Binary-safe: arguments may
// contain CR, LF and NUL bytes. Nothing is validated beyond that: an empty command encodes as
// "*0\r\n".
void encode_command(std::string& out, std::span<const std::string_view> args);

inline void encode_command(std::string& out, std::initializer_list<std::string_view> args) {
  encode_command(out, std::span<const std::string_view>(args.begin(), args.size()));
}

// Exact number of bytes encode_command appends, so callers can reserve once.
std::size_t encoded_size(std::span<const std::string_view> args) noexcept;

// Writes the command at `out`, which has room for encoded_size(args) bytes; returns its end.
char* write_command(char* out, std::span<const std::string_view> args) noexcept;

// The command alone, in a string of any allocator. Made at its size: cheaper than growing an
// empty string by resize().
template <class String>
String encode_as(std::span<const std::string_view> command) {
  String out(encoded_size(command), '\0');
  write_command(out.data(), command);
  return out;
}

template <class String>
String encode_as(std::initializer_list<std::string_view> command) {
  return encode_as<String>(std::span<const std::string_view>(command.begin(), command.size()));
}

namespace encoding {

// The lengths and numbers of a lock's commands have at most five digits: those are told apart by
// comparisons, without a division.
[[gnu::always_inline]] constexpr std::size_t decimal_digits(std::uint64_t n) noexcept {
  if (n < 10) return 1;
  if (n < 100) return 2;
  if (n < 1000) return 3;
  if (n < 10000) return 4;
  std::size_t digits = 5;
  for (n /= 100000; n > 0; n /= 10)
    ++digits;
  return digits;
}

// "00" to "99": two digits per division when a number is written.
inline constexpr std::array<char, 200> digit_pairs = [] {
  std::array<char, 200> pairs{};
  for (std::size_t n = 0; n < 100; ++n) {
    pairs[2 * n] = static_cast<char>('0' + n / 10);
    pairs[2 * n + 1] = static_cast<char>('0' + n % 10);
  }
  return pairs;
}();

// Writes n, of `digits` decimal digits (decimal_digits(n)), at p; returns its end.
inline char* put_decimal(char* p, std::uint64_t n, std::size_t digits) noexcept {
  char* const end = p + digits;
  char* digit = end;
  for (; n >= 100; n /= 100) {
    digit -= 2;
    std::memcpy(digit, digit_pairs.data() + 2 * (n % 100), 2);
  }
  if (n >= 10) {
    std::memcpy(digit - 2, digit_pairs.data() + 2 * n, 2);
  } else {
    *(digit - 1) = static_cast<char>('0' + n);
  }
  return end;
}

// Writes "<prefix><n>\r\n" at p, returns its end. Most lengths have one or two digits (a
// command's name, a key, a token, a SHA-1, a TTL): those are written directly.
[[gnu::always_inline]] inline char* put_header(char* p, char prefix, std::size_t n) noexcept {
  *p++ = prefix;
  if (n < 10) {
    *p++ = static_cast<char>('0' + n);
  } else if (n < 100) {
    *p++ = static_cast<char>('0' + n / 10);
    *p++ = static_cast<char>('0' + n % 10);
  } else {
    p = put_decimal(p, n, decimal_digits(n));
  }
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

// A word of encode_words: a string literal (its length known when compiling; any char array is
// taken for one, its last character being the literal's terminating null), an integer (written
// in decimal, as Redis reads a TTL or a key count) or anything that converts to a string_view.
template <class Word>
struct word {
  static std::string_view text(const Word& w) noexcept { return std::string_view(w); }
  static std::size_t size(const Word& w) noexcept {
    const std::size_t n = text(w).size();
    return 1 + decimal_digits(n) + 2 + n + 2;
  }
  static char* put(char* p, const Word& w) noexcept {
    const std::string_view t = text(w);
    p = put_header(p, '$', t.size());
    if (!t.empty()) std::memcpy(p, t.data(), t.size());  // an empty view may have no data
    p += t.size();
    *p++ = '\r';
    *p++ = '\n';
    return p;
  }
};

template <std::size_t N>
struct word<char[N]> {
  static constexpr std::size_t length = N - 1;
  static constexpr std::size_t size(const char (&)[N]) noexcept {
    return 1 + decimal_digits(length) + 2 + length + 2;
  }
  static char* put(char* p, const char (&w)[N]) noexcept {
    p = put_header(p, '$', length);
    std::memcpy(p, w, length);
    p += length;
    *p++ = '\r';
    *p++ = '\n';
    return p;
  }
};

template <std::integral Number>
struct word<Number> {
  // Its magnitude; a negative number also has a sign.
  static std::uint64_t magnitude(Number n) noexcept {
    if constexpr (std::is_signed_v<Number>) {
      if (n < 0) return 0 - static_cast<std::uint64_t>(n);
    }
    return static_cast<std::uint64_t>(n);
  }
  static std::size_t size(Number n) noexcept {
    const std::size_t chars = (n < 0 ? 1 : 0) + decimal_digits(magnitude(n));
    return 1 + decimal_digits(chars) + 2 + chars + 2;
  }
  static char* put(char* p, Number n) noexcept {
    const std::uint64_t m = magnitude(n);
    const std::size_t digits = decimal_digits(m);
    p = put_header(p, '$', (n < 0 ? 1 : 0) + digits);
    if (n < 0) *p++ = '-';
    p = put_decimal(p, m, digits);
    *p++ = '\r';
    *p++ = '\n';
    return p;
  }
};

}  // namespace encoding

// Words encoded ahead of time, `count` of them, that encode_words puts in a command as they are:
// for the words with which every call of a script begins ("EVALSHA <sha1> <numkeys>").
struct encoded_words {
  std::string_view bytes;
  std::size_t count = 0;
};

namespace encoding {

template <>
struct word<encoded_words> {
  static std::size_t size(const encoded_words& w) noexcept { return w.bytes.size(); }
  static char* put(char* p, const encoded_words& w) noexcept {
    std::memcpy(p, w.bytes.data(), w.bytes.size());
    return p + w.bytes.size();
  }
};

// How many words of the command a word of encode_words is.
template <class Word>
constexpr std::size_t words_in(const Word&) noexcept {
  return 1;
}
inline std::size_t words_in(const encoded_words& w) noexcept {
  return w.count;
}

}  // namespace encoding

// `words` as encode_words writes them in a command, without the command's header: the bytes of
// an encoded_words.
template <class... Words>
std::string encode_bare_words(const Words&... words) {
  std::string out((encoding::word<Words>::size(words) + ...), '\0');
  char* p = out.data();
  ((p = encoding::word<Words>::put(p, words)), ...);
  return out;
}

// The command made of `words`, written into `out` (a string of any allocator, whose storage is
// reused when large enough), as encode_as would write it. For the commands a lock sends on every
// acquire and release: the count and the literal words' lengths are known when compiling, numbers
// need no string of their own, words encoded ahead of time (encoded_words) are copied as they
// are, and the words are gone over twice (size, then bytes) without a loop over a span.
template <class String, class... Words>
void encode_words_into(String& out, const Words&... words) {
  const std::size_t count = (encoding::words_in(words) + ...);
  const std::size_t size =
      1 + encoding::decimal_digits(count) + 2 + (encoding::word<Words>::size(words) + ...);
  out.assign(size, '\0');
  char* p = encoding::put_header(out.data(), '*', count);
  ((p = encoding::word<Words>::put(p, words)), ...);
}

// The same, in a new string.
template <class String, class... Words>
String encode_words(const Words&... words) {
  String out;
  encode_words_into(out, words...);
  return out;
}

}  // namespace redlock::resp

#endif
