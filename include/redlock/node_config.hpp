#ifndef REDLOCK_NODE_CONFIG_HPP
#define REDLOCK_NODE_CONFIG_HPP

#include "redlock/config.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlock {

/// How to speak TLS to a node (a "rediss://" URL). A fresh TLS session is made for every connect,
/// including reconnects; nothing of an earlier session is reused.
struct tls_options {
  /// Whether the node is reached over TLS; node_config::from_url() sets it for the rediss schemes.
  bool enabled = false;

  /// Trusted certificate authorities, PEM: a file and/or an OpenSSL hashed directory (c_rehash).
  /// Both empty: the system's default CA paths.
  std::string ca_file{};
  /// The OpenSSL hashed directory of trusted certificate authorities; see ca_file.
  std::string ca_dir{};

  /// The client's certificate chain and private key, PEM, for servers that require one
  /// (tls-auth-clients). Both or neither.
  std::string cert_file{};
  /// The client's private key, PEM; see cert_file.
  std::string key_file{};

  /// The name the server's certificate must match, and the SNI sent. Empty: the node's host. SNI is
  /// not sent for an IP literal (RFC 6066); the certificate is then checked against the address.
  std::string server_name{};

  /// Peer verification (chain and name). Turning it off accepts any server, including an attacker
  /// in the middle; the client then logs a warning on every connect.
  bool verify_peer = true;

  friend bool operator==(const tls_options&, const tls_options&) = default;
};

/// What one node_config stands for. Whatever the kind, it is one Redlock node: it grants or refuses
/// a lock as one vote, and a majority of such nodes decides.
enum class node_kind : std::uint8_t {
  standalone,  ///< one Redis server, reached at host:port or unix_path (the default)
  cluster,     ///< a Redis Cluster: each key goes to the shard that owns its hash slot
  sentinel,    ///< the master that a group of Redis Sentinels names, followed across failovers
};

/// Where one Redis master lives and how to log in to it.
///
/// @see The guide: @ref md_docs_configuration, @ref md_docs_tls_and_unix_sockets, @ref
/// md_docs_cluster, @ref md_docs_sentinel.
struct REDLOCK_API node_config {
  /// Host name or IP address of the node (an IPv6 address without brackets).
  std::string host = "127.0.0.1";
  /// TCP port of the node.
  std::uint16_t port = 6379;
  std::string username{};  ///< ACL user; empty means the default user
  std::string password{};  ///< empty means no AUTH is sent
  int database = 0;        ///< SELECTed after AUTH when not 0

  /// The type of #tls: redlock::tls_options.
  using tls_options = redlock::tls_options;
  tls_options tls{};  ///< TLS over TCP when tls.enabled; not with unix_path

  /// When not empty, the node is reached through this Unix-domain socket and host/port are unused.
  std::string unix_path{};

  /// What stands behind host:port. Default: standalone.
  ///   - standalone: one server; the fields above say everything.
  ///   - cluster: host:port is one node of a Redis Cluster, the first one asked for the topology;
  ///     the whole cluster is this one Redlock node. username, password and tls apply to every
  ///     node of the cluster. database must be 0 (a cluster has no other) and unix_path empty.
  ///   - sentinel: host:port is one Sentinel of the group that watches the master named
  ///     sentinel_master. The lock is taken on that master, with username, password, database and
  ///     tls; the sentinels are asked only where the master is, with sentinel_username and
  ///     sentinel_password (and the same tls settings). unix_path must be empty.
  node_kind kind = node_kind::standalone;

  /// cluster and sentinel: further members of the same group, tried in this order after
  /// host:port: other nodes of the cluster, or the other sentinels. Each is "host:port", an IPv6
  /// host in brackets ("[::1]:7000"). A standalone node takes none. Default: none.
  std::vector<std::string> seeds{};

  /// sentinel only, and required there: the name the sentinels know the master by (the NAME of
  /// "sentinel monitor NAME ..."). Default: empty.
  std::string sentinel_master{};

  /// sentinel only: how to log in to the sentinels, as username and password do for the master.
  /// An empty sentinel_password sends no AUTH to the sentinels; a user needs a password. Default:
  /// empty.
  std::string sentinel_username{};
  /// The sentinels' password; see sentinel_username.
  std::string sentinel_password{};

  /// Every kind. 0 (the default) turns it off. N > 0: after a SET that grants the lock, and after
  /// an extension, the master must report with WAIT that N of its replicas have the write within
  /// node_timeout, else the node's vote counts as a failure. This narrows the window in which a
  /// failover to a replica that had not yet received the key lets a second client take the lock.
  /// At most 64: no master has more replicas, and a count it cannot reach would fail every vote.
  unsigned wait_replicas = 0;

