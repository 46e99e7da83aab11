#ifndef REDLOCK_RESP_SCRIPT_HPP
#define REDLOCK_RESP_SCRIPT_HPP

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
// The same call as EVAL with the full source, rebuilt from an encode_evalsha payload.
std::string evalsha_to_eval(const script& s, std::string_view evalsha_payload);

}  // namespace redlock::detail

#endif
