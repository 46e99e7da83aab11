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

}  // namespace redlock::resp

#endif
