#include "workloads/server_bound.hpp"

#include "lock/scripts.hpp"
#include "resp/encoder.hpp"
#include "resp/script.hpp"
#include "workloads/raw_fanout.hpp"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <vector>

namespace redlock::bench {
namespace {

namespace rd = redlock::detail;

class raw_socket {
 public:
  // A reply that does not come within 10 s fails the read instead of hanging the bench.
  explicit raw_socket(int fd) : fd_(fd) {
    const timeval limit{.tv_sec = 10, .tv_usec = 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  }
  raw_socket(const raw_socket&) = delete;
  raw_socket& operator=(const raw_socket&) = delete;
  ~raw_socket() {
    if (fd_ >= 0) ::close(fd_);
  }

  bool send_all(std::string_view bytes) const {
    while (!bytes.empty()) {
      const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Reads until `count` more replies have come. Every reply these commands get is one line (+OK,
  // $-1, :1, or an -error), so a reply is a line feed; `error` keeps the first error line. Lines
  // read past `count` (the next batch's, already sent) are kept for the next call.
  bool read_lines(std::size_t count, std::string& error) {
    while (lines_ahead_ < count) {
      const auto n = ::recv(fd_, buffer_, sizeof buffer_, 0);
      if (n <= 0) {
        error = n == 0 ? "the server closed the connection"
                       : "no reply within 10 s, or the read failed";
        return false;
      }
      for (long i = 0; i < n; ++i) {
        const char c = buffer_[i];
        if (at_line_start_ && c == '-' && first_error_.empty()) in_error_line_ = true;
        if (in_error_line_ && c != '\r' && c != '\n') first_error_ += c;
        at_line_start_ = c == '\n';
        if (c == '\n') {
          in_error_line_ = false;
          ++lines_ahead_;
        }
      }
    }
    lines_ahead_ -= count;
    if (!first_error_.empty()) error = "the server answered " + first_error_;
    return error.empty();
  }

 private:
  int fd_;
  char buffer_[64 * 1024];
  std::size_t lines_ahead_ = 0;  // replies read but not yet asked for
  bool at_line_start_ = true;
  bool in_error_line_ = false;
  std::string first_error_;
};

// Sends `commands` in batches of `depth`, each in one write, and keeps the server busy as
// redis-benchmark's many connections do: the next batch is sent before the replies to the last
// one are read, so that the server never waits for the client. Seconds taken, or a negative number
// on failure. (Two batches of these commands and their replies fit the sockets' buffers, so
// neither side blocks the other.)
double run_pipelined(raw_socket& socket, const std::vector<std::string>& commands,
                     std::size_t depth, std::string& error) {
  std::vector<std::string> batches;
  for (std::size_t first = 0; first < commands.size(); first += depth) {
    std::string& batch = batches.emplace_back();
    for (std::size_t i = first; i < std::min(commands.size(), first + depth); ++i)
      batch += commands[i];
  }
  const auto replies_in = [&](std::size_t batch) {
    return std::min(depth, commands.size() - batch * depth);
  };
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t batch = 0; batch < batches.size(); ++batch) {
    if (!socket.send_all(batches[batch])) {
      error = "send failed";
      return -1;
    }
    if (batch > 0 && !socket.read_lines(replies_in(batch - 1), error)) return -1;
  }
  if (!batches.empty() && !socket.read_lines(replies_in(batches.size() - 1), error)) return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

server_bound_result measure_server_bound(const redlock::node_config& node,
                                         const std::string& key_prefix,
                                         const std::string& release_channel, std::uint64_t pairs,
                                         std::size_t depth) {
  server_bound_result result;
  const int fd = connect_raw_tcp(node, result.error);
  if (fd < 0) return result;
  raw_socket socket(fd);
  std::string load;
  redlock::resp::encode_command(load, {"SCRIPT", "LOAD", rd::release_script().source()});
  if (!socket.send_all(load)) {
    result.error = "send failed";
    return result;
  }
  // SCRIPT LOAD answers the SHA-1 as a bulk string: two lines.
  if (!socket.read_lines(2, result.error)) return result;

  // Encoded before the clock starts, as redis-benchmark does.
  const std::string token = "server-bound-token";
  std::vector<std::string> sets, releases;
  sets.reserve(pairs);
  releases.reserve(pairs);
  for (std::uint64_t i = 0; i < pairs; ++i) {
    const std::string key = key_prefix + std::to_string(i);
    redlock::resp::encode_command(sets.emplace_back(), {"SET", key, token, "NX", "PX", "10000"});
    const std::string_view keys[] = {key};
    const std::string_view args[] = {token, release_channel};
    releases.push_back(rd::encode_evalsha(rd::release_script(), keys, args));
  }
  const double set_seconds = run_pipelined(socket, sets, depth, result.error);
  if (set_seconds <= 0) return result;
  const double release_seconds = run_pipelined(socket, releases, depth, result.error);
  if (release_seconds <= 0) return result;
  const auto count = static_cast<double>(pairs);
  result.set_per_s = count / set_seconds;
  result.evalsha_per_s = count / release_seconds;
  result.pairs_per_s = count / (set_seconds + release_seconds);
  return result;
}

}  // namespace redlock::bench
