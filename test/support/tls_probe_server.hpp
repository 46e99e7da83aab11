#ifndef REDLOCK_TEST_SUPPORT_TLS_PROBE_SERVER_HPP
#define REDLOCK_TEST_SUPPORT_TLS_PROBE_SERVER_HPP

#include "redlock/node_config.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace redlock::test {

// A TLS server on a free loopback port that only watches clients arrive, on a thread of its own.
// In `record_server_name` mode it completes each TLS handshake with the given certificate, notes
// the server name the client sent (SNI) and closes the connection; in `never_handshake` mode it
// accepts TCP connections and then says nothing, so a client's TLS handshake never completes.
class tls_probe_server {
 public:
  enum class mode { record_server_name, never_handshake };

  tls_probe_server(mode how, std::string cert_file = {}, std::string key_file = {});
  ~tls_probe_server();  // stops the thread and closes every connection
  tls_probe_server(const tls_probe_server&) = delete;
  tls_probe_server& operator=(const tls_probe_server&) = delete;

  std::uint16_t port() const noexcept;

  // One entry per completed handshake, in order: the SNI host name, or nullopt when the client
  // sent none.
  std::vector<std::optional<std::string>> server_names() const;
  // TCP connections accepted so far.
  std::size_t accepted() const;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace redlock::test

#endif
