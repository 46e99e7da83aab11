#include "support/tls_probe_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <list>
#include <mutex>
#include <openssl/ssl.h>
#include <thread>

namespace redlock::test {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using asio::ip::tcp;

struct tls_probe_server::state {
  state(mode how, const std::string& cert_file, const std::string& key_file)
      : how(how), acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    if (how == mode::record_server_name) {
      context.use_certificate_chain_file(cert_file);
      context.use_private_key_file(key_file, ssl::context::pem);
    }
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
      {
        const std::lock_guard guard(mutex);
        ++accepted;
      }
      if (how == mode::never_handshake) {
        // Kept open and never read: the client's ClientHello waits for an answer that never comes.
        silent.push_back(std::move(socket));
        continue;
      }
      asio::co_spawn(io, serve(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> serve(tcp::socket socket) {
    ssl::stream<tcp::socket> stream(std::move(socket), context);
    boost::system::error_code ec;
    co_await stream.async_handshake(ssl::stream_base::server,
                                    asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    const char* name = SSL_get_servername(stream.native_handle(), TLSEXT_NAMETYPE_host_name);
    {
      const std::lock_guard guard(mutex);
      names.push_back(name == nullptr ? std::nullopt : std::optional<std::string>(name));
    }
    stream.lowest_layer().close(ec);
  }

  mode how;
  asio::io_context io;
  ssl::context context{ssl::context::tls_server};
  tcp::acceptor acceptor;
  std::list<tcp::socket> silent;
  mutable std::mutex mutex;
  std::vector<std::optional<std::string>> names;
  std::size_t accepted = 0;
  std::thread thread;
};

tls_probe_server::tls_probe_server(mode how, std::string cert_file, std::string key_file)
    : state_(std::make_unique<state>(how, cert_file, key_file)) {
  asio::co_spawn(state_->io, state_->accept_loop(), asio::detached);
  state_->thread = std::thread([s = state_.get()] { s->io.run(); });
}

tls_probe_server::~tls_probe_server() {
  state_->io.stop();
  state_->thread.join();
}

std::uint16_t tls_probe_server::port() const noexcept {
  return state_->acceptor.local_endpoint().port();
}

std::vector<std::optional<std::string>> tls_probe_server::server_names() const {
  const std::lock_guard guard(state_->mutex);
  return state_->names;
}

std::size_t tls_probe_server::accepted() const {
  const std::lock_guard guard(state_->mutex);
  return state_->accepted;
}

}  // namespace redlock::test
