#ifndef REDLOCK_RESP_SCRIPT_HPP
#define REDLOCK_RESP_SCRIPT_HPP

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace redlock::detail {

// Lower-case hex SHA-1 of `data` (40 characters): the name Redis gives a script for EVALSHA.
std::string sha1_hex(std::string_view data);

// A Lua script known by its SHA-1, run with EVALSHA so only 40 bytes travel per call.
class script {
 public:
  explicit script(std::string source);

  const std::string& source() const noexcept { return source_; }
  const std::string& sha1() const noexcept { return sha1_; }

 private:
  std::string source_;
  std::string sha1_;
};

// "EVALSHA sha numkeys keys... args..." encoded.
std::string encode_evalsha(const script& s, std::span<const std::string_view> keys,
                           std::span<const std::string_view> args);
// Its size, and the same bytes written at `out`, which has room for that many.
std::size_t evalsha_size(const script& s, std::span<const std::string_view> keys,
                         std::span<const std::string_view> args);
void write_evalsha(char* out, const script& s, std::span<const std::string_view> keys,
                   std::span<const std::string_view> args);
// The same, in a string of another allocator.
template <class String>
String encode_evalsha_as(const script& s, std::span<const std::string_view> keys,
                         std::span<const std::string_view> args) {
  String out;
  out.resize(evalsha_size(s, keys, args));
  write_evalsha(out.data(), s, keys, args);
  return out;
}
// The same call as EVAL with the full source, rebuilt from an encode_evalsha payload.
std::string evalsha_to_eval(const script& s, std::string_view evalsha_payload);

}  // namespace redlock::detail

#endif
