#ifndef REDLOCK_CLIENT_IMPL_HPP
#define REDLOCK_CLIENT_IMPL_HPP

#include "lock_space.hpp"
#include "ops/shutdown.hpp"
#include "redlock/client.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace redlock::detail {

class user_operation;

// Everything behind a redlock::client: the lock space its operations and leases share, and its
// shutdown. Lives on the client's executor.
class client_impl : public std::enable_shared_from_this<client_impl> {
 public:
  // Throws system_error (error::invalid_argument, naming the problem) for options that no lock
  // can work with.
  client_impl(boost::asio::any_io_executor executor, std::vector<node_config> nodes,
              client_options options);

  const std::shared_ptr<lock_space>& space() const noexcept { return space_; }
  const boost::asio::any_io_executor& executor() const noexcept { return space_->executor(); }
  std::size_t size() const noexcept { return space_->nodes().size(); }
  std::size_t quorum() const noexcept { return space_->nodes().quorum(); }

  // See client_shutdown.
  void shutdown(std::shared_ptr<user_operation> waiter = nullptr);

 private:
  std::shared_ptr<lock_space> space_;
  client_shutdown shutdown_;
};

}  // namespace redlock::detail

#endif
