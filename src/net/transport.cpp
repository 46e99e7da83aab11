#include "net/transport.hpp"

#include "net/use_tuple.hpp"
#include "redlock/error.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <string>

namespace redlock::detail {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using boost::system::error_code;

connect_failure tls_setup_failure(std::string what) {
  return connect_failure{make_error_code(error::tls_handshake_failed), std::move(what)};
}

// connect()'s stage while it waits for the server's side of the TLS handshake.
constexpr std::string_view tls_handshake_stage = "performing the TLS handshake";

bool is_ip_literal(const std::string& name) {
  error_code ec;
  (void)asio::ip::make_address(name, ec);
  return !ec;
}

}  // namespace

std::string_view transport::stage_text(std::string_view stage) const noexcept {
  // A plain Redis port never answers a ClientHello (it waits for the end of an inline command),
  // so a TLS handshake without an answer asks about that, in every text it causes: a connect
  // timeout, a request that timed out behind it, one skipped behind that one.
  if (node_.tls.enabled && stage == tls_handshake_stage) {
    return "performing the TLS handshake (no TLS answer: is it a plain redis:// port?)";
  }
  return stage;
}

std::string transport::tls_reason(const error_code& ec) {
  if (ec == ssl::error::stream_truncated) return "the server closed the TLS connection";
  if (ec.category() != asio::error::get_ssl_category()) return ec.message();
  const auto reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
  switch (reason) {
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return "the server requires a client certificate (" + ec.message() + ")";
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_UNKNOWN_PROTOCOL:
    case SSL_R_HTTP_REQUEST:
      return "the server does not speak TLS: is it a plain redis:// port? (" + ec.message() + ")";
    default:
      return ec.message();
  }
}

asio::awaitable<connect_failure> transport::connect(std::string_view& stage) {
  close();
  verified_name_.clear();
  if (node_.tls.enabled) co_return co_await connect_tls(stage);
  // (Not a conditional expression with a co_await in each branch: GCC 12 destroys its result
  // twice.)
  connect_failure failure;
  if (node_.unix_path.empty()) {
    failure = co_await connect_tcp(stream_.emplace<tcp_socket>(executor_), stage);
  } else {
    failure = co_await connect_local(stage);
  }
  if (failure) co_return failure;
  // write_now() must never block the event loop. Asynchronous operations do not depend on it.
  error_code mode_error;
  visit_stream([&](auto& stream) { stream.lowest_layer().non_blocking(true, mode_error); });
  if (mode_error) {
    co_return connect_failure{
        mode_error, fmt::format("cannot make the socket non-blocking: {}", mode_error.message())};
  }
  co_return connect_failure{};
}

std::size_t transport::write_now(asio::const_buffer bytes, error_code& ec) {
  return visit_stream([&](auto& stream) -> std::size_t {
    if constexpr (requires { stream.next_layer(); }) {
      ec = asio::error::would_block;
      return 0;
    } else {
      return stream.write_some(bytes, ec);
    }
  });
}

asio::awaitable<connect_failure> transport::connect_tcp(tcp_socket& socket,
                                                        std::string_view& stage) {
  stage = "resolving";
  asio::ip::tcp::resolver resolver(executor_);
  auto [resolve_error, endpoints] = co_await resolver.async_resolve(
      node_.host, std::to_string(node_.port), asio::ip::resolver_base::numeric_service, use_tuple);
  if (resolve_error) {
    co_return connect_failure{resolve_error,
                              fmt::format("connect failed: cannot resolve \"{}\": {}", node_.host,
                                          resolve_error.message())};
  }

  stage = "connecting";
  auto [connect_error, endpoint] = co_await asio::async_connect(socket, endpoints, use_tuple);
  if (connect_error) {
    co_return connect_failure{connect_error,
                              fmt::format("connect failed: {}", connect_error.message())};
  }

  // Commands are small and latency-bound; Nagle would hold a pipelined batch back for the
  // previous batch's ACK.
  error_code option_error;
  socket.set_option(asio::ip::tcp::no_delay(true), option_error);
  if (option_error) {
    co_return connect_failure{option_error,
                              fmt::format("cannot set TCP_NODELAY: {}", option_error.message())};
  }
  co_return connect_failure{};
}

asio::awaitable<connect_failure> transport::connect_local(std::string_view& stage) {
  stage = "connecting";
  auto& socket = stream_.emplace<local_socket>(executor_);
  auto [ec] = co_await socket.async_connect(asio::local::stream_protocol::endpoint(node_.unix_path),
                                            use_tuple);
  if (ec) {
    co_return connect_failure{
        ec, fmt::format("connect to the Unix socket {} failed: {}", node_.unix_path, ec.message())};
  }
  co_return connect_failure{};
}

