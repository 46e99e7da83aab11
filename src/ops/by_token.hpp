#ifndef REDLOCK_OPS_BY_TOKEN_HPP
#define REDLOCK_OPS_BY_TOKEN_HPP

#include "redlock/detail/initiate.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace redlock::detail {

class lock_space;

// client::async_extend(resource, token, ttl): the extension script with `token` on every node.
void start_extend_by_token(const std::shared_ptr<lock_space>& space, std::string resource,
                           std::string token, std::chrono::milliseconds ttl, void_caller caller);

// client::async_release(resource, token): the release script with `token` on every node,
// announced on the release channel.
void start_release_by_token(const std::shared_ptr<lock_space>& space, std::string resource,
                            std::string token, void_caller caller);

}  // namespace redlock::detail

#endif
