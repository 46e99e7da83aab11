#ifndef REDLOCK_LOCK_SPACE_HPP
#define REDLOCK_LOCK_SPACE_HPP

#include "algo/wait_plan.hpp"
#include "lock/lease_state.hpp"
#include "lock/lock_home.hpp"
#include "log.hpp"
#include "nodes/node_set.hpp"
#include "nodes/release_announcements.hpp"
#include "redlock/options.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <random>
#include <string_view>
#include <vector>

namespace redlock::detail {

class extension_batch;

// What every operation and lease of one client shares: the node set, the local queues and the
// release announcements that feed them, the round-trip measure behind the waiting, and the
// registry of what a shutdown ends (the lock_home part, all that a lease sees of it). The client
// (client_impl) makes it and shuts it down; operations and leases keep it alive while they run.
// Lives on the client's executor.
class lock_space : public lock_home, public std::enable_shared_from_this<lock_space> {
 public:
  lock_space(boost::asio::any_io_executor executor, std::vector<node_config> nodes,
             client_options options);

  node_set& nodes() noexcept { return nodes_; }
  const node_set& nodes() const noexcept { return nodes_; }
  const node_facts& nodes_known() const noexcept override { return nodes_known_; }

  // Release announcements (client_options::release_channel), for acquires that wait. Null when
  // announcements are off or the client is closed. Created on first use.
  release_announcements* listener();

  // Every node is subscribed for `resource` (release_announcements::covers): a release of it would
  // be heard. Only looks: false while nobody listens.
  bool announcements_cover(std::string_view resource) const noexcept {
    return announces_releases() && listener_ && listener_->covers(resource);
  }
  // No node's subscription for `resource` is in its first attempt (release_announcements::settled);
  // true when there are no announcements to wait for. Only looks.
  bool announcements_settled(std::string_view resource) const noexcept {
    if (!announces_releases()) return true;
    return listener_ && listener_->settled(resource);
  }

  // The renewals gathered in this turn of the executor, sent together at its end (ops/extend.cpp);
  // null while none is gathered.
  std::shared_ptr<extension_batch> gathering_renewals;

  // After close(), operations fail with operation_aborted; the connections close once the
  // requests queued on them are out (within `drain_bound`).
  void close(std::chrono::milliseconds drain_bound);

 private:
  // The node set as the lock's machines see it.
  class node_set_facts final : public node_facts {
   public:
    explicit node_set_facts(const node_set& nodes) : node_facts(nodes.size()), nodes_(nodes) {}
    std::string address(std::size_t node) const override { return nodes_.node(node).address(); }
    boost::system::error_code permanent_failure(std::size_t node) const noexcept override {
      return nodes_.permanent_failure(node);
    }
    void permanent_failures(std::span<boost::system::error_code> into) const noexcept override {
      for (std::size_t node = 0; node < into.size(); ++node)
        into[node] = nodes_.permanent_failure(node);
    }
    const std::string& last_error(std::size_t node) const noexcept override {
      return nodes_.last_error(node);
    }
    std::string describe(const node_answers& answers, std::string_view yes, std::string_view no,
                         const std::vector<std::string>* pending_texts,
                         std::string_view keys) const override {
      return nodes_.describe(answers, yes, no, pending_texts, keys);
    }
    const std::string& duplicate_nodes() const noexcept override {
      return nodes_.duplicate_nodes();
    }
    bool has_cluster_node() const noexcept override { return nodes_.has_cluster_node(); }

   private:
    const node_set& nodes_;
  };

  node_set nodes_;
  node_set_facts nodes_known_{nodes_};
  std::shared_ptr<release_announcements> listener_;  // over nodes_, which outlives it
};

// The lock space a lease belongs to. Every lease's home is its client's lock space: leases are
// made only by the operations of a lock space, with it (start_acquire and the others).
inline lock_space& space_of(const lease_state& lease) noexcept {
  return static_cast<lock_space&>(*lease.home());
}
inline std::shared_ptr<lock_space> shared_space_of(const lease_state& lease) noexcept {
  return std::static_pointer_cast<lock_space>(lease.home());
}

}  // namespace redlock::detail

#endif
