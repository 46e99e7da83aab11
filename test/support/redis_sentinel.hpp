#ifndef REDLOCK_TEST_SUPPORT_REDIS_SENTINEL_HPP
#define REDLOCK_TEST_SUPPORT_REDIS_SENTINEL_HPP

#include "redlock/node_config.hpp"
#include "resp/value.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace redlock::test {

struct redis_sentinel_options {
  // The name the sentinels know the master by ("sentinel monitor NAME ..."), master= in
  // sentinel_url(). One word.
  std::string master_name = "mymaster";
  // Data nodes that replicate the master at first; the fixture runs 1 + replicas of them.
  std::size_t replicas = 1;
  std::size_t sentinels = 3;
  // How many sentinels must deem the master down before one of them may fail it over (1 ..
  // sentinels). The failover itself also needs the votes of a majority of all sentinels.
  std::size_t quorum = 2;
  // sentinel down-after-milliseconds: how long a server may stay silent before a sentinel deems
  // it down. Small, so that an automatic failover in a test takes seconds; large enough that a
  // busy machine does not make a healthy master look down.
  std::chrono::milliseconds down_after{1000};
  // sentinel failover-timeout: how long a failover may take before it is given up, and half the
  // time a sentinel waits before it tries again to fail the same master over (after a split
  // vote, say). A few seconds: promoting a replica on the loopback takes about one.
  std::chrono::milliseconds failover_timeout{3000};
  // requirepass and masterauth of every data node (one word, URL-safe); the sentinels log in to
  // them with it (sentinel auth-pass), and so do the fixture's own connections. Empty: none.
  std::string password;
  // requirepass of every sentinel (one word, URL-safe); the sentinels log in to each other with
  // it (sentinel sentinel-pass), and so do the fixture's own connections. Empty: none.
  std::string sentinel_password;
  // TLS: every server (data nodes and sentinels) also listens for TLS with the shared test PKI's
  // server certificate, and speaks TLS to the others (tls-replication; a sentinel then connects
  // to the data nodes and announces itself with TLS too). The group knows every server by its
  // TLS port: the sentinels name masters, replicas and each other by it. config() and
  // sentinel_url() are TLS ones; the fixture's own commands use the plain ports.
  bool tls = false;
  // The bound on every wait of the fixture: the group forming (from the constructor's start,
  // servers' start-up included), a failover, a server rejoining.
  std::chrono::milliseconds ready_timeout{30000};
};

// A real Redis Sentinel setup of local redis-server processes (each a redis_server: free
// loopback port, a temporary directory of its own, killed with the test process): one master,
// options.replicas replicas and options.sentinels sentinels that monitor the master. For
// BOOST_FIXTURE_TEST_CASE(name, redis_sentinel) or as a member.
//
// Data nodes are numbered 0 .. size()-1, sentinels 0 .. sentinels()-1; each keeps its number and
// port for the fixture's lifetime. At first node 0 is the master and the others replicate it;
// after a failover the sentinels decide, and master() asks them. Every server has a
// configuration file of its own that it may rewrite and that a restart reads back: a sentinel
// keeps its id, the group it knows and the master it last followed; a data node keeps the
// replicaof that a sentinel last recorded there (CONFIG REWRITE). Data sets are not kept: a
// restarted data node starts empty.
//
// Every wait is bounded by options.ready_timeout and polls; on timeout it throws
// std::runtime_error naming what was not ready, with the tail of every server's log. A command
// failing throws std::runtime_error naming the server, the command and the reason. Misuse (an
// unknown node or sentinel, bad options, no live sentinel to ask, a failover without a live
// replica) throws std::logic_error (std::invalid_argument for the options). The destructor kills
// every process and removes their directories, also when the constructor throws.
//
// A server is *live* when it is running and not paused. The fixture never sends to a paused
// server on its own (that would only time out); it does send what a test asks with command().
class redis_sentinel {
 public:
  // Starts the master, then the replicas, then (once the master reports every replica online)
  // the sentinels, and returns once the group is healthy (see wait_until_healthy()).
  explicit redis_sentinel(redis_sentinel_options options = {});
  ~redis_sentinel();
  redis_sentinel(const redis_sentinel&) = delete;
  redis_sentinel& operator=(const redis_sentinel&) = delete;

  const redis_sentinel_options& options() const noexcept { return options_; }
  const std::string& master_name() const noexcept { return options_.master_name; }

  // --- data nodes
  std::size_t size() const noexcept { return nodes_.size(); }
  std::uint16_t port(std::size_t node) const;
  pid_t pid(std::size_t node) const;  // -1 while stopped
  bool running(std::size_t node) const;
  bool paused(std::size_t node) const;
  bool live(std::size_t node) const { return running(node) && !paused(node); }
  // The data node the first live sentinel names as the master (SENTINEL
  // GET-MASTER-ADDR-BY-NAME), asked now; whether it is live is not checked.
  std::size_t master() const;
  std::uint16_t master_port() const { return port(master()); }
  std::uint16_t tls_port(std::size_t node) const;  // 0 without options.tls
  // Every data node but master(), by node number, stopped or not.
  std::vector<std::size_t> replicas() const;
  // The node as one standalone Redlock node (127.0.0.1, its port, options.password; with
  // options.tls its TLS port, trusting the shared test PKI's CA).
  node_config config(std::size_t node) const;
  std::string log_tail(std::size_t node, std::size_t lines = 20) const;
  // One command on `node`, logged in with options.password; an error reply is returned, not
  // thrown. The node must be running (a paused one answers only when resumed, or the call times
  // out after 10 s).
  resp::value command(std::size_t node, std::span<const std::string_view> args) const;
  resp::value command(std::size_t node, std::initializer_list<std::string_view> args) const {
    return command(node, std::span<const std::string_view>(args.begin(), args.size()));
  }

