#ifndef REDLOCK_DETAIL_INITIATE_HPP
#define REDLOCK_DETAIL_INITIATE_HPP

// The non-template entry points behind the public async_ functions. The public templates only
// adapt completion tokens (asio::async_initiate); every operation is implemented once, in src/.

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/system/error_code.hpp>

#include "redlock/options.hpp"

namespace redlock {
class lease;
namespace detail {

class client_impl;
struct lease_state;

using void_handler = boost::asio::any_completion_handler<void(boost::system::error_code)>;

void initiate_ping(const std::shared_ptr<client_impl>& client, void_handler handler);
void initiate_release(const std::shared_ptr<lease_state>& state, void_handler handler);
void initiate_extend(const std::shared_ptr<lease_state>& state, std::chrono::milliseconds ttl,
                     void_handler handler);
void initiate_wait_lost(const std::shared_ptr<lease_state>& state, void_handler handler);

}  // namespace detail
}  // namespace redlock

#endif
