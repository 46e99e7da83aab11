#ifndef REDLOCK_RESP_SCRIPT_HPP
#define REDLOCK_RESP_SCRIPT_HPP

#include "resp/encoder.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

// Lower-case hex SHA-1 of `data` (40 characters): the name Redis gives a script for EVALSHA.
std::string sha1_hex(std::string_view data);

// A Lua script known by its SHA-1, run with EVALSHA so only 40 bytes travel per call.
class script {
 public:
  explicit script(std::string source);

  const std::string& source() const noexcept { return source_; }
  const std::string& sha1() const noexcept { return sha1_; }
  // "EVALSHA <sha1> 1", encoded: how every call of the script with one key begins
  // (resp::encode_words).
  resp::encoded_words call_with_one_key() const noexcept { return {one_key_call_, 3}; }

 private:
  std::string source_;
  std::string sha1_;
  std::string one_key_call_;
};

// Calls `use` with the command "EVALSHA sha numkeys keys... args...", as a span of its words:
// built on the stack for the library's scripts, which take a few arguments.
template <class Use>
auto with_evalsha_words(const script& s, std::span<const std::string_view> keys,
                        std::span<const std::string_view> args, Use&& use) {
  std::array<char, 20> numkeys_digits;
  const auto numkeys_end = std::to_chars(numkeys_digits.data(),
                                         numkeys_digits.data() + numkeys_digits.size(), keys.size())
                               .ptr;
  std::array<std::string_view, 16> small;
  std::vector<std::string_view> large;
  const std::size_t count = 3 + keys.size() + args.size();
  std::span<std::string_view> command(small.data(), count <= small.size() ? count : 0);
  if (count > small.size()) {
    large.resize(count);
    command = large;
  }
  command[0] = "EVALSHA";
  command[1] = s.sha1();
  command[2] = std::string_view(numkeys_digits.data(),
                                static_cast<std::size_t>(numkeys_end - numkeys_digits.data()));
  std::copy(keys.begin(), keys.end(), command.begin() + 3);
  std::copy(args.begin(), args.end(),
            command.begin() + 3 + static_cast<std::ptrdiff_t>(keys.size()));
  return use(std::span<const std::string_view>(command));
}

// "EVALSHA sha numkeys keys... args..." encoded, in a string of any allocator.
template <class String>
String encode_evalsha_as(const script& s, std::span<const std::string_view> keys,
                         std::span<const std::string_view> args) {
  return with_evalsha_words(s, keys, args, [](std::span<const std::string_view> command) {
    return resp::encode_as<String>(command);
  });
}
std::string encode_evalsha(const script& s, std::span<const std::string_view> keys,
                           std::span<const std::string_view> args);
// The same call as EVAL with the full source, rebuilt from an encode_evalsha payload.
std::string evalsha_to_eval(const script& s, std::string_view evalsha_payload);

}  // namespace redlock::detail

#endif
