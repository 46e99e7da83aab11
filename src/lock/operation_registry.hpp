#ifndef REDLOCK_LOCK_OPERATION_REGISTRY_HPP
#define REDLOCK_LOCK_OPERATION_REGISTRY_HPP

#include "intrusive_list.hpp"

#include <vector>

namespace redlock::detail {

// Something the client must end when it shuts down: an operation under way.
class abortable : public list_hook {
 public:
  virtual void abort() = 0;

 protected:
  ~abortable() = default;
};

// What a client's shutdown ends: the operations under way and the leases held now. Each links
// itself in while it runs (or holds) and out when it ends; the lists are intrusive, so neither
// costs an allocation. Lives on the client's executor.
class operation_registry {
 public:
  void track(abortable* op) { active_.push(*op); }
  void untrack(abortable* op) { op->unlink(); }
  void track_lease(list_hook& lease) { held_.push(lease); }
  void untrack_lease(list_hook& lease) { lease.unlink(); }

  // Copies: ending one unlinks it.
  std::vector<abortable*> operations() const { return active_.snapshot<abortable>(); }
  // `Lease`: the type every tracked lease is (lease_state).
  template <class Lease>
  std::vector<Lease*> leases() const {
    return held_.snapshot<Lease>();
  }

 protected:
  operation_registry() = default;
  ~operation_registry() = default;

 private:
  intrusive_list active_;  // of abortable
  intrusive_list held_;    // of leases
};

}  // namespace redlock::detail

#endif
