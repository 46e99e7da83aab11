// parser: its read buffer, which the connection fills (prepare, commit, feed) and reset empties.
#include "resp/parser.hpp"
#include "resp/peer_text.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

namespace redlock::resp {

using peer_text::num;

namespace {

constexpr std::size_t k_min_capacity = 4096;

}  // namespace

void parser::reallocate(std::size_t new_capacity) {
  const std::size_t unconsumed = end_ - read_pos_;
  storage fresh{std::make_unique_for_overwrite<char[]>(new_capacity), new_capacity};
  if (unconsumed != 0) std::memcpy(fresh.data(), buffer_.data() + read_pos_, unconsumed);
  buffer_ = std::move(fresh);
  read_pos_ = 0;
  end_ = unconsumed;
}

std::span<char> parser::prepare(std::size_t min_size) {
  // Nearly every read: all that was read before is consumed, and the buffer, of a size it keeps,
  // has room. The general path below would only find that out.
  if (end_ == read_pos_ && !failed_ && min_size <= buffer_.size() &&
      buffer_.size() <= shrink_floor && buffer_.size() <= limits_.max_buffer) {
    read_pos_ = 0;
    end_ = 0;
    prepared_ = buffer_.size();
    return {buffer_.data(), prepared_};
  }
  if (failed_) return {};
  const std::size_t unconsumed = end_ - read_pos_;
  // Invariant: unconsumed <= max_buffer (commit() never lets more in).
  if (min_size > limits_.max_buffer - unconsumed) {
    const std::size_t total = min_size > std::numeric_limits<std::size_t>::max() - unconsumed
                                  ? std::numeric_limits<std::size_t>::max()
                                  : unconsumed + min_size;
    fail("resp: " + num(total) + " bytes buffered exceed limit " + num(limits_.max_buffer));
    return {};
  }
  if (unconsumed == 0) {
    read_pos_ = 0;
    end_ = 0;
  }
  const std::size_t need = unconsumed + min_size;
  // Growth doubles (bounded by max_buffer) and compaction only happens once at least half the
  // buffer is consumed, so each input byte is copied O(1) times on average. The shrink keeps the
  // footprint within a constant factor of what is unconsumed after a burst of large replies.
  const std::size_t doubled = need > limits_.max_buffer / 2 ? limits_.max_buffer : 2 * need;
  const std::size_t grown = std::max({need, doubled, k_min_capacity});
  if (buffer_.size() > shrink_floor && need < buffer_.size() / 8) {
    reallocate(std::max(grown, shrink_floor / 4));
  } else if (buffer_.size() - end_ < min_size) {
    if (need <= buffer_.size() / 2) {
      std::memmove(buffer_.data(), buffer_.data() + read_pos_, unconsumed);
      read_pos_ = 0;
      end_ = unconsumed;
    } else {
      reallocate(grown);
    }
  }
  prepared_ = std::min(buffer_.size() - end_, limits_.max_buffer - unconsumed);
  return {buffer_.data() + end_, prepared_};
}

std::size_t parser::buffered() const noexcept {
  return end_ - read_pos_;
}

void parser::reset() {
  read_pos_ = 0;
  end_ = 0;
  prepared_ = 0;
  scanned_ = 0;
  payload_pending_ = false;
  payload_type_ = 0;
  payload_length_ = 0;
  stack_.clear();
  reply_bytes_ = 0;
  reply_memory_ = 0;
  failed_ = false;
  error_.clear();
  error_message_.clear();
  if (buffer_.size() > shrink_floor) buffer_ = {};
}

void parser::commit(std::size_t n) {
  end_ += std::min(n, prepared_);
  prepared_ = 0;
}

bool parser::feed(std::string_view bytes) {
  if (failed_) return false;
  if (bytes.empty()) return true;
  const std::span<char> space = prepare(bytes.size());
  if (space.size() < bytes.size()) return false;
  std::memcpy(space.data(), bytes.data(), bytes.size());
  commit(bytes.size());
  return true;
}

}  // namespace redlock::resp
