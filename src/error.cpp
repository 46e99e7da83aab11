#include "redlock/error.hpp"

#include <string>

namespace redlock {
namespace {

class category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "redlock"; }

  std::string message(int ev) const override {
    switch (static_cast<error>(ev)) {
      case error::invalid_argument:
        return "invalid argument";
      case error::no_quorum:
        return "too few nodes answered to reach a quorum";
      case error::contended:
        return "the lock is held by another lease or owner";
      case error::validity_expired:
        return "acquired too late: no validity time left";
      case error::wait_timeout:
        return "gave up waiting for the lock";
      case error::lock_lost:
        return "the lock was lost";
      case error::not_held:
        return "the lock is no longer held by this lease";
      case error::protocol_error:
        return "the server violated the RESP protocol";
      case error::server_error:
        return "the server answered with an error";
      case error::not_connected:
        return "the node is not connected";
      case error::connection_lost:
        return "the connection to the node was lost";
      case error::request_timeout:
        return "the request timed out";
      case error::connect_timeout:
        return "connecting to the node timed out";
      case error::auth_failed:
        return "authentication failed";
      case error::select_failed:
        return "selecting the database failed";
      case error::node_unresponsive:
        return "the node has not answered a request that timed out";
      case error::permission_denied:
        return "the node's ACL user may not run a command the lock needs";
      case error::tls_handshake_failed:
        return "the TLS connection to the node could not be set up";
      case error::certificate_rejected:
        return "the node's TLS certificate failed verification";
      case error::wrong_node_kind:
        return "the server is not of the kind its URL names";
    }
    return "unknown redlock error " + std::to_string(ev);
  }
};

class conditions final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "redlock.condition"; }

  std::string message(int ev) const override {
    switch (static_cast<condition>(ev)) {
      case condition::node_failure:
        return "a node cannot serve the lock until its configuration is fixed";
      case condition::not_acquired:
        return "the lock was not acquired; it may be later";
    }
    return "unknown redlock condition " + std::to_string(ev);
  }

  // `code == condition`: Boost asks the code's category first (which knows nothing of these), then
  // this one.
  bool equivalent(const boost::system::error_code& code, int cond) const noexcept override {
    if (code.category() != redlock::error_category()) return false;
    switch (static_cast<condition>(cond)) {
      case condition::node_failure:
        return is_node_failure(static_cast<error>(code.value()));
      case condition::not_acquired:
        return is_not_acquired(static_cast<error>(code.value()));
    }
    return false;
  }

  static bool is_node_failure(error e) noexcept {
    return e == error::auth_failed || e == error::select_failed || e == error::permission_denied ||
           e == error::protocol_error || e == error::tls_handshake_failed ||
           e == error::certificate_rejected || e == error::wrong_node_kind;
  }

  static bool is_not_acquired(error e) noexcept {
    return e == error::contended || e == error::no_quorum || e == error::validity_expired ||
           e == error::wait_timeout;
  }
};

}  // namespace

const boost::system::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

const boost::system::error_category& condition_category() noexcept {
  static const conditions instance;
  return instance;
}

}  // namespace redlock
