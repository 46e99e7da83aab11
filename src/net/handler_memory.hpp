#ifndef REDLOCK_NET_HANDLER_MEMORY_HPP
#define REDLOCK_NET_HANDLER_MEMORY_HPP

#include <array>
#include <atomic>
#include <cstddef>
#include <new>

namespace redlock::detail {

// Storage for the operations of a connection's own handlers: one block per kind of operation
// (its read, its write, its writer's turn), reused by every operation of that kind, so that a
// served link allocates nothing per read or write. At most one operation of each kind is pending
// at a time; one that does not fit (a TLS write's composed operation may be larger) or finds its
// block taken gets the heap instead.
//
// Lifetime: reference-counted. The count is atomic: Asio returns an operation's memory on the
// thread that runs the reactor, before it hands the handler to the connection's strand, so a
// read's memory may come back while the strand allocates a turn. A block itself is only taken
// again by the next operation of its kind, which its predecessor's handler starts, after the
// memory came back. The connection holds one reference and every allocated operation one more, so
// that an operation destroyed after its connection (Asio destroys pending operations when the
// io_context goes, and a handler's destructor may drop the last reference to the connection before
// its memory is returned) still returns its memory to a live object.
class handler_memory {
 public:
  enum class use : std::size_t { read, write, turn };

  static handler_memory* create() { return new handler_memory(); }
  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void drop_ref() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  void* allocate(use kind, std::size_t size, std::size_t align) {
    auto& block = blocks_[static_cast<std::size_t>(kind)];
    void* memory = nullptr;
    if (!block.busy && size <= block_size && align <= alignof(std::max_align_t)) {
      block.busy = true;
      memory = block.bytes;
    } else {
      memory = ::operator new(size, std::align_val_t(align));
    }
    add_ref();
    return memory;
  }

  void deallocate(use kind, void* memory, std::size_t align) noexcept {
    auto& block = blocks_[static_cast<std::size_t>(kind)];
    if (memory == block.bytes) {
      block.busy = false;
    } else {
      ::operator delete(memory, std::align_val_t(align));
    }
    drop_ref();
  }

 private:
  // Fits a socket's read or write operation (a plain socket's write is a composed operation of
  // some 300 bytes) with its handler, and a posted turn.
  static constexpr std::size_t block_size = 1024;
  struct block {
    alignas(std::max_align_t) unsigned char bytes[block_size];
    bool busy = false;
  };

  handler_memory() = default;
  ~handler_memory() = default;

  std::atomic<unsigned> refs_{1};
  std::array<block, 3> blocks_{};
};

// The associated allocator of a connection's handlers: operations of one kind share one block.
template <class T>
class handler_allocator {
 public:
  using value_type = T;

  handler_allocator(handler_memory& memory, handler_memory::use kind) noexcept
      : memory_(&memory), kind_(kind) {}
  template <class U>
  handler_allocator(const handler_allocator<U>& other) noexcept
      : memory_(other.memory_), kind_(other.kind_) {}

  T* allocate(std::size_t n) {
    return static_cast<T*>(memory_->allocate(kind_, n * sizeof(T), alignof(T)));
  }
  void deallocate(T* memory, std::size_t) noexcept {
    memory_->deallocate(kind_, memory, alignof(T));
  }

  template <class U>
  bool operator==(const handler_allocator<U>& other) const noexcept {
    return memory_ == other.memory_ && kind_ == other.kind_;
  }

 private:
  template <class U>
  friend class handler_allocator;

  handler_memory* memory_;
  handler_memory::use kind_;
};

}  // namespace redlock::detail

#endif
