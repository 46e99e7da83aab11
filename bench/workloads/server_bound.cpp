#include "workloads/server_bound.hpp"

#include "lock/scripts.hpp"
#include "resp/encoder.hpp"
#include "resp/script.hpp"
#include "workloads/raw_fanout.hpp"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace redlock::bench {
namespace {

namespace rd = redlock::detail;

class raw_socket {
 public:
  explicit raw_socket(int fd) : fd_(fd) {}
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

  // Reads until `count` replies have come. Every reply these commands get is one line (+OK, $-1,
  // :1, or an -error), so a reply is a line feed; `error` keeps the first error line.
  bool read_lines(std::size_t count, std::string& error) {
    while (count > 0) {
      const auto n = ::recv(fd_, buffer_, sizeof buffer_, 0);
      if (n <= 0) {
        error = "the server closed the connection or the read failed";
        return false;
      }
      for (long i = 0; i < n; ++i) {
        const char c = buffer_[i];
        if (at_line_start_ && c == '-' && error.empty()) error_starts_ = true;
        if (error_starts_) first_error_ += c;
        at_line_start_ = c == '\n';
        if (c == '\n') {
          if (error_starts_) {
            error = "the server answered " + first_error_;
            error_starts_ = false;
          }
          --count;
        }
      }
    }
    return error.empty();
  }

 private:
  int fd_;
  char buffer_[64 * 1024];
  bool at_line_start_ = true;
  bool error_starts_ = false;
  std::string first_error_;
};

// Sends `commands` `depth` at a time, each batch in one write, and waits for a batch's replies
// before the next: seconds taken, or a negative number on failure.
double run_pipelined(raw_socket& socket, const std::vector<std::string>& commands,
                     std::size_t depth, std::string& error) {
  std::string batch;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t first = 0; first < commands.size(); first += depth) {
    const std::size_t end = std::min(commands.size(), first + depth);
    batch.clear();
    for (std::size_t i = first; i < end; ++i)
      batch += commands[i];
    if (!socket.send_all(batch)) {
      error = "send failed";
      return -1;
    }
    if (!socket.read_lines(end - first, error)) return -1;
  }
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
