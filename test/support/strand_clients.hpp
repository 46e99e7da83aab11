#ifndef REDLOCK_TEST_SUPPORT_STRAND_CLIENTS_HPP
#define REDLOCK_TEST_SUPPORT_STRAND_CLIENTS_HPP

// The documented multi-threaded setup, for the tests that ThreadSanitizer runs: clients, each on
// a strand of its own of one io_context that several threads run.

#include "redlock/client.hpp"
#include "redlock/node_config.hpp"
#include "redlock/options.hpp"
#include "support/async_test.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace redlock::test {

class strand_clients {
 public:
  using strand_type = boost::asio::strand<boost::asio::io_context::executor_type>;

  // `count` clients of `nodes`, each on its own strand; the threads start with run().
  strand_clients(const std::vector<node_config>& nodes, const client_options& options,
                 std::size_t count = 2, std::size_t threads = 4)
      : io_(static_cast<int>(threads)), threads_wanted_(threads) {
    for (std::size_t k = 0; k < count; ++k) {
      strands_.push_back(boost::asio::make_strand(io_));
      clients_.push_back(std::make_unique<client>(strands_.back(), nodes, options));
    }
  }

  strand_clients(const strand_clients&) = delete;
  strand_clients& operator=(const strand_clients&) = delete;

  ~strand_clients() { stop(); }

  std::size_t size() const noexcept { return clients_.size(); }
  strand_type& strand(std::size_t k) { return strands_[k]; }
  client& at(std::size_t k) { return *clients_[k]; }

  // Spawns `count` coroutines, make(c) for c in [0, count), coroutine c on strand c % size();
  // finished() counts those that have returned. Before run(), or from a thread of the io_context.
  template <class Make>
  void spawn(int count, Make make) {
    spawned_ += count;
    for (int c = 0; c < count; ++c) {
      boost::asio::co_spawn(
          strands_[static_cast<std::size_t>(c) % strands_.size()],
          [this, make, c]() -> boost::asio::awaitable<void> {
            co_await make(c);
            ++finished_;
          },
          boost::asio::detached);
    }
  }

  int finished() const noexcept { return finished_; }

  // Whether every spawned coroutine returned within `limit`.
  bool all_finished(std::chrono::milliseconds limit) {
    return eventually_blocking([this] { return finished_ == spawned_; }, limit);
  }

  // Starts the threads; the io_context does not run out of work until stop().
  void run() {
    guard_.emplace(io_.get_executor());
    for (std::size_t i = 0; i < threads_wanted_; ++i)
      threads_.emplace_back([this] { io_.run(); });
  }

  // Runs `f` on strand k and returns its result, waiting on the calling thread (which must not
  // be one of the io_context's).
  template <class F>
  auto on_strand(std::size_t k, F f) {
    return boost::asio::post(strands_[k], boost::asio::use_future(std::move(f))).get();
  }

  // Destroys each client on its own strand, after `before(k)` there (for what uses the client),
  // then lets the io_context run out of work and joins the threads. Idempotent.
  void stop(const std::function<void(std::size_t)>& before = {}) {
    if (threads_.empty()) return;
    for (std::size_t k = 0; k < clients_.size(); ++k) {
      on_strand(k, [&, k] {
        if (before) before(k);
        clients_[k].reset();
      });
    }
    guard_.reset();
    for (auto& thread : threads_)
      thread.join();
    threads_.clear();
  }

 private:
  boost::asio::io_context io_;
  std::size_t threads_wanted_;
  std::vector<strand_type> strands_;
  std::vector<std::unique_ptr<client>> clients_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::vector<std::thread> threads_;
  int spawned_ = 0;
  std::atomic<int> finished_{0};
};

}  // namespace redlock::test

#endif
