#include "support/free_port.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <system_error>
#include <unistd.h>
#include <utility>

namespace redlock::test {
namespace {

// Ports whose lock another process holds are skipped; this many in a row means something other
// than bad luck (a directory nobody can lock, say).
constexpr int max_picks = 200;

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), fmt::format("reserved_port: {}", what));
}

std::uint16_t kernel_chosen_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno(errno, "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int saved = errno;
    ::close(fd);
    throw_errno(saved, "bind 127.0.0.1:0");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Shared by every user and build tree of the machine; world-writable with the sticky bit, as
// /tmp is, so that tests run as different users do not lock each other out of it.
const std::filesystem::path& locks_directory() {
  static const std::filesystem::path dir = [] {
    auto path = std::filesystem::temp_directory_path() / "redlock-test-ports";
    std::error_code ec;
    if (std::filesystem::create_directory(path, ec)) {
      std::filesystem::permissions(
          path, std::filesystem::perms::all | std::filesystem::perms::sticky_bit, ec);
    }
    return path;
  }();
  return dir;
}

}  // namespace

std::optional<reserved_port> reserved_port::reserve(std::uint16_t port) {
  const auto file = locks_directory() / fmt::format("{}.lock", port);
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) throw_errno(errno, fmt::format("open {}", file.string()));
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return reserved_port(port, fd);
    if (errno != EINTR) break;
  }
  const int saved = errno;
  ::close(fd);
  if (saved != EWOULDBLOCK) throw_errno(saved, fmt::format("flock {}", file.string()));
  return std::nullopt;
}

reserved_port reserved_port::pick() {
  for (int attempt = 0; attempt < max_picks; ++attempt) {
    if (auto reserved = reserve(kernel_chosen_port())) return std::move(*reserved);
  }
  throw std::system_error(
      std::make_error_code(std::errc::address_in_use),
      fmt::format("reserved_port: {} picked ports were all reserved elsewhere", max_picks));
}

reserved_port::reserved_port(reserved_port&& other) noexcept
    : port_(std::exchange(other.port_, 0)), lock_fd_(std::exchange(other.lock_fd_, -1)) {}

reserved_port& reserved_port::operator=(reserved_port&& other) noexcept {
  if (this != &other) {
    release();
    port_ = std::exchange(other.port_, 0);
    lock_fd_ = std::exchange(other.lock_fd_, -1);
  }
  return *this;
}

reserved_port::~reserved_port() {
  release();
}

void reserved_port::release() noexcept {
  // Closing the only descriptor of the open file drops the flock. The file stays: removing it
  // could let two processes lock two different files of the same name.
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
  port_ = 0;
}

}  // namespace redlock::test
