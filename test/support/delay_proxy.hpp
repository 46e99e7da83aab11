#ifndef REDLOCK_TEST_SUPPORT_DELAY_PROXY_HPP
#define REDLOCK_TEST_SUPPORT_DELAY_PROXY_HPP

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "redlock/node_config.hpp"

namespace redlock::test {

// A TCP proxy that adds latency: it listens on a free 127.0.0.1 port and forwards every accepted
// connection to 127.0.0.1:target_port. Each chunk of data, in either direction, is held until its
// arrival time plus the current delay and then forwarded, so the order of the bytes is kept and a
// request/reply round trip gains twice the delay.
//
// It runs on its own thread with its own io_context, so it keeps forwarding while the test's
// thread blocks. set_delay() may be called from any thread at any time, also while connections
// are open: chunks still held are re-timed against the new delay.
//
// The destructor closes the listener and every connection and joins the thread.
class delay_proxy {
 public:
  explicit delay_proxy(std::uint16_t target_port,
                       std::chrono::milliseconds delay = std::chrono::milliseconds(0));
  ~delay_proxy();
  delay_proxy(const delay_proxy&) = delete;
  delay_proxy& operator=(const delay_proxy&) = delete;

  // The port the proxy listens on.
  std::uint16_t port() const noexcept;

  // 127.0.0.1 and port(): the node as a client should see it.
  node_config config() const;

  void set_delay(std::chrono::milliseconds delay);
  std::chrono::milliseconds delay() const noexcept;

 private:
  struct state;
  std::unique_ptr<state> state_;
  std::thread thread_;
};

}  // namespace redlock::test

#endif
