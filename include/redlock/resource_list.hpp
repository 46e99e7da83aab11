#ifndef REDLOCK_RESOURCE_LIST_HPP
#define REDLOCK_RESOURCE_LIST_HPP

#include <concepts>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace redlock {

/// The resources of a set of locks (client::async_acquire_all, client::async_try_acquire_all,
/// with_lock): their names, in any order, duplicates allowed (the set merges and sorts them).
///
/// Made implicitly from a std::vector<std::string>, or from a braced list of names written at the
/// call, as users write it inside a coroutine:
/// @code
/// auto lease = co_await locks.async_acquire_all({"{acct}:17", "{acct}:42"}, options,
///                                               asio::use_awaitable);
/// co_await redlock::with_lock(locks, {"{acct}:17", "{acct}:42"}, options, body);
/// @endcode
/// Each name is anything a std::string is made from (a string literal, a std::string, a
/// std::string_view). A braced list becomes a call of the constructor with the names as its
/// arguments, never a std::initializer_list: g++ 12 cannot keep an initializer_list's array
/// across a co_await and stops with "array used as initializer". The names are copied when the
/// list is made, so nothing refers to the caller's arguments afterwards.
class resource_list {
 public:
  /// No resources: an acquire of it completes with error::invalid_argument.
  resource_list() = default;

  /// The names in `names`, taken over.
  resource_list(std::vector<std::string> names) : names_(std::move(names)) {}  // NOLINT: implicit

  /// Each of `names`, in order: `{"a", "b"}` at a call, or resource_list(a, b).
  template <class... Names>
  requires(sizeof...(Names) > 0 && (std::constructible_from<std::string, Names&&> && ...))
      resource_list(Names&&... names) {  // NOLINT: implicit, for braced lists
    names_.reserve(sizeof...(Names));
    (names_.emplace_back(std::forward<Names>(names)), ...);
  }

  /// The names, in the order given.
  const std::vector<std::string>& names() const& noexcept { return names_; }
  /// The names, taken out of the list.
  std::vector<std::string> names() && noexcept { return std::move(names_); }

  /// How many names, duplicates counted.
  std::size_t size() const noexcept { return names_.size(); }

 private:
  std::vector<std::string> names_;
};

}  // namespace redlock

#endif
