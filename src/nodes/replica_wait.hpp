#ifndef REDLOCK_NODES_REPLICA_WAIT_HPP
#define REDLOCK_NODES_REPLICA_WAIT_HPP

#include "net/multiplexer.hpp"
#include "resp/value.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <string_view>

namespace redlock::detail {

// node_config::wait_replicas: a write (a SET of a round, an extension, a fence write-back) is
// followed on the same connection by `WAIT wanted timeout`, and the node's answer is the write's
// reply only once its master reports that many replicas have it. Pure, so that the rule is
// tested without servers.

// `WAIT wanted timeout` with a server-side timeout that leaves the request's own deadline
// (`node_timeout`) time to bring the answer back: three quarters of it, at least 1 ms.
shared_payload wait_command(unsigned wanted, std::chrono::milliseconds node_timeout);

// The node's answer to a write followed by WAIT. The write's failure stays as it was (the WAIT
// changes nothing then), and so does a reply that `counts` (request_options::
// counts_once_replicated; null: any reply) says is not a write to be replicated, such as a
// refusal. A write that succeeded counts only when WAIT answered at least `wanted`: otherwise the
// answer is an error reply "NOREPLICAS ..." naming `server` and the counts, which an operation
// reads as a failed vote (and, for a SET that may have been granted, cleans up).
struct write_answer {
  boost::system::error_code ec;
  resp::value reply;
};
write_answer after_replica_wait(boost::system::error_code write_ec, const resp::value& write_reply,
                                boost::system::error_code wait_ec, const resp::value& wait_reply,
                                unsigned wanted, std::string_view server,
                                bool (*counts)(const resp::value&) = nullptr);

}  // namespace redlock::detail

#endif
