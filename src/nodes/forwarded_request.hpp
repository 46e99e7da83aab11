#ifndef REDLOCK_NODES_FORWARDED_REQUEST_HPP
#define REDLOCK_NODES_FORWARDED_REQUEST_HPP

#include "clock.hpp"
#include "net/multiplexer.hpp"
#include "nodes/request_lanes.hpp"
#include "resp/value.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace redlock::detail {

// What the nodes that stand for several servers (a cluster, a sentinel-managed master) share
// about a request they forward to one of them and may send again elsewhere.

// The bytes of a request: the caller's (kept valid by its sink, which the request holds) or its
// own copy.
struct payload_ref {
  std::string_view bytes;
  shared_payload owned;

  static payload_ref borrowed(std::string_view bytes) { return {bytes, nullptr}; }
  static payload_ref shared(shared_payload owned) {
    const std::string_view bytes = *owned;
    return {bytes, std::move(owned)};
  }
  // For a request that waits (for a topology, a master): the caller's bytes may not live as long.
  payload_ref copied() const {
    return owned ? *this : shared(std::make_shared<const std::string>(bytes));
  }
};

// The answer a node gives in place of a server's: an error reply with `text`.
resp::value error_reply(std::string text);

// The request failed unsent because its server could not be reached: the link was down
// (error::not_connected), or the connect it waited for failed or timed out. Not for a link that
// broke (the command may have run), a closed connection (operation_aborted, written or not), nor
// for failures a new route cannot cure (a refused login).
bool sent_nowhere(boost::system::error_code ec) noexcept;

// Whether a request that failed with `ec` may be sent to another server (the new master after a
// failover): one that was sent nowhere, and a cleanup (a token-checked release, which does no
// harm when it runs twice) whose link broke after it was written. A failover usually breaks
// that link: Sentinel kills the clients of a demoted master.
bool may_send_again(boost::system::error_code ec, const request_options& rules) noexcept;

// Answers `sink` with `ec` and an error reply `text`, posted on `executor`: never inside the call
// that issued the request, nor inside a connection's read loop.
void answer_later(const boost::asio::any_io_executor& executor, sink_ref sink, std::size_t tag,
                  boost::system::error_code ec, std::string text);

// A node's request_lanes with a timer for the deadlines of the requests that wait in them. Not
// thread-safe: the owner's executor only.
template <class Request>
class timed_lanes : public request_lanes<Request> {
 public:
  explicit timed_lanes(const boost::asio::any_io_executor& executor) : timer_(executor) {}

  // Takes out every waiting request whose deadline has passed, handing each to
  // `expired(lane, request)`, and arms the timer to call `on_deadline()` at the next deadline of
  // those left. `on_deadline` must not keep the owner alive (a weak pointer): the owner's end
  // cancels the timer.
  template <class Expired, class OnDeadline>
  void expire(Expired expired, OnDeadline on_deadline) {
    const auto next = request_lanes<Request>::expire(lock_clock::now(), std::move(expired));
    if (!next) return;
    timer_.expires_at(*next);
    timer_.async_wait([on_deadline = std::move(on_deadline)](boost::system::error_code ec) {
      if (!ec) on_deadline();
    });
  }

  void stop() { timer_.cancel(); }

 private:
  lock_timer timer_;
};

}  // namespace redlock::detail

#endif
