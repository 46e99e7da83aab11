#ifndef REDLOCK_OPS_SHUTDOWN_HPP
#define REDLOCK_OPS_SHUTDOWN_HPP

#include <boost/system/error_code.hpp>

#include <memory>

namespace redlock::detail {

class lock_space;
class user_operation;

// Ends a client: operations under way complete with operation_aborted and later ones fail with
// it, held leases are released, and the connections close once those releases are out. Without
// `waiter` (the client's destructor) the releases are best effort; with one (async_shutdown) they
// are the token-checked release operation, and `waiter` completes once all have answered, with
// the first failure. A waiter that comes while a shutdown is under way shares its outcome, one
// that comes after it gets the outcome it had. One per client.
class client_shutdown {
 public:
  void run(lock_space& space, std::shared_ptr<user_operation> waiter);

 private:
  struct progress;

  bool done_ = false;
  std::weak_ptr<progress> in_progress_;
  // The finished async_shutdown's outcome. Shared with the progress, which outlives nothing that
  // owns it: its waiters own the client, so a client that owned the progress would never be freed
  // if the io_context stopped before the nodes answered.
  std::shared_ptr<boost::system::error_code> outcome_ =
      std::make_shared<boost::system::error_code>();
};

}  // namespace redlock::detail

#endif
