#ifndef REDLOCK_TEST_SUPPORT_COUNTING_EXECUTOR_HPP
#define REDLOCK_TEST_SUPPORT_COUNTING_EXECUTOR_HPP

#include <boost/asio/execution.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/require.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace redlock::test {

// An executor that forwards everything to `Inner` and counts the function objects submitted
// through it: every post, dispatch, defer and completion that reaches the io_context by way of a
// component's executor. For tests that bound how much work a component queues, e.g. a client
// given `counting_executor(io.get_executor(), count)` as its executor (any_io_executor accepts
// it). Copies and the executors made from it by require/prefer share the count.
template <class Inner>
class counting_executor {
 public:
  counting_executor(Inner inner, std::shared_ptr<std::atomic<std::uint64_t>> count)
      : inner_(std::move(inner)), count_(std::move(count)) {}

  template <class Function>
  void execute(Function&& f) const {
    count_->fetch_add(1, std::memory_order_relaxed);
    boost::asio::execution::execute(inner_, std::forward<Function>(f));
  }

  template <class Property>
  auto query(const Property& property) const
      -> decltype(boost::asio::query(std::declval<const Inner&>(), property)) {
    return boost::asio::query(inner_, property);
  }

  template <class Property>
  auto require(const Property& property) const -> counting_executor<
      std::decay_t<decltype(boost::asio::require(std::declval<const Inner&>(), property))>> {
    return {boost::asio::require(inner_, property), count_};
  }

  template <class Property>
  auto prefer(const Property& property) const -> counting_executor<
      std::decay_t<decltype(boost::asio::prefer(std::declval<const Inner&>(), property))>> {
    return {boost::asio::prefer(inner_, property), count_};
  }

  friend bool operator==(const counting_executor& a, const counting_executor& b) noexcept {
    return a.inner_ == b.inner_ && a.count_ == b.count_;
  }
  friend bool operator!=(const counting_executor& a, const counting_executor& b) noexcept {
    return !(a == b);
  }

  std::uint64_t count() const noexcept { return count_->load(std::memory_order_relaxed); }

 private:
  template <class>
  friend class counting_executor;

  Inner inner_;
  std::shared_ptr<std::atomic<std::uint64_t>> count_;
};

template <class Inner>
counting_executor(Inner, std::shared_ptr<std::atomic<std::uint64_t>>) -> counting_executor<Inner>;

}  // namespace redlock::test

#endif
