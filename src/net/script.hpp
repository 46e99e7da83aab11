#ifndef REDLOCK_NET_SCRIPT_HPP
#define REDLOCK_NET_SCRIPT_HPP

#include "net/connection.hpp"

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

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

// Runs `lua` on `conn`: EVALSHA, resent by the connection as EVAL if the server answers NOSCRIPT
// (see request_options::eval_fallback). Completion and cancellation as connection::async_exec;
// `options.timeout` covers both attempts. `lua` must outlive the operation.
template <class CompletionToken>
auto async_eval(const std::shared_ptr<connection>& conn, const script& lua,
                std::span<const std::string_view> keys, std::span<const std::string_view> args,
                request_options options, CompletionToken&& token) {
  options.eval_fallback = &lua;
  return conn->async_exec_shared(
      std::make_shared<const std::string>(encode_evalsha(lua, keys, args)), options,
      std::forward<CompletionToken>(token));
}

}  // namespace redlock::detail

#endif