asio::awaitable<connect_failure> transport::connect_tls(std::string_view& stage) {
  stage = "setting up TLS";
  const tls_options& tls = node_.tls;

  // A new context per connect: CA, certificate and key files are read again, so files renewed on
  // disk are used by the next connection without restarting the process.
  auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  error_code ec;
  if (tls.verify_peer) {
    if (tls.ca_file.empty() && tls.ca_dir.empty()) {
      context->set_default_verify_paths(ec);
      if (ec)
        co_return tls_setup_failure("cannot use the system's CA certificates: " + ec.message());
    }
    if (!tls.ca_file.empty()) {
      context->load_verify_file(tls.ca_file, ec);
      if (ec) {
        co_return tls_setup_failure(
            fmt::format("cannot load the CA file {}: {}", tls.ca_file, ec.message()));
      }
    }
    if (!tls.ca_dir.empty()) {
      context->add_verify_path(tls.ca_dir, ec);
      if (ec) {
        co_return tls_setup_failure(
            fmt::format("cannot use the CA directory {}: {}", tls.ca_dir, ec.message()));
      }
    }
  }
  if (!tls.cert_file.empty()) {
    context->use_certificate_chain_file(tls.cert_file, ec);
    if (ec) {
      co_return tls_setup_failure(
          fmt::format("cannot load the client certificate {}: {}", tls.cert_file, ec.message()));
    }
    context->use_private_key_file(tls.key_file, ssl::context::pem, ec);
    if (ec) {
      co_return tls_setup_failure(
          fmt::format("cannot load the client key {}: {}", tls.key_file, ec.message()));
    }
  }

  auto& stream = stream_.emplace<tls_stream>(executor_, *context);
  // The old context, if any, goes only now: its stream was destroyed by the emplace above.
  tls_context_ = std::move(context);

  const std::string& name = tls.server_name.empty() ? node_.host : tls.server_name;
  const bool ip_literal = is_ip_literal(name);
  SSL* session = stream.native_handle();
  // RFC 6066: SNI carries host names only, never an address.
  if (!ip_literal && SSL_set_tlsext_host_name(session, name.c_str()) != 1) {
    co_return tls_setup_failure(fmt::format("cannot send \"{}\" as the server name (SNI)", name));
  }
  if (tls.verify_peer) {
    stream.set_verify_mode(ssl::verify_peer);
    // OpenSSL checks the name during the handshake, and SSL_get_verify_result says which check
    // failed, so that the message can tell a wrong CA from a wrong name or an expired certificate.
    X509_VERIFY_PARAM* param = SSL_get0_param(session);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const int named = ip_literal ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                                 : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    if (named != 1) co_return tls_setup_failure(fmt::format("cannot verify against \"{}\"", name));
  } else {
    stream.set_verify_mode(ssl::verify_none);
  }

  if (auto failure = co_await connect_tcp(stream.next_layer(), stage)) co_return failure;

  stage = tls_handshake_stage;
  auto [handshake_error] = co_await stream.async_handshake(ssl::stream_base::client, use_tuple);
  if (handshake_error) {
    const long verdict = SSL_get_verify_result(session);
    if (tls.verify_peer && verdict != X509_V_OK) {
      co_return connect_failure{
          make_error_code(error::certificate_rejected),
          fmt::format("the server's TLS certificate was rejected (verified against \"{}\"): {}",
                      name, X509_verify_cert_error_string(verdict))};
    }
    if (transport::is_tls_protocol_error(handshake_error)) {
      co_return tls_setup_failure("TLS handshake failed: " +
                                  transport::tls_reason(handshake_error));
    }
    // The socket's own errors (end of file, reset) can be passing trouble: not made permanent.
    co_return connect_failure{
        handshake_error,
        fmt::format(
            "the connection ended in the TLS handshake: {}{}", handshake_error.message(),
            handshake_error == asio::error::eof || handshake_error == ssl::error::stream_truncated
                ? " (is it a TLS port?)"
                : "")};
  }
  if (tls.verify_peer) verified_name_ = name;
  co_return connect_failure{};
}

bool transport::is_tls_error(const error_code& ec) noexcept {
  return ec.category() == asio::error::get_ssl_category() ||
         ec.category() == ssl::error::get_stream_category();
}

bool transport::is_tls_protocol_error(const error_code& ec) noexcept {
  return ec.category() == asio::error::get_ssl_category();
}

std::string transport::describe(const error_code& ec) const {
  return is_tls_error(ec) ? "TLS: " + tls_reason(ec) : ec.message();
}

bool transport::is_open() const noexcept {
  return std::visit([](const auto& stream) { return stream.lowest_layer().is_open(); }, stream_);
}

std::string transport::peer() const {
  if (!is_open()) return {};
  if (std::holds_alternative<local_socket>(stream_)) return "unix:" + node_.unix_path;
  const auto& socket = std::holds_alternative<tls_stream>(stream_)
                           ? std::get<tls_stream>(stream_).next_layer()
                           : std::get<tcp_socket>(stream_);
  error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return {};
  auto address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  const std::string host = address.is_loopback() ? "loopback" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

void transport::close() noexcept {
  std::visit(
      [](auto& stream) {
        error_code ignored;
        auto& socket = stream.lowest_layer();
        if constexpr (requires { socket.shutdown(asio::socket_base::shutdown_both, ignored); }) {
          socket.shutdown(asio::socket_base::shutdown_both, ignored);
        }
        socket.close(ignored);
      },
      stream_);
}

}  // namespace redlock::detail
