#ifndef REDLOCK_RESP_ENCODER_HPP
#define REDLOCK_RESP_ENCODER_HPP

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

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

// The command alone in `out` (its previous bytes replaced), for a string of another allocator.
template <class Allocator>
void encode_command_into(std::basic_string<char, std::char_traits<char>, Allocator>& out,
                         std::initializer_list<std::string_view> args) {
  const std::span<const std::string_view> command(args.begin(), args.size());
  const std::size_t size = encoded_size(command);
  if (out.empty()) {
    // Made at its size: cheaper than growing an empty string by resize().
    out =
        std::basic_string<char, std::char_traits<char>, Allocator>(size, '\0', out.get_allocator());
  } else {
    out.resize(size);
  }
  write_command(out.data(), command);
}

}  // namespace redlock::resp

#endif
