#ifndef REDLOCK_INTRUSIVE_LIST_HPP
#define REDLOCK_INTRUSIVE_LIST_HPP

#include <vector>

namespace redlock::detail {

class intrusive_list;

// Membership in at most one intrusive_list. Linking and unlinking allocate nothing, which matters
// for bookkeeping done on every lock operation; an object unlinks itself when destroyed.
class list_hook {
 public:
  list_hook() = default;
  list_hook(const list_hook&) = delete;
  list_hook& operator=(const list_hook&) = delete;
  ~list_hook() { unlink(); }

  bool linked() const noexcept { return list_ != nullptr; }
  inline void unlink() noexcept;

 private:
  friend class intrusive_list;
  list_hook* prev_ = nullptr;
  list_hook* next_ = nullptr;
  intrusive_list* list_ = nullptr;
};

class intrusive_list {
 public:
  intrusive_list() = default;
  intrusive_list(const intrusive_list&) = delete;
  intrusive_list& operator=(const intrusive_list&) = delete;
  ~intrusive_list() {
    while (head_ != nullptr)
      head_->unlink();
  }

  void push(list_hook& item) noexcept {
    item.unlink();
    item.list_ = this;
    item.next_ = head_;
    if (head_ != nullptr) head_->prev_ = &item;
    head_ = &item;
  }

  // The members now, so that the caller may unlink them while it walks the copy.
  template <class T>
  std::vector<T*> snapshot() const {
    std::vector<T*> items;
    for (list_hook* at = head_; at != nullptr; at = at->next_)
      items.push_back(static_cast<T*>(at));
    return items;
  }

 private:
  friend class list_hook;
  list_hook* head_ = nullptr;
};

void list_hook::unlink() noexcept {
  if (list_ == nullptr) return;
  if (prev_ != nullptr) {
    prev_->next_ = next_;
  } else {
    list_->head_ = next_;
  }
  if (next_ != nullptr) next_->prev_ = prev_;
  prev_ = next_ = nullptr;
  list_ = nullptr;
}

}  // namespace redlock::detail

#endif
