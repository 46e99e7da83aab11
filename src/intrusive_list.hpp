#ifndef REDLOCK_INTRUSIVE_LIST_HPP
#define REDLOCK_INTRUSIVE_LIST_HPP

#include <boost/intrusive/list.hpp>

#include <vector>

namespace redlock::detail {

// Membership in at most one intrusive_list. Linking and unlinking allocate nothing, which matters
// for bookkeeping done on every lock operation; an object unlinks itself when destroyed (an
// auto-unlink hook, which is also why the list keeps no size).
class list_hook : public boost::intrusive::list_base_hook<
                      boost::intrusive::link_mode<boost::intrusive::auto_unlink>> {
 public:
  bool linked() const noexcept { return is_linked(); }
};

class intrusive_list {
 public:
  void push(list_hook& item) noexcept {
    item.unlink();
    members_.push_front(item);
  }

  // The members now, so that the caller may unlink them while it walks the copy.
  template <class T>
  std::vector<T*> snapshot() const {
    std::vector<T*> items;
    for (const list_hook& member : members_)
      items.push_back(static_cast<T*>(const_cast<list_hook*>(&member)));
    return items;
  }

 private:
  boost::intrusive::list<list_hook, boost::intrusive::constant_time_size<false>> members_;
};

}  // namespace redlock::detail

#endif
