#include "workloads/raw_fanout.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

namespace redlock::bench {
namespace {

struct ssl_ctx_free {
  void operator()(SSL_CTX* p) const noexcept { SSL_CTX_free(p); }
};
struct ssl_free {
  void operator()(SSL* p) const noexcept { SSL_free(p); }
};

// One node: a connected socket, and for TLS the session over it. Closes both.
struct raw_link {
  int fd = -1;
  std::unique_ptr<SSL, ssl_free> tls;

  raw_link() = default;
  raw_link(raw_link&& other) noexcept
      : fd(std::exchange(other.fd, -1)), tls(std::move(other.tls)) {}
  raw_link& operator=(raw_link&&) = delete;
  ~raw_link() {
    if (fd >= 0) ::close(fd);
  }

  bool send_all(const std::string& bytes) const {
    if (tls) return SSL_write(tls.get(), bytes.data(), static_cast<int>(bytes.size())) > 0;
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const auto n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  // Reads what one read gives; a SET's "+OK\r\n" always comes whole in one TCP segment or record.
  long receive(char* into, std::size_t size) const {
    if (tls) return SSL_read(tls.get(), into, static_cast<int>(size));
    return ::recv(fd, into, size, 0);
  }

  // Whether a reply is already decrypted and waiting (poll cannot see it).
  bool has_buffered() const { return tls && SSL_pending(tls.get()) > 0; }
};

}  // namespace

int connect_raw_tcp(const redlock::node_config& node, std::string& error) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(node.port);
  if (::getaddrinfo(node.host.c_str(), port.c_str(), &hints, &found) != 0 || !found) {
    error = "cannot resolve " + node.host;
    return -1;
  }
  int fd = -1;
  for (auto* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    error = "cannot connect to " + node.host + ":" + port;
    return -1;
  }
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  return fd;
}

raw_fanout_result measure_raw_fanout(const std::vector<redlock::node_config>& nodes,
                                     const std::string& key_prefix, int iterations, int warmup) {
  raw_fanout_result result;
  std::unique_ptr<SSL_CTX, ssl_ctx_free> context(SSL_CTX_new(TLS_client_method()));
  std::vector<raw_link> links;
  for (const auto& node : nodes) {
    raw_link link;
    link.fd = connect_raw_tcp(node, result.error);
    if (link.fd < 0) return result;
    if (node.tls.enabled) {
      if (!node.tls.ca_file.empty())
        SSL_CTX_load_verify_locations(context.get(), node.tls.ca_file.c_str(), nullptr);
      SSL_CTX_set_verify(context.get(), SSL_VERIFY_PEER, nullptr);
      link.tls.reset(SSL_new(context.get()));
      SSL_set_fd(link.tls.get(), link.fd);
      SSL_set_tlsext_host_name(link.tls.get(), node.host.c_str());
      SSL_set1_host(link.tls.get(), node.host.c_str());
      if (SSL_connect(link.tls.get()) != 1) {
        result.error =
            "TLS handshake with " + node.host + ":" + std::to_string(node.port) + " failed";
        return result;
      }
    }
    links.push_back(std::move(link));
  }

  const std::size_t majority = links.size() / 2 + 1;
  std::vector<pollfd> waiting;
  std::vector<std::size_t> waiting_link;
  std::vector<bool> answered(links.size());
  char reply[512];
  for (int i = 0; i < iterations + warmup; ++i) {
    const std::string key = key_prefix + std::to_string(i);
    const std::string set = "*5\r\n$3\r\nSET\r\n$" + std::to_string(key.size()) + "\r\n" + key +
                            "\r\n$5\r\ntoken\r\n$2\r\nPX\r\n$5\r\n10000\r\n";
    const auto start = std::chrono::steady_clock::now();
    for (auto& link : links) {
      if (!link.send_all(set)) {
        result.error = "send failed";
        return result;
      }
    }
    std::fill(answered.begin(), answered.end(), false);
    std::size_t replies = 0;
    // Every reply is read, also those after the majority, so that none is left for the next round.
    while (replies < links.size()) {
      waiting.clear();
      waiting_link.clear();
      bool buffered = false;
      for (std::size_t n = 0; n < links.size(); ++n) {
        if (answered[n]) continue;
        buffered = buffered || links[n].has_buffered();
        waiting.push_back({links[n].fd, POLLIN, 0});
        waiting_link.push_back(n);
      }
      if (!buffered && ::poll(waiting.data(), waiting.size(), 5'000) <= 0) {
        result.error = "no reply within 5 s";
        return result;
      }
      for (std::size_t w = 0; w < waiting.size(); ++w) {
        const auto& link = links[waiting_link[w]];
        if (!(waiting[w].revents & POLLIN) && !link.has_buffered()) continue;
        if (link.receive(reply, sizeof reply) <= 0) {
          result.error = "read failed";
          return result;
        }
        answered[waiting_link[w]] = true;
        if (++replies == majority && i >= warmup)
          result.decided_us.push_back(
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                  .count());
      }
    }
  }
  return result;
}

}  // namespace redlock::bench
