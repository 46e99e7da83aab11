#ifndef REDLOCK_NET_WRITER_TURNS_HPP
#define REDLOCK_NET_WRITER_TURNS_HPP

#include "net/handler_memory.hpp"

#include <memory>
#include <vector>

namespace redlock::detail {

class connection;

// One posted turn for the writers of several connections (those of one client).
//
// A lock operation issues one request per node from inside one handler, and each request wakes
// its connection's writer. With a turn posted per connection, a round on five nodes cost five posts
// and five dispatches of the scheduler; sharing it, the round costs one. The woken connections
// write in the order they were woken, all where the first one's own turn would have run in the
// executor's queue: so a connection never writes before the handler that woke it has ended (a
// release and the hand-off SET issued after it still leave in one write), and the writes of a
// process keep their place between those of the other processes sharing the servers, as with
// a turn each. Writing at once instead was tried and made the shares of processes competing for
// one lock uneven (docs/performance.md).
//
// Every connection woken here must use one executor, the one the turn is posted through; a client's
// lock connections do. Not thread-safe: it belongs to that executor, like the connections.
//
// Lifetime: the posted turn holds this object, and so do the connections that share it (their
// options). It does not own the woken connections, or they and it would hold each other when the
// io_context is destroyed with a turn pending. A woken connection stays alive without it: its
// pending turn counts among its link's operations, and its link's loop, which owns it, does not
// end before they have all finished.
class writer_turns : public std::enable_shared_from_this<writer_turns> {
 public:
  writer_turns() = default;
  writer_turns(const writer_turns&) = delete;
  writer_turns& operator=(const writer_turns&) = delete;
  ~writer_turns() { memory_->drop_ref(); }

  // `conn`'s writer runs in the turn posted now, or in the one already posted and not yet run.
  // Called once per turn of `conn` (its writer is marked busy until then).
  void wake(connection& conn);

 private:
  void run_turn();

  std::vector<connection*> woken_;
  std::vector<connection*> running_;  // the turn's batch; its storage is reused
  bool posted_ = false;
  handler_memory* memory_ = handler_memory::create();
};

}  // namespace redlock::detail

#endif
