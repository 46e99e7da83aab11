#ifndef REDLOCK_TEST_SUPPORT_NETNS_HPP
#define REDLOCK_TEST_SUPPORT_NETNS_HPP

#include <cstddef>
#include <string>
#include <vector>

namespace redlock::test {

// A private network for real partitions, built with `ip netns` (needs root, or CAP_SYS_ADMIN and
// CAP_NET_ADMIN): one client namespace and `servers` server namespaces, joined by one veth pair per
// server. Nothing is created in the caller's namespace: each pair is created inside the client
// namespace with its peer placed directly in the server namespace, and pair i is addressed
// 10.200.i.1/30 (client end) and 10.200.i.2/30 (server end), only inside those namespaces. Loopback
// is up everywhere.
//
// Names contain the pid and a per-process counter, so parallel test processes and several
// topologies in one process never collide. The destructor deletes every namespace created (which
// removes the veths with them), also when the constructor fails half-way. A namespace in which a
// process still runs (a server not yet killed) lives on anonymously until that process exits, but
// its name is gone at once.
//
// Every `ip` command is run by fork/exec (no shell); a failure throws std::runtime_error naming the
// command, its exit status and its output.
//
// Not thread-safe; use from one thread.
class netns {
 public:
  // Whether topologies can be built here: tries to add, enter and delete a throwaway namespace.
  // When not, `reason` says why (not root, `ip` missing, operation not permitted, ...).
  static bool permitted(std::string& reason);

  // The file that names a namespace made by `ip netns add`, for setns().
  static std::string path_of(const std::string& name);

  explicit netns(std::size_t servers);
  ~netns();
  netns(const netns&) = delete;
  netns& operator=(const netns&) = delete;

  std::size_t size() const noexcept { return servers_.size(); }
  const std::string& client_namespace() const noexcept { return client_; }
  const std::string& server_namespace(std::size_t i) const { return servers_.at(i); }
  // The server end of pair i, as seen from the client namespace.
  std::string server_address(std::size_t i) const;
  std::string client_address(std::size_t i) const;

  // Cuts server i off: its end of the pair goes down. The client end keeps its address and route
  // but loses carrier, so the client's packets (and ARP) to that server are silently dropped:
  // established connections and new connects time out, nothing is refused or reset. (Taking the
  // client end down instead would remove its route, and connect() would fail at once with
  // ENETUNREACH.) Idempotent.
  void partition(std::size_t i);
  // Reconnects server i (its end goes up again). Idempotent.
  void heal(std::size_t i);
  bool partitioned(std::size_t i) const { return partitioned_.at(i); }

  // Moves the calling thread into a named namespace (setns CLONE_NEWNET) and back into the one it
  // was in before when destroyed. Sockets stay in the namespace they were created in, so only
  // socket creation (connect, bind, listen) needs to happen under the guard; a thread that creates
  // sockets later (an io_context reconnecting) must stay under it as long as that may happen.
  // Guards nest. Other threads of the process are not affected. Threads started under a guard
  // inherit its namespace. An empty name leaves the thread where it is (for "the caller's").
  class guard {
   public:
    explicit guard(const std::string& name);
    ~guard();  // aborts if the thread cannot go back: it must never run on in the wrong namespace
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;

   private:
    int previous_fd_ = -1;
  };

 private:
  void set_server_end(std::size_t i, bool up);
  void destroy() noexcept;

  std::string client_;
  std::vector<std::string> servers_;
  std::vector<bool> partitioned_;
  std::vector<std::string> created_;  // namespaces to delete, in creation order
};

}  // namespace redlock::test

#endif