  // --- sentinels
  std::size_t sentinels() const noexcept { return sentinels_.size(); }
  std::uint16_t sentinel_port(std::size_t sentinel) const;
  std::vector<std::uint16_t> sentinel_ports() const;  // by sentinel number
  pid_t sentinel_pid(std::size_t sentinel) const;     // -1 while stopped
  bool sentinel_running(std::size_t sentinel) const;
  // "redis+sentinel://127.0.0.1:P?master=NAME&seed=127.0.0.1:Q&seed=...", P the port of
  // sentinel `first` and each other sentinel a seed, in order; with ":password@" before the host
  // when the data nodes have a password, and "&sentinel_password=..." when the sentinels do.
  // With options.tls: "rediss+sentinel://", every port the TLS one, and "&ca=FILE".
  std::string sentinel_url(std::size_t first = 0) const;
  std::string sentinel_log_tail(std::size_t sentinel, std::size_t lines = 20) const;
  // One command on a sentinel, logged in with options.sentinel_password; an error reply is
  // returned, not thrown. The sentinel must be running.
  resp::value sentinel_command(std::size_t sentinel, std::span<const std::string_view> args) const;
  resp::value sentinel_command(std::size_t sentinel,
                               std::initializer_list<std::string_view> args) const {
    return sentinel_command(sentinel, std::span<const std::string_view>(args.begin(), args.size()));
  }

  // --- faults and administration
  // SENTINEL FAILOVER on the first live sentinel, asked again should the sentinels give that
  // failover up, until the group is healthy with another master: every live sentinel names it,
  // it reports role:master, and every other live data node (the old master too, once a sentinel
  // has turned it into a replica) replicates it. Returns the new master. Needs a live replica.
  std::size_t failover();
  void pause(std::size_t node);   // SIGSTOP, returns once the process has stopped
  void resume(std::size_t node);  // SIGCONT
  void stop(std::size_t node);    // SIGKILL, reaped; the port and directory are kept
  // Stops the node if it is running, starts it on the same port with its configuration file (an
  // empty data set; a replica of whichever master a sentinel last made it follow, else a master)
  // and waits until the group is healthy, which may take a sentinel turning it into a replica.
  void restart(std::size_t node);
  void stop_sentinel(std::size_t sentinel);  // SIGKILL, reaped; port and configuration kept
  // Stops the sentinel if it is running, starts it on the same port with the configuration it
  // rewrote (its id, the group, the master it last knew) and waits until the group is healthy.
  void restart_sentinel(std::size_t sentinel);

  // Waits until: every live sentinel names the same data node as the master and flags it neither
  // down nor in failover; that node is live and reports role:master; every other live data node
  // reports role:slave of it with master_link_status:up; every live sentinel lists every live
  // replica (SENTINEL REPLICAS) and every other sentinel (SENTINEL SENTINELS: sentinels() - 1
  // entries), none of the live ones flagged down or disconnected.
  void wait_until_healthy();

 private:
  void wait_until_healthy(std::chrono::steady_clock::time_point deadline);
  struct server;

  server& node_at(std::size_t node);
  const server& node_at(std::size_t node) const;
  server& sentinel_at(std::size_t sentinel);
  const server& sentinel_at(std::size_t sentinel) const;
  std::string describe(std::size_t node) const;
  std::string describe_sentinel(std::size_t sentinel) const;
  std::size_t first_live_sentinel() const;
  std::size_t node_of(std::string_view ip, std::string_view port) const;  // npos when none
  // The port the group knows a server by (the TLS one with options.tls).
  std::uint16_t known_port(std::size_t node) const;
  std::uint16_t known_sentinel_port(std::size_t sentinel) const;
  // The node `sentinel` names as the master, asked now.
  std::size_t master_named_by(std::size_t sentinel) const;

  // Empty when healthy (and then `agreed_master` is the master the sentinels agree on), else
  // what is not.
  std::string health_problem(std::size_t& agreed_master) const;
  // Calls `problem` until it returns an empty string; throws at options_.ready_timeout, or at
  // `deadline` when given (the start-up's waits share one).
  template <class Problem>
  void wait_until(std::string_view what, Problem problem) const;
  template <class Problem>
  void wait_until(std::string_view what, Problem problem,
                  std::chrono::steady_clock::time_point deadline) const;

  redis_sentinel_options options_;
  // Sentinels after the data nodes: destroyed first, so that none sees its master die and starts
  // a failover while the fixture is being torn down.
  std::vector<std::unique_ptr<server>> nodes_;
  std::vector<std::unique_ptr<server>> sentinels_;
};

}  // namespace redlock::test

#endif
