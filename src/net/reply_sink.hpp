#ifndef REDLOCK_NET_REPLY_SINK_HPP
#define REDLOCK_NET_REPLY_SINK_HPP

#include "resp/value.hpp"

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <utility>

namespace redlock::detail {

// Receives the replies of the library's own requests (connection::exec_direct), told apart by a
// tag: one object per fan-out instead of a type-erased handler per request.
//
// Every request holds a reference (sink_ref) from the moment it is issued until its one on_reply
// has returned, so a sink lives at least as long as a request may still answer it. The count is
// kept here, not atomic: a sink and the connections that answer it share one executor. A sink is
// told only when its first reference is taken and when its last is dropped, which is where a sink
// that its requests keep alive pins its owner, or frees itself; a fan-out's requests take and drop
// theirs without a call.
class reply_sink {
 public:
  virtual void on_reply(std::size_t tag, const boost::system::error_code& ec,
                        const resp::value& reply) = 0;

  // The references held now.
  unsigned references() const noexcept { return references_; }

 protected:
  // `counted`: false for a sink that outlives every request and may serve requests on several
  // threads (ignore_replies), whose count must not change.
  explicit reply_sink(bool counted = true) noexcept : counted_(counted) {}
  reply_sink(const reply_sink&) = delete;
  reply_sink& operator=(const reply_sink&) = delete;
  ~reply_sink() = default;

  // The first reference was taken (none was held before).
  virtual void first_reference_taken() noexcept {}
  // The last reference was dropped: the sink may free itself here, as the last thing it does.
  virtual void last_reference_dropped() noexcept {}

 private:
  friend class sink_ref;

  void add_reference() noexcept {
    if (counted_ && references_++ == 0) first_reference_taken();
  }
  void drop_reference() noexcept {
    if (counted_ && --references_ == 0) last_reference_dropped();
  }

  unsigned references_ = 0;
  bool counted_;
};

// The sink of requests whose replies nobody needs (a best-effort release, an ASKING); the
// connections still read and match them. Stateless, so one serves every such request and counts
// no references.
reply_sink& ignore_replies() noexcept;

// A reference to a reply_sink: taken on construction and copy, dropped when reset.
class sink_ref {
 public:
  sink_ref() noexcept = default;
  explicit sink_ref(reply_sink* sink) noexcept : sink_(sink) {
    if (sink_) sink_->add_reference();
  }
  sink_ref(const sink_ref& other) noexcept : sink_ref(other.sink_) {}
  sink_ref(sink_ref&& other) noexcept : sink_(std::exchange(other.sink_, nullptr)) {}
  sink_ref& operator=(sink_ref other) noexcept {
    std::swap(sink_, other.sink_);
    return *this;
  }
  ~sink_ref() { reset(); }

  void reset() noexcept {
    if (auto* sink = std::exchange(sink_, nullptr)) sink->drop_reference();
  }
  reply_sink* get() const noexcept { return sink_; }
  reply_sink* operator->() const noexcept { return sink_; }
  explicit operator bool() const noexcept { return sink_ != nullptr; }

 private:
  reply_sink* sink_ = nullptr;
};

}  // namespace redlock::detail

#endif
