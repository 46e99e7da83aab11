#ifndef REDLOCK_NET_SCRIPT_HPP
#define REDLOCK_NET_SCRIPT_HPP

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>

#include "net/connection.hpp"

namespace redlock::detail {

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

namespace eval_detail {

struct eval_op {
  std::shared_ptr<connection> conn;
  const script* lua;
  std::string evalsha_payload;
  request_options options;
  bool fell_back = false;

  template <class Self>
  void operator()(Self& self) {
    // Pass every cancellation type through to the request; it decides what it can honour.
    self.reset_cancellation_state([](boost::asio::cancellation_type t) { return t; });
    conn->async_exec_encoded(evalsha_payload, options, std::move(self));
  }

  template <class Self>
  void operator()(Self& self, boost::system::error_code ec, resp::value reply) {
    // NOSCRIPT: the server's script cache is empty (restart, SCRIPT FLUSH). EVAL both runs the
    // script and caches it, so the next EVALSHA hits again.
    if (!fell_back && !ec && reply.is_error() && reply.error_code_word() == "NOSCRIPT") {
      fell_back = true;
      conn->async_exec_encoded(evalsha_to_eval(*lua, evalsha_payload), options, std::move(self));
      return;
    }
    self.complete(ec, std::move(reply));
  }
};

}  // namespace eval_detail

// Runs `lua` on `conn`: EVALSHA first, EVAL with the source if the server answers NOSCRIPT.
// Completion and cancellation as connection::async_exec; `options.timeout` applies to each of the
// (at most two) requests. `lua` must outlive the operation. Note that the fallback EVAL is queued
// behind requests issued after this one, so it can execute after them.
template <class CompletionToken>
auto async_eval(std::shared_ptr<connection> conn, const script& lua,
                std::span<const std::string_view> keys, std::span<const std::string_view> args,
                request_options options, CompletionToken&& token) {
  auto executor = conn->get_executor();
  return boost::asio::async_compose<CompletionToken, connection::completion_signature>(
      eval_detail::eval_op{std::move(conn), &lua, encode_evalsha(lua, keys, args), options}, token,
      executor);
}

}  // namespace redlock::detail

#endif
