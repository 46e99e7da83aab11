#ifndef REDLOCK_ALGO_QUORUM_HPP
#define REDLOCK_ALGO_QUORUM_HPP

#include "redlock/error.hpp"

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <optional>

namespace redlock::detail {

constexpr std::size_t quorum_of(std::size_t nodes) noexcept {
  return nodes / 2 + 1;
}

// The answers of one fan-out to N nodes, each node counted once: yes (granted, deleted,
// extended), no (the key is someone else's or gone), failed (error or no answer in time), or still
// pending. Each operation states its outcome in these terms; the point is to decide as soon as an
// outcome is certain, whatever the pending nodes will say.
class tally {
 public:
  explicit constexpr tally(std::size_t nodes) noexcept
      : nodes_(nodes), quorum_(quorum_of(nodes)), pending_(nodes) {}

  constexpr void yes() noexcept { ++yes_, --pending_; }
  constexpr void no() noexcept { ++no_, --pending_; }
  constexpr void failed() noexcept { ++failed_, --pending_; }

  constexpr std::size_t nodes() const noexcept { return nodes_; }
  constexpr std::size_t quorum() const noexcept { return quorum_; }
  constexpr std::size_t yes_count() const noexcept { return yes_; }
  constexpr std::size_t no_count() const noexcept { return no_; }
  constexpr std::size_t failed_count() const noexcept { return failed_; }
  constexpr std::size_t pending() const noexcept { return pending_; }
  constexpr bool complete() const noexcept { return pending_ == 0; }

  constexpr bool yes_quorum() const noexcept { return yes_ >= quorum_; }
  constexpr bool yes_quorum_impossible() const noexcept { return yes_ + pending_ < quorum_; }
  constexpr bool no_quorum() const noexcept { return no_ >= quorum_; }
  constexpr bool no_quorum_impossible() const noexcept { return no_ + pending_ < quorum_; }
  // More nodes failed than a majority can spare: too few answered for any majority decision.
  constexpr bool too_many_failed() const noexcept { return failed_ > nodes_ - quorum_; }
  constexpr bool too_many_failed_impossible() const noexcept {
    return failed_ + pending_ <= nodes_ - quorum_;
  }

 private:
  std::size_t nodes_;
  std::size_t quorum_;
  std::size_t yes_ = 0;
  std::size_t no_ = 0;
  std::size_t failed_ = 0;
  std::size_t pending_;
};

// The outcome of a token-checked extension as far as `t` tells, or none while it is open:
// success once a quorum extended, error::not_held once a quorum said the key is gone or foreign,
// error::no_quorum once too few can still extend.
inline std::optional<boost::system::error_code> extension_outcome(const tally& t) {
  if (t.yes_quorum()) return boost::system::error_code{};
  if (t.no_quorum()) return make_error_code(error::not_held);
  if (t.yes_quorum_impossible()) return make_error_code(error::no_quorum);
  return std::nullopt;
}

// The outcome of a token-checked release: error::not_held once a quorum said the key was gone or
// foreign (the lock had been lost), error::no_quorum once too many failed to answer, success once
// neither can happen any more.
inline std::optional<boost::system::error_code> release_outcome(const tally& t) {
  if (t.no_quorum()) return make_error_code(error::not_held);
  if (t.too_many_failed()) return make_error_code(error::no_quorum);
  if (t.no_quorum_impossible() && t.too_many_failed_impossible())
    return boost::system::error_code{};
  return std::nullopt;
}

}  // namespace redlock::detail

#endif
