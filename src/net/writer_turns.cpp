#include "net/writer_turns.hpp"

#include "completion.hpp"
#include "net/connection.hpp"

#include <boost/asio/bind_allocator.hpp>

#include <utility>

namespace redlock::detail {

void writer_turns::wake(connection& conn) {
  woken_.push_back(&conn);
  if (posted_) return;
  posted_ = true;
  auto turn =
      boost::asio::bind_allocator(handler_allocator<void>(*memory_, handler_memory::use::turn),
                                  [self = shared_from_this()] { self->run_turn(); });
  post_through(conn.executor_, conn.io_executor_, std::move(turn));
}

void writer_turns::run_turn() {
  // A connection woken while the batch runs (a failed write answers its requests, whose sinks may
  // issue more) is in the next turn, posted then.
  posted_ = false;
  std::swap(woken_, running_);
  for (connection* conn : running_) {
    conn->op_done(1);
    conn->write_turn();
  }
  running_.clear();
}

}  // namespace redlock::detail
