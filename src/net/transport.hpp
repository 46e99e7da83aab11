#ifndef REDLOCK_NET_TRANSPORT_HPP
#define REDLOCK_NET_TRANSPORT_HPP

#include "redlock/node_config.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace redlock::detail {

// Why a connect failed: the code callers see, and a sentence for diagnostics that names the cause
// (the resolver's, the socket's or OpenSSL's words, the certificate check that failed).
struct connect_failure {
  boost::system::error_code code;
  std::string what;

  explicit operator bool() const noexcept { return static_cast<bool>(code); }
};

// The byte stream to one node: plain TCP, TLS over TCP (rediss://) or a Unix-domain socket
// (unix://). Everything that depends on how bytes travel lives here, so the pipelining in
// connection.cpp only ever sees connect / write / read_some / close.
//
// Every connect builds a new stream: a TLS session (and its SSL context, so renewed certificate
// and CA files are read again) never outlives the connection it was made for. connect() must not
// be called while a read or write is pending; the connection's run loop guarantees that (its loops
// have ended before it reconnects).
class transport {
 public:
  transport(boost::asio::any_io_executor executor, node_config node)
      : executor_(std::move(executor)), node_(std::move(node)) {}

  // Resolves and connects (TCP: to the first address that accepts, with TCP_NODELAY), then for
  // TLS sends SNI, performs the handshake and verifies the peer. No timeout of its own: the
  // caller bounds it (and cancels it through per-operation cancellation). `stage` is kept up to
  // date ("resolving", "connecting", "TLS handshake") for the caller's timeout message.
  boost::asio::awaitable<connect_failure> connect(std::string_view& stage);

  // A stage of connect() as the texts of a stall there name it (a connect timeout, the requests
  // it held up): the stage, with what a stall there may mean.
  std::string_view stage_text(std::string_view stage) const noexcept;

  // Writes all of `bytes`. Completion: void(error_code, std::size_t).
  template <class CompletionToken>
  auto async_write(boost::asio::const_buffer bytes, CompletionToken&& token) {
    return visit_stream([&](auto& stream) {
      return boost::asio::async_write(stream, bytes, std::forward<CompletionToken>(token));
    });
  }

  // Writes what the kernel takes at once, without waiting, over plain TCP and Unix sockets
  // (which connect() leaves in non-blocking mode): the bytes written, possibly fewer than
  // `bytes`, or 0 with `ec` set. `ec` is would_block when nothing can be written now, and always
  // for TLS, whose records are written only by async_write. Must not be called while an
  // async_write is pending.
  std::size_t write_now(boost::asio::const_buffer bytes, boost::system::error_code& ec);

  // Reads what is available, at least one byte. Completion: void(error_code, std::size_t).
  template <class CompletionToken>
  auto async_read_some(boost::asio::mutable_buffer into, CompletionToken&& token) {
    return visit_stream([&](auto& stream) {
      return stream.async_read_some(into, std::forward<CompletionToken>(token));
    });
  }

  // Idempotent; pending operations complete with operation_aborted. A TLS session is not shut
  // down politely (no close_notify round trip): the connection is being abandoned, and Redis does
  // not need it.
  void close() noexcept;

  bool is_open() const noexcept;

  // The connected peer as "address:port", with IPv4-mapped IPv6 addresses in IPv4 form and every
  // loopback address (127.0.0.0/8, ::1) written "loopback", so that two names of one local server
  // read the same; "unix:PATH" for a Unix socket. Empty when not connected.
  std::string peer() const;

  // For TLS nodes: the name the peer's certificate was verified against ("" when verification is
  // off or the node is not TLS).
  const std::string& verified_name() const noexcept { return verified_name_; }

  // Whether `ec` comes from the TLS layer (OpenSSL, or a TLS stream cut short).
  static bool is_tls_error(const boost::system::error_code& ec) noexcept;
  // Whether `ec` is OpenSSL's: an alert, a protocol mismatch, a certificate problem. Not a stream
  // cut short (stream_truncated), which, like an end of file, may be a server going away.
  static bool is_tls_protocol_error(const boost::system::error_code& ec) noexcept;

  // OpenSSL's reason for a TLS error, in words a user can act on where there are better ones.
  static std::string tls_reason(const boost::system::error_code& ec);

  // What a read or write error means on this transport, for diagnostics: OpenSSL's reason for a
  // TLS error (e.g. "the server requires a client certificate"), the error's message otherwise.
  std::string describe(const boost::system::error_code& ec) const;

 private:
  using tcp_socket = boost::asio::ip::tcp::socket;
  using tls_stream = boost::asio::ssl::stream<tcp_socket>;
  using local_socket = boost::asio::local::stream_protocol::socket;

  // `stream` is the one the node's scheme asks for once connect() has begun; until then it holds a
  // plain TCP socket that is never opened, so reads and writes fail with bad_descriptor.
  template <class F>
  decltype(auto) visit_stream(F&& f) {
    switch (stream_.index()) {
      case 1:
        return f(std::get<1>(stream_));
      case 2:
        return f(std::get<2>(stream_));
      default:
        return f(std::get<0>(stream_));
    }
  }

  boost::asio::awaitable<connect_failure> connect_tcp(tcp_socket& socket, std::string_view& stage);
  boost::asio::awaitable<connect_failure> connect_tls(std::string_view& stage);
  boost::asio::awaitable<connect_failure> connect_local(std::string_view& stage);

  boost::asio::any_io_executor executor_;
  node_config node_;
  // The context of the current TLS stream, declared first so that it outlives the stream, which
  // refers to it.
  std::unique_ptr<boost::asio::ssl::context> tls_context_;
  std::variant<tcp_socket, tls_stream, local_socket> stream_{tcp_socket(executor_)};
  std::string verified_name_;
};

}  // namespace redlock::detail

#endif
