#ifndef REDLOCK_SRC_PER_THREAD_HPP
#define REDLOCK_SRC_PER_THREAD_HPP

#include <cstdint>
#include <utility>

namespace redlock::detail {

// One T per thread, made by the thread's first make_or_get() and destroyed when the thread ends.
// For the stores that keep memory for a thread's next lock operations (block_cache's blocks, the
// storage of tokens). A thread that never asks costs two words of thread-local storage.
//
// The state is plain data, so that it stays readable while the thread ends: once the thread's T is
// destroyed, get() and make_or_get() return null (memory given back by another thread_local's
// destructor then goes back to the heap as usual), and nothing makes a T again.
template <class T>
class per_thread {
 public:
  // This thread's T, made now if it has none yet; null once the thread is ending.
  static T* make_or_get() {
    if (state_ == state::unused) {
      thread_local owner made;
      (void)made;
    }
    return object_;
  }
  // This thread's T if it has one and is not ending; null otherwise. Never makes one.
  static T* get() noexcept { return object_; }

 private:
  enum class state : std::uint8_t { unused, live, ended };
  struct owner {
    owner() {
      object_ = new T;
      state_ = state::live;
    }
    ~owner() {
      state_ = state::ended;
      delete std::exchange(object_, nullptr);
    }
    owner(const owner&) = delete;
    owner& operator=(const owner&) = delete;
  };
  static constinit inline thread_local state state_ = state::unused;
  static constinit inline thread_local T* object_ = nullptr;
};

}  // namespace redlock::detail

#endif
