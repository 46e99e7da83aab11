#ifndef REDLOCK_LOCK_NODE_FACTS_HPP
#define REDLOCK_LOCK_NODE_FACTS_HPP

#include "algo/node_answer.hpp"

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

// What the lock's machines know of the Redlock nodes, read only: how many there are and their
// quorum, each one's address and lasting failure, and what makes no lock trustworthy or limits the
// keys. The client's node set stands behind it (lock_space); a test or a simulation may put any
// nodes there. Called on the client's executor.
class node_facts {
 public:
  // Fixed for a client's life; kept here, not asked, since every round reads them often.
  std::size_t size() const noexcept { return size_; }
  std::size_t quorum() const noexcept { return size_ / 2 + 1; }
  // "127.0.0.1:7001", as messages name node `node`.
  virtual std::string address(std::size_t node) const = 0;
  // A failure of node `node` that lasts until someone changes a configuration (a refused login,
  // a wrong database...), or none.
  virtual boost::system::error_code permanent_failure(std::size_t node) const noexcept = 0;
  // Every node's permanent_failure, node i's into `into[i]` (`into` has size() elements): one
  // call where a decision reads them all.
  virtual void permanent_failures(std::span<boost::system::error_code> into) const noexcept = 0;
  // Node `node`'s last failure's text.
  virtual const std::string& last_error(std::size_t node) const noexcept = 0;
  // "127.0.0.1:7001 granted; 127.0.0.1:7002 held by another owner; ..." for diagnostics, as
  // node_set::describe says it.
  virtual std::string describe(const node_answers& answers, std::string_view yes,
                               std::string_view no,
                               const std::vector<std::string>* pending_texts = nullptr,
                               std::string_view keys = {}) const = 0;
  // Why no acquire can be trusted with these nodes (two of them turned out to be one server);
  // empty until then.
  virtual const std::string& duplicate_nodes() const noexcept = 0;
  // Some node is a Redis Cluster: every key of one request must be in one hash slot.
  virtual bool has_cluster_node() const noexcept = 0;

 protected:
  explicit node_facts(std::size_t size) noexcept : size_(size) {}
  ~node_facts() = default;

 private:
  std::size_t size_;
};

}  // namespace redlock::detail

#endif
