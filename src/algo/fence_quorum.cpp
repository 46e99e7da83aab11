#include "algo/fence_quorum.hpp"

#include <algorithm>

namespace redlock::detail {

std::uint64_t fence_of(const std::vector<std::optional<std::uint64_t>>& counters) {
  std::uint64_t fence = 0;
  for (const auto& counter : counters) {
    if (counter) fence = std::max(fence, *counter);
  }
  return fence;
}

fence_quorum::fence_quorum(std::size_t nodes, std::size_t quorum)
    : nodes_(nodes, node_state::not_asked), quorum_(quorum) {}

std::vector<bool> fence_quorum::start(std::uint64_t fence,
                                      const std::vector<std::optional<std::uint64_t>>& counters,
                                      const std::vector<bool>& still_pending) {
  fence_ = fence;
  std::vector<bool> targets(nodes_.size(), false);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (i < counters.size() && counters[i]) {
      targets[i] = granted(i, *counters[i]);
    } else if (i < still_pending.size() && still_pending[i]) {
      nodes_[i] = node_state::round_pending;
      ++pending_;
    }
  }
  decide();
  if (decision_) return std::vector<bool>(nodes_.size(), false);
  return targets;
}

bool fence_quorum::late_answer(std::size_t node, std::optional<std::uint64_t> counter) {
  if (decision_ || node >= nodes_.size() || nodes_[node] != node_state::round_pending) {
    return false;
  }
  --pending_;
  nodes_[node] = node_state::not_asked;
  const bool send = counter && granted(node, *counter);
  decide();
  return send;
}

void fence_quorum::answered(std::size_t node, bool confirmed) {
  if (node >= nodes_.size() || nodes_[node] != node_state::awaited) return;
  --awaited_;
  if (confirmed) {
    nodes_[node] = node_state::written_back;
    ++confirmed_;
  } else {
    nodes_[node] = node_state::write_back_failed;
  }
  decide();
}

bool fence_quorum::granted(std::size_t node, std::uint64_t counter) {
  if (counter >= fence_) {
    nodes_[node] = node_state::at_token;
    ++confirmed_;
    return false;
  }
  nodes_[node] = node_state::awaited;
  ++awaited_;
  return true;
}

void fence_quorum::decide() {
  if (decision_) return;
  if (confirmed_ < quorum_ && confirmed_ + awaited_ + pending_ >= quorum_) return;
  decision_ = confirmed_ >= quorum_;
}

}  // namespace redlock::detail
