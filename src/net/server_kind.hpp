#ifndef REDLOCK_NET_SERVER_KIND_HPP
#define REDLOCK_NET_SERVER_KIND_HPP

#include "redlock/node_config.hpp"
#include "resp/value.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace redlock::detail {

// Whether a server is of the kind its URL names, socket-free: a Redis Sentinel given as redis://
// or redis+cluster://, a plain server given as redis+sentinel:// or redis+cluster://, or a cluster
// node given as redis+sentinel:// is a misconfiguration that no retry cures
// (error::wrong_node_kind); the verdicts say so and name the URL to use instead.

// What a link must reach, judged on HELLO's "mode" in the handshake.
//  - any: not asked (no HELLO is sent for it).
//  - standalone: a server that holds keys: a sentinel fails. A cluster node passes, since one
//    that serves every slot works as redis://; its MOVED and ASK replies fail the requests they
//    answer (cluster_redirect_refusal).
//  - cluster: a cluster node (redis+cluster://): a sentinel or a server with cluster mode off
//  fails.
//  - sentinel: a sentinel (redis+sentinel:// names sentinels): any other server fails.
enum class server_kind : std::uint8_t { any, standalone, cluster, sentinel };

// What a server says it is: HELLO's "mode" (in RESP2 a flat array of names and values, in RESP3 a
// map). Empty when the reply does not say: an error (Redis before 6 knows no HELLO; an ACL user
// may not run it), or no "mode" field.
std::optional<server_kind> server_mode_of(const resp::value& hello_reply);

// The refusal of a server of `found` mode on a link that must reach `expected`, worded to follow
// "host:port: "; empty when it may serve. `node` is the server as the link reaches it.
std::optional<std::string> wrong_kind_refusal(server_kind expected, server_kind found,
                                              const node_config& node);

// A reply of a node given as redis:// that only a cluster node sends, MOVED or ASK: the refusal
// that replaces it, worded to follow "host:port: ". Empty for any other reply.
std::optional<std::string> cluster_redirect_refusal(const resp::value& reply,
                                                    const node_config& node);

// With a reply of cluster_redirect_refusal's: replaces it by an error reply with the refusal after
// `name` ("host:port"), and returns true; false (`reply` left as it was) for any other reply.
bool replace_cluster_redirect(resp::value& reply, std::string_view name, const node_config& node);

// The URL for the server of `node` as a node of `kind`, without its credentials:
// "redis+cluster://127.0.0.1:7000", "rediss+sentinel://host:26379?master=NAME" (NAME left for
// the user to fill in where the node does not know it).
std::string url_as(const node_config& node, node_kind kind);

}  // namespace redlock::detail

#endif
