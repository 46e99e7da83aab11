#ifndef REDLOCK_TEST_SUPPORT_BACKGROUND_THREAD_HPP
#define REDLOCK_TEST_SUPPORT_BACKGROUND_THREAD_HPP

#include <atomic>
#include <exception>
#include <thread>
#include <utility>

namespace redlock::test {

// A thread for the blocking fixture work a test runs beside its clients (a failover, say). What
// the work throws is kept and rethrown by join(), on the test's thread: a fixture that gives up
// (a failover that did not finish in time) fails the test with its message, where an exception
// leaving a std::thread would terminate the whole test program. finished() turns true when the
// work ends either way, so that a loop waiting for it cannot spin forever.
class background_thread {
 public:
  template <typename Work>
  explicit background_thread(Work work)
      : thread_([this, work = std::move(work)]() mutable {
          try {
            work();
          } catch (...) {
            failure_ = std::current_exception();
          }
          finished_ = true;
        }) {}
  ~background_thread() {
    if (thread_.joinable()) thread_.join();
  }
  background_thread(const background_thread&) = delete;
  background_thread& operator=(const background_thread&) = delete;

  bool finished() const noexcept { return finished_; }

  // Waits for the work; rethrows what it threw. failure_ is read only after the join, which
  // orders the thread's write before it.
  void join() {
    thread_.join();
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

 private:
  std::exception_ptr failure_;
  std::atomic<bool> finished_{false};
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace redlock::test

#endif
