#ifndef REDLOCK_COMPLETION_HPP
#define REDLOCK_COMPLETION_HPP

#include "block_cache.hpp"

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <optional>
#include <type_traits>
#include <utility>

namespace redlock::detail {

// The io_context's own executor that `executor` holds (work untracked), if that is what it holds:
// not a strand, not a user's executor. Finding out compares type names: callers that post through
// one executor often ask once and keep the answer (post_through's overload below).
inline std::optional<boost::asio::io_context::executor_type> io_context_executor_of(
    const boost::asio::any_io_executor& executor) {
  namespace asio = boost::asio;
  using plain = asio::io_context::executor_type;
  using tracked =
      decltype(asio::prefer(std::declval<plain>(), asio::execution::outstanding_work.tracked));
  if (const auto* io = executor.target<tracked>())
    return asio::prefer(*io, asio::execution::outstanding_work.untracked);
  if (const auto* io = executor.target<plain>()) return *io;
  return std::nullopt;
}

// asio::post through `executor`, or through `io` when that is the io_context's executor that
// `executor` holds (io_context_executor_of): a post through the type-erased executor wraps the
// function once more and allocates twice, ignoring the function's associated allocator; through
// the concrete one it allocates once, with that allocator.
//
// Through the io_context's executor the function is queued as it is, not wrapped in the work
// dispatcher of asio::post (which tracks outstanding work for the function's associated executor
// and dispatches it once more when it runs): the function runs on that io_context, its associated
// executor is that io_context's (or none), and the queued operation itself keeps run() from
// returning until it has run.
template <class Function>
void post_through(const boost::asio::any_io_executor& executor,
                  const std::optional<boost::asio::io_context::executor_type>& io,
                  Function&& function) {
  namespace asio = boost::asio;
  if (io) {
    asio::prefer(asio::require(*io, asio::execution::blocking.never),
                 asio::execution::allocator(asio::get_associated_allocator(function)))
        .execute(std::forward<Function>(function));
  } else {
    asio::post(executor, std::forward<Function>(function));
  }
}

template <class Function>
void post_through(const boost::asio::any_io_executor& executor, Function&& function) {
  post_through(executor, io_context_executor_of(executor), std::forward<Function>(function));
}

// The caller's handler of one pending operation, completed exactly once.
//
// Completion is always posted, never run inline: the caller's handler is user code, and the
// library completes operations from inside its own machinery (a connection's read loop, a vote
// being decided, a cancellation handler). Run inline, a handler that throws would unwind through
// that machinery and end a connection's loop with the exception lost; posted, the exception comes
// out of io_context::run() as Asio users expect. Posting also keeps the Asio rules that an
// operation never completes inside its initiating function, and that completing (which clears
// the caller's cancellation slot) never destroys a cancellation handler that is running.
template <class... Args>
class completion {
 public:
  using handler_type = boost::asio::any_completion_handler<void(Args...)>;

  // Boost 1.81's any_completion_handler move-assignment recurses without end; the handler is only
  // ever move-constructed.
  //
  // `on_io_executor`: the handler's associated executor is `io_executor` itself (see
  // erase_handler), so it completes through that, and the work it keeps is counted there.
  // Otherwise its own executor is asked for (type-erased, which allocates) and kept busy.
  completion(handler_type&& handler, const boost::asio::any_io_executor& io_executor,
             bool on_io_executor = false)
      : handler_(std::move(handler)), on_io_executor_(on_io_executor) {
    if (on_io_executor) {
      io_executor_ =
          boost::asio::prefer(io_executor, boost::asio::execution::outstanding_work.tracked);
    } else {
      io_executor_ = io_executor;
      handler_executor_ =
          boost::asio::prefer(boost::asio::get_associated_executor(handler_, io_executor),
                              boost::asio::execution::outstanding_work.tracked);
    }
  }

  bool done() const noexcept { return done_; }

  // Installs `on_cancel(cancellation_type)` in the caller's cancellation slot, if it has one.
  template <class OnCancel>
  void on_cancel(OnCancel on_cancel) {
    auto slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.assign(std::move(on_cancel));
  }

  void complete(Args... args) {
    if (done_) return;
    done_ = true;
    auto invoke = [handler = handler_type(std::move(handler_)),
                   ... args = std::move(args)]() mutable {
      auto slot = boost::asio::get_associated_cancellation_slot(handler);
      if (slot.is_connected()) slot.clear();
      std::move(handler)(std::move(args)...);
    };
    // The posted function's memory comes from the block cache: Asio's own recycling keeps two
    // blocks per thread, too few with many operations completing in one turn.
    auto recycled = boost::asio::bind_allocator(cached_allocator<void>(), std::move(invoke));
    if (on_io_executor_) {
      auto work = std::move(io_executor_);  // released once the handler has been handed over
      post_through(work, std::move(recycled));
    } else {
      // Through the I/O executor: any_completion_executor cannot be required to be non-blocking.
      boost::asio::post(io_executor_,
                        boost::asio::bind_executor(handler_executor_, std::move(recycled)));
    }
  }

 private:
  // With on_io_executor_, the I/O executor keeps the work of the pending handler (tracked), and
  // handler_executor_ stays empty; otherwise the handler's own executor does. One executor fewer
  // per pending operation: 56 bytes, which a client holding 100 000 watched leases pays for each.
  boost::asio::any_io_executor io_executor_;
  boost::asio::any_completion_executor handler_executor_;
  handler_type handler_;
  bool on_io_executor_;
  bool done_ = false;
};

}  // namespace redlock::detail

#endif
