#ifndef REDLOCK_NET_WRITE_BUFFER_HPP
#define REDLOCK_NET_WRITE_BUFFER_HPP

#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace redlock::detail {

// The bytes of a connection's next write, gathered from the payloads of a batch of requests
// (multiplexer::prepare_write). std::string would do the same, but its append is a call into the
// standard library that checks and re-reads its state for every request of every batch; here an
// append is a capacity test and a copy, inline. Storage is kept from one batch to the next and
// grows geometrically; clear() keeps it.
//
// Not thread-safe; owned by one connection.
class write_buffer {
 public:
  write_buffer() = default;
  write_buffer(const write_buffer&) = delete;
  write_buffer& operator=(const write_buffer&) = delete;

  void clear() noexcept { size_ = 0; }

  void append(std::string_view bytes) {
    // `>=`: an empty append to a buffer that never had storage allocates some, so that the copy
    // below never gets a null destination.
    if (bytes.size() >= capacity_ - size_) grow(bytes.size());
    std::memcpy(storage_.get() + size_, bytes.data(), bytes.size());
    size_ += bytes.size();
  }

  const char* data() const noexcept { return storage_.get(); }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::string_view view() const noexcept { return {storage_.get(), size_}; }

 private:
  // Room for `more` bytes beyond size(), with at least 4 KiB and at least double the capacity.
  [[gnu::noinline]] void grow(std::size_t more) {
    std::size_t capacity = capacity_ < 2048 ? 4096 : 2 * capacity_;
    if (capacity - size_ <= more) capacity = size_ + more + 1;
    auto storage = std::make_unique_for_overwrite<char[]>(capacity);
    if (size_ > 0) std::memcpy(storage.get(), storage_.get(), size_);
    storage_ = std::move(storage);
    capacity_ = capacity;
  }

  std::unique_ptr<char[]> storage_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace redlock::detail

#endif
