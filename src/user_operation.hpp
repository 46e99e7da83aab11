#ifndef REDLOCK_USER_OPERATION_HPP
#define REDLOCK_USER_OPERATION_HPP

#include "completion.hpp"
#include "lock/operation_registry.hpp"
#include "redlock/detail/initiate.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
#include <utility>

namespace redlock::detail {

// A caller's pending void(error_code) operation that the client can end: cancellation by the
// caller and client shutdown both complete it with operation_aborted. The work behind it (requests
// already queued on the nodes) goes on either way; only the caller stops waiting.
class user_operation : public abortable, public std::enable_shared_from_this<user_operation> {
 public:
  static constexpr auto any_cancellation = boost::asio::cancellation_type::terminal |
                                           boost::asio::cancellation_type::partial |
                                           boost::asio::cancellation_type::total;

  // `registry`: the client's, which a shutdown ends it through (kept alive while it runs);
  // `executor`: the client's. `honoured`: the cancellation types that end the operation; others
  // are ignored.
  user_operation(std::shared_ptr<operation_registry> registry,
                 const boost::asio::any_io_executor& executor, void_caller&& caller,
                 boost::asio::cancellation_type honoured = any_cancellation)
      : registry_(std::move(registry)),
        done_(std::move(caller.handler), executor, caller.on_client_executor),
        honoured_(honoured) {}
  virtual ~user_operation() = default;

  // Registers with the client and the caller's cancellation slot.
  void start() {
    registry_->track(this);
    done_.on_cancel([weak = weak_from_this()](boost::asio::cancellation_type type) {
      auto self = weak.lock();
      if (self && (type & self->honoured_) != boost::asio::cancellation_type::none) {
        self->finish(boost::asio::error::operation_aborted);
      }
    });
  }

  void abort() override { finish(boost::asio::error::operation_aborted); }

  // The caller's handler is posted (see completion), so this may be called from anywhere.
  void finish(boost::system::error_code ec) {
    if (done_.done()) return;
    registry_->untrack(this);
    done_.complete(ec);
    on_finished();
  }

  bool done() const noexcept { return done_.done(); }

 protected:
  // Called once, right after the caller's handler has been handed over.
  virtual void on_finished() {}

 private:
  std::shared_ptr<operation_registry> registry_;
  completion<boost::system::error_code> done_;
  boost::asio::cancellation_type honoured_;
};

// Completes `handler` with `ec` when there is no lease state to run on (a default-constructed
// lease knows no I/O executor): hops through the system executor into the handler's own, so that
// the handler never runs inside the initiating function.
inline void complete_without_state(void_handler handler, boost::system::error_code ec) {
  auto executor = boost::asio::get_associated_executor(handler);
  boost::asio::post(
      boost::asio::system_executor(),
      boost::asio::bind_executor(executor, [handler = void_handler(std::move(handler)),
                                            ec]() mutable { std::move(handler)(ec); }));
}

}  // namespace redlock::detail

#endif
