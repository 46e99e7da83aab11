#ifndef REDLOCK_CALL_OBSERVER_HPP
#define REDLOCK_CALL_OBSERVER_HPP

#include "redlock/observer.hpp"
#include "user_callback.hpp"

#include <boost/asio/any_io_executor.hpp>

namespace redlock::detail {

// Tells `watcher` (client_options::observer) of `event` through `what`, as call_user_callback
// calls user code. Callers check for an observer first, so that without one no event is built.
template <class Event>
[[gnu::always_inline]] inline void call_observer(observer& watcher,
                                                 const boost::asio::any_io_executor& executor,
                                                 void (observer::*what)(const Event&),
                                                 const Event& event) noexcept {
  call_user_callback(executor, [&] { (watcher.*what)(event); });
}

}  // namespace redlock::detail

#endif
