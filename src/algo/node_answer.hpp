#ifndef REDLOCK_ALGO_NODE_ANSWER_HPP
#define REDLOCK_ALGO_NODE_ANSWER_HPP

#include "algo/quorum.hpp"

#include <boost/container/small_vector.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <string>

namespace redlock::detail {

// What one node answered in one fan-out, kept to decide and to explain failures.
struct node_answer {
  enum class kind : std::uint8_t { pending, yes, no, failed } what = kind::pending;
  // The request was certainly never written to the node (it was down, or skipped as unresponsive):
  // nothing there can need undoing.
  bool unsent = false;
  // For `failed`: the request's error code, or error::permission_denied for a NOPERM reply.
  boost::system::error_code failure;
  std::string detail;  // the error text for `failed`
};

// One answer per node, inline up to seven nodes: a vote is made for every lock operation.
using node_answers = boost::container::small_vector<node_answer, 7>;

// Counts a node's (non-pending) answer in a tally.
inline void count(tally& votes, node_answer::kind what) noexcept {
  switch (what) {
    case node_answer::kind::yes:
      return votes.yes();
    case node_answer::kind::no:
      return votes.no();
    case node_answer::kind::failed:
    case node_answer::kind::pending:
      return votes.failed();
  }
}

}  // namespace redlock::detail

#endif
