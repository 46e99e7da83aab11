#include "client_impl.hpp"

#include "ops/vote.hpp"

namespace redlock::detail {

client_impl::client_impl(boost::asio::any_io_executor executor, std::vector<node_config> nodes,
                         client_options options)
    : space_(std::make_shared<lock_space>(std::move(executor), std::move(nodes),
                                          std::move(options))) {}

void client_impl::shutdown(std::shared_ptr<user_operation> waiter) {
  shutdown_.run(*space_, std::move(waiter));
}

}  // namespace redlock::detail
