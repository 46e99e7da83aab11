#include "redlock/client.hpp"

#include "client_impl.hpp"
#include "config/options_check.hpp"
#include "ops/by_token.hpp"
#include "ops/inspect.hpp"
#include "ops/ping.hpp"
#include "ops/start_acquire.hpp"
#include "ops/vote.hpp"
#include "redlock/rw_lock.hpp"
#include "redlock/semaphore.hpp"

namespace redlock::detail {

// The operations that check a semaphore's count know the limit as most_permits.
static_assert(most_permits == semaphore::max_permits);

namespace asio = boost::asio;

void initiate_acquire(const std::shared_ptr<client_impl>& client, std::string resource,
                      const lock_options& options, bool single_round,
                      caller_handler<acquire_signature> caller) {
  start_acquire(client->space(), std::move(resource), options, single_round, std::move(caller));
}

void initiate_acquire(const std::shared_ptr<client_impl>& client,
                      std::vector<std::string> resources, const lock_options& options,
                      bool single_round, caller_handler<acquire_signature> caller) {
  start_acquire_all(client->space(), std::move(resources), options, single_round,
                    std::move(caller));
}

void initiate_acquire_permit(const std::shared_ptr<client_impl>& client, std::string name,
                             std::size_t permits, const lock_options& options, bool single_round,
                             caller_handler<acquire_signature> caller) {
  start_acquire_permit(client->space(), std::move(name), permits, options, single_round,
                       std::move(caller));
}

void initiate_acquire_rw(const std::shared_ptr<client_impl>& client, std::string name, bool write,
                         const lock_options& options, bool single_round,
                         caller_handler<acquire_signature> caller) {
  start_acquire_rw(client->space(), std::move(name), write, options, single_round,
                   std::move(caller));
}

void initiate_inspect(const std::shared_ptr<client_impl>& client, std::string resource,
                      caller_handler<inspect_signature> caller) {
  start_inspect(client->space(), std::move(resource), std::move(caller));
}

void initiate_inspect_permits(const std::shared_ptr<client_impl>& client, std::string name,
                              std::size_t permits,
                              caller_handler<inspect_permits_signature> caller) {
  start_inspect_permits(client->space(), std::move(name), permits, std::move(caller));
}

void initiate_extend_by_token(const std::shared_ptr<client_impl>& client, std::string resource,
                              std::string token, std::chrono::milliseconds ttl,
                              void_caller caller) {
  start_extend_by_token(client->space(), std::move(resource), std::move(token), ttl,
                        std::move(caller));
}

void initiate_release_by_token(const std::shared_ptr<client_impl>& client, std::string resource,
                               std::string token, void_caller caller) {
  start_release_by_token(client->space(), std::move(resource), std::move(token), std::move(caller));
}

void initiate_ping(const std::shared_ptr<client_impl>& client, void_caller caller) {
  start_ping(client->space(), std::move(caller));
}

void initiate_shutdown(const std::shared_ptr<client_impl>& client, void_caller caller) {
  // Cancelling stops the waiting, not the shutdown.
  client->shutdown(std::make_shared<user_operation>(
      client->space(), client->space()->executor(), std::move(caller),
      asio::cancellation_type::terminal | asio::cancellation_type::partial));
}

const asio::any_io_executor& executor_of(const client_impl& client) noexcept {
  return client.executor();
}

}  // namespace redlock::detail

namespace redlock {

client::client(detail::asio_configuration /*library_configuration*/, executor_type executor,
               std::vector<node_config> nodes, client_options options)
    : impl_(std::make_shared<detail::client_impl>(std::move(executor), std::move(nodes),
                                                  std::move(options))) {}

client::~client() {
  if (impl_) impl_->shutdown();
}

client::executor_type client::get_executor() const noexcept {
  return impl_->executor();
}
std::size_t client::size() const noexcept {
  return impl_->size();
}
std::size_t client::quorum() const noexcept {
  return impl_->quorum();
}

}  // namespace redlock