  /// Parses one of
  /// @code{.unparsed}
  ///   redis://[[user]:password@]host[:port][/db][?wait_replicas=N]
  ///   rediss://[[user]:password@]host[:port][/db][?TLS...][&wait_replicas=N]
  ///   unix://[[user]:password@]/path/to/redis.sock[?db=N][&wait_replicas=N]
  ///   redis+cluster://[[user]:password@]host[:port][?seed=host[:port]&seed=...][&wait_replicas=N]
  ///   rediss+cluster://... as redis+cluster://, and the TLS parameters
  ///   redis+sentinel://[[user]:password@]host[:port][/db]?master=NAME[&seed=host[:port]&seed=...]
  ///                    [&sentinel_user=USER&sentinel_password=PASSWORD][&wait_replicas=N]
  ///   rediss+sentinel://... as redis+sentinel://, and the TLS parameters
  /// @endcode
  /// where the TLS parameters are ca=FILE, ca_dir=DIR, cert=FILE, key=FILE (cert and key together),
  /// sni=NAME and verify=no|yes, each at most once, filling `tls`. Schemes are case-insensitive.
  /// The port defaults to 6379; in a sentinel URL, for the sentinels and their seeds, to 26379.
  /// - redis+cluster: kind = cluster; host:port is the first node of the cluster and each seed=, in
  ///   order, goes to `seeds`. A database path other than "/0" is refused: a cluster has only
  ///   database 0.
  /// - redis+sentinel: kind = sentinel; host:port and the seeds are sentinels; master= is required
  ///   and goes to sentinel_master. The user and password before '@' log in to the master,
  ///   sentinel_user= and sentinel_password= to the sentinels. The path is the master's database.
  /// - Seeds are stored as "host:port" ("[::1]:7000"), the port filled in when left out.
  /// - wait_replicas= is a decimal number from 0 to 64, on every scheme.
  ///
  /// Only seed= may be repeated; a parameter that the scheme does not take is refused by its name.
  /// Percent-escapes (\%XX) are decoded in user, password and query values; an IPv6 host is written
  /// in brackets ("redis://[::1]:6380"). Escape '&' in sentinel_password as %26: an unescaped one
  /// is kept in the password unless the name of a parameter and '=' follow it. Throws
  /// std::invalid_argument whose message names the bad part (scheme, host, port, database, seed,
  /// escape, query parameter) and never shows the password or the sentinel password.
  /// Whitespace followed by another URL ("redis://a:1 redis://b:2", a list written without commas)
  /// is refused with a message that gives its position and does not quote the URL.
  static node_config from_url(std::string_view url);

  /// As above, for a C string such as the result of std::getenv. A null pointer (an environment
  /// variable that is not set) throws std::invalid_argument saying so, instead of being read.
  /// String literals resolve to this overload; std::string and std::string_view to the one above.
  static node_config from_url(const char* url);

  /// Parses a comma-separated list of such URLs, the form a setting such as REDLOCK_NODES takes:
  /// "redis://10.0.0.1,redis://10.0.0.2:6380,redis://10.0.0.3". Blanks around a URL are ignored.
  /// A comma always ends a URL, also in its query: a cluster's seeds are several seed= parameters
  /// ("redis+cluster://a:7000?seed=b:7000&seed=c:7000"), never a comma-separated value.
  /// Throws std::invalid_argument naming the problem: an empty list, an empty entry (by its
  /// position), an entry holding two URLs separated by whitespace instead of a comma (by its
  /// position), a bad URL (as from_url), or a node whose address() is listed twice. Messages never
  /// contain a password.
  static std::vector<node_config> from_url_list(std::string_view urls);

  /// As above, for a C string such as the result of std::getenv("REDLOCK_NODES"). A null pointer
  /// (the variable is not set) throws std::invalid_argument saying so, instead of being read.
  /// String literals resolve to this overload; std::string and std::string_view to the one above.
  static std::vector<node_config> from_url_list(const char* urls);

  /// "host:port" (IPv6 in brackets), or "unix:PATH" for a Unix socket; names the node in messages.
  /// For a cluster or sentinel node, the host:port of its first member (not the seeds). Never
  /// contains credentials.
  std::string address() const;

  friend bool operator==(const node_config&, const node_config&) = default;
};

}  // namespace redlock

#endif
