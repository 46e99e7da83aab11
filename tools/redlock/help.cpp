#include "help.hpp"

#include "redlock/version.hpp"

#include <boost/version.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>

namespace redlock::cli {
namespace {

// The overview, before the commands in `redlock --help`: the first line's summary, the usage
// lines, what the tool is for, and examples.
constexpr std::string_view summary_line =
    "a distributed lock over Redis (the Redlock algorithm) for scripts and cron jobs";

constexpr std::string_view usage_section = R"(
  redlock run [OPTIONS] RESOURCE [RESOURCE...] -- COMMAND [ARGS...]
  redlock run [OPTIONS] --permits N NAME -- COMMAND [ARGS...]
  redlock run [OPTIONS] --read|--write NAME -- COMMAND [ARGS...]
  redlock status [OPTIONS] RESOURCE [RESOURCE...]
  redlock status [OPTIONS] --permits N | --read | --write NAME
  redlock acquire [OPTIONS] RESOURCE               (prints the lock's TOKEN)
  redlock extend [OPTIONS] RESOURCE --token TOKEN --ttl DURATION
  redlock release [OPTIONS] RESOURCE --token TOKEN
  redlock release [OPTIONS] RESOURCE --force [--yes]
  redlock help [run|status|acquire|extend|release]  (also: redlock --help, redlock COMMAND --help)
  redlock --version
)";

constexpr std::string_view description_section = R"(
run is the safe default: it renews the lock while COMMAND runs, releases it when COMMAND ends and
stops COMMAND when the lock is lost. acquire, extend and release are for a script whose steps
cannot be one COMMAND: the lock acquire leaves is renewed by nobody, so a script that takes longer
than its TTL loses it without being told, and one that dies leaves it held until the TTL ends.
)";

constexpr std::string_view examples_section = R"(
  export REDLOCK_NODES=redis://redis-a:6379,redis://redis-b:6379,redis://redis-c:6379
  redlock run --ttl 30s --wait 10s nightly-report -- ./make_report.sh --full
  redlock run --wait 0 --conflict-exit-code 0 nightly-report -- ./make_report.sh
  redlock status nightly-report
  redlock run --permits 4 --wait 10m exports -- ./export.sh
  redlock run account:17 account:42 -- ./transfer.sh
)";

constexpr std::string_view run_section = R"(
redlock run [OPTIONS] RESOURCE [RESOURCE...] -- COMMAND [ARGS...]
  Takes the lock RESOURCE on a majority of the nodes, runs COMMAND while renewing the lock at half
  its TTL, releases the lock when COMMAND ends and exits with COMMAND's exit status.
  If the lock cannot be kept (too few nodes confirm a renewal in time, or the key is gone or
  owned by someone else), COMMAND gets SIGTERM, then SIGKILL after the grace period (with
  --grace 0: SIGKILL at once), and redlock exits 76. SIGINT, SIGTERM and SIGHUP sent to redlock
  while COMMAND runs are passed on to COMMAND as they are; the lock is released once COMMAND has
  ended. While redlock still waits for the lock they cancel the wait (nothing is left on the
  nodes) and redlock exits 128+N (130 for SIGINT, 143 for SIGTERM). Signals that were ignored
  when redlock started stay ignored, for COMMAND too. COMMAND also gets SIGTERM (SIGKILL with
  --grace 0) if redlock itself dies, since its lock then stops being renewed.

  With --permits N, RESOURCE is the NAME of a semaphore of N permits instead: redlock takes one
  of them, and at most N commands run at once under that NAME across every host that uses these
  nodes (all of them must give the same N). Permit i is the lock on the key {NAME}:slot:i (NAME:slot:i
  when NAME has a {hash tag} of its own), renewed, lost and released exactly as the lock above;
  COMMAND gets the permit's number, 0..N-1, in $REDLOCK_PERMIT.

  With several RESOURCEs, redlock takes all of them or none, as one lock: on each node one script
  sets every key only when none is held there, so two runs that share a RESOURCE exclude each
  other whatever order they name them in, and no run holds one while it waits for another (no
  deadlock). They are renewed, lost and released together. A RESOURCE given twice counts once; at
  most 64. On a Redis Cluster node their keys must share a hash slot: give them one {hash tag}.

  Options:
    --nodes URL,...   the Redlock nodes: comma-separated URLs, each a Redis master, a whole
                      Redis Cluster or a Sentinel-managed master (see "Node URLs" below;
                      default: $REDLOCK_NODES, else redis://127.0.0.1:6379)
    --ttl DURATION    lifetime of the lock on each node, renewed at half-life while COMMAND runs;
                      at least 500ms (default 30s)
    --wait DURATION   how long to keep trying to get the lock, with rounds on all nodes
                      separated by short random pauses (default 10s). 0: exactly one round,
                      like flock -n: if the lock is held elsewhere or too few nodes answer,
                      redlock gives up at once without running COMMAND
    --grace DURATION  after the lock is lost, time between SIGTERM and SIGKILL to COMMAND
                      (default 5s). 0: SIGKILL at once, no SIGTERM first
    --conflict-exit-code N
                      exit with N (0..255) instead of 75 when the lock is held by another owner:
                      at once with --wait 0, or when --wait ran out while it was held (like
                      flock -E); e.g. 0 to skip quietly while another run has the lock. Too few
                      nodes answering still exits 75; misconfigured nodes exit 1
    --fencing         acquire with a fencing token, a number that grows from one holder of
                      RESOURCE to the next (one more round trip); COMMAND gets it in
                      $REDLOCK_FENCING_TOKEN, to pass to a storage that rejects lower ones.
                      With --permits, each permit has a counter of its own; with several
                      RESOURCEs, each RESOURCE ($REDLOCK_FENCING_TOKENS)
    --permits N       take one of the N permits (1..1024) of the semaphore RESOURCE instead of
                      the lock RESOURCE (see above). --wait 0: rounds over the permits that may
                      be free, no waiting; contended means all N are held
    --read, --write   take the read-write lock RESOURCE for reading (beside other readers) or
                      for writing (alone) instead of the lock RESOURCE. A writer waiting for
                      readers keeps new readers out. The key is {NAME}:read or {NAME}:write
    -q, --quiet       no "acquired", "released" and warning lines on stderr (errors are still
                      printed)
    --json            each line on stderr as a JSON object, for scripts (see below)
    TLS options       see below
    -h, --help        this help

  Unless --quiet, stderr gets one line when the lock is acquired and one when it is released:
    redlock: acquired RESOURCE (valid 29990 ms, granted by 5 of 5 nodes, quorum 3)
    redlock: released RESOURCE after 1520 ms
  With --permits it names the permit and its key, and the released line the permit:
    redlock: acquired NAME permit 2 of 0..3 (key {NAME}:slot:2, valid 29990 ms, granted by ...)
    redlock: released NAME permit 2 after 1520 ms
  The acquired line waits for the nodes that had not answered yet when a quorum had granted the
  lock, for at most 50 ms (then it says "granted by 3 of 5 nodes so far"). When fewer than all
  nodes granted it, a warning line names each node's answer; so does a renewal that failed while
  COMMAND runs (the lock is kept as long as a later renewal succeeds in time):
    redlock: warning: "RESOURCE" acquired on 3 of 5 nodes (quorum 3): ...

  With --json, each line redlock writes on stderr is a JSON object on a line of its own (JSON
  Lines) instead; COMMAND's own output is left as it is. --quiet leaves out the same events as it
  leaves out lines: acquired, released, warning and interrupted. Usage errors (exit 2) stay text.
  Every object has "event" and "resource" (RESOURCE, or NAME with --permits); with several
  RESOURCEs, "resources" (an array, in the order given) in its place. The other fields:
    acquired      permit (null without --permits), key (the key on the nodes), token (as in
                  $REDLOCK_TOKEN), fencing_token (null without --fencing), validity_ms,
                  granted_nodes, nodes, quorum, all_nodes_answered (false: "so far"); with
                  several RESOURCEs key and fencing_token are null, and fencing_tokens is an
                  array in the order of "resources" (null without --fencing)
    released      permit, held_ms, exit_code (COMMAND's, which redlock exits with)
    warning       message
    not_acquired  reason (contended, no_quorum, validity_expired, wait_timeout, misconfigured,
                  invalid or other), exit_code, message (what the text line says)
    lost          permit, exit_code (76), message
    interrupted   signal (e.g. "SIGTERM"), exit_code (128+N)
    cannot_run    exit_code (126, 127, or 1 when no process could be started), message
    error         exit_code, message
  For example:
    {"event":"released","resource":"job","permit":null,"held_ms":1520,"exit_code":0}

)";

constexpr std::string_view status_section = R"(
redlock status [OPTIONS] RESOURCE [RESOURCE...]
redlock status [OPTIONS] --permits N | --read | --write NAME
  Asks every node about RESOURCE and prints one line per node: its address, whether it could be
  reached (and if not, why), whether the key is held or free, its remaining TTL and the first 8
  characters of the owner's token. Each node is connected to as `run` would connect, so a node
  that could not serve the lock is shown as "misconfigured" with the reason: a wrong password
  (cannot log in: ...), a database it refuses (cannot select database ...), an ACL user without
  a command the lock needs (permission denied: ACL user "bob" may not run EVALSHA, ...), a port
  where no Redis answers, or a URL of the wrong kind (a cluster member given as redis://, a
  sentinel given as redis://, a plain server given as redis+sentinel://, a master name the
  sentinels do not know). A verdict line follows:
    RESOURCE: held on 3 of 5 nodes (quorum 3): locked (token 1a2b3c4d)
    RESOURCE: held on 0 of 5 nodes (quorum 3): free
    RESOURCE: held on 2 of 5 nodes (quorum 3): not locked (below quorum)
    RESOURCE: held on 5 of 5 nodes (quorum 3): not a lock (a value of another type is on a
      quorum of nodes: no lock can be taken under this name)
  A key of a read-write lock ({NAME}:read, {NAME}:write, {NAME}:write-waiting) gets a line
  "hint: ..." naming the lock and `redlock status --read NAME`. When some nodes could not be
  asked, a count of each kind follows, "unreachable nodes: N" and "misconfigured nodes: N". It
  changes no key on the nodes (like run, it loads the lock's Lua scripts into their script
  cache). Exits 0 when a quorum of nodes answered (whatever the lock's state), else 1.

  With several RESOURCEs, each is shown so, one block each (its lines per node and its verdict,
  blocks apart by an empty line), all read in one step per node, then the set of them, as
  `run RESOURCE...` holds it (one token on every key):
    a, b and c: 2 of 3 locked by token 1a2b3c4d, 1 free (quorum 3 of 5 nodes)
  ("by N owners" when the locked ones have different owners; ", N not locked" and ", N unknown"
  when some are). On a Redis Cluster node they must share a hash slot, as for run.

  With --permits N, RESOURCE is a semaphore's NAME and every one of its N slot keys is shown so,
  one block each (its lines per node and its verdict, blocks apart by an empty line), all read in
  one step per node; a summary follows them:
    {NAME}:slot:0: held on 5 of 5 nodes (quorum 3): locked (token 1a2b3c4d)
    ...
    NAME: 1 of 2 permits held (quorum 3 of 5 nodes)
  with ", N unknown" added for slots whose state the nodes that answered cannot settle.

  With --read or --write (either: both show the whole lock), NAME is a read-write lock, and each
  node's line shows its writer (token and TTL), its live readers (a reader counts until its
  deadline on the node's clock; those past it are counted apart, and left where they are), and
  the mark of a writer that waits for the readers; then the verdict:
    NAME: writer on 0 of 5 nodes, readers on 5, waiting writer on 5 (quorum 3): read-locked by
      2 readers; a writer waits (mark 9f8e7d6c on a quorum): new readers are kept out
  The state is write-locked (token ...) when one writer's token is on a quorum, read-locked by N
  readers when N readers are live on a quorum each, else free, not locked (below quorum) or
  unknown, as for a lock.

  Options:
    --nodes URL,...     the Redlock nodes, as for run (default: $REDLOCK_NODES, else
                        redis://127.0.0.1:6379)
    --timeout DURATION  how long to wait for each node, connecting included (default 1s)
    --permits N         NAME is a semaphore of N permits (1..1024): show each slot
    --read, --write     NAME is a read-write lock: show its writer, readers and waiting writer
    --json              JSON objects instead of the text, for scripts (see below)
    TLS options         see below
    -h, --help          this help
  A TLS node's line ends in "tls, verified as NAME" (or "tls, NOT verified"), a Unix socket's in
  "unix socket". "subscribers N" counts the clients that wait for some lock on that node: lock
  clients subscribe to release announcements (channel redlock:released) while they wait. On a
  cluster node they subscribe per hash slot (SSUBSCRIBE on the slot's master), and N counts the
  clients subscribed to the key's slot there.

  With --json, stdout gets one JSON object per line (JSON Lines) instead of the text, in the same
  order without the empty lines: a "node" object per node, then the "verdict" (with --permits
  or several RESOURCEs, both for each key, then a "semaphore" or "set" summary; with --read or
  --write, an "rw_node" object per node and an "rw_verdict"). Each object is one line; wrapped
  here:
    {"type":"node","resource":"job","index":0,"address":"127.0.0.1:6379","state":"held",
     "token":"1a2b3c4d...","pttl_ms":29512,"note":null,"error":null,"subscribers":0,"link":null}
    {"type":"verdict","resource":"job","state":"locked","token":"1a2b3c4d...","nodes":5,
     "quorum":3,"answered":5,"unreachable":0,"misconfigured":0,"held":5,"owner_nodes":5,
     "quorum_answered":true,"hint":null}
    {"type":"semaphore","resource":"NAME","permits":2,"held":1,"unknown":0,
     "slots":["locked","free"],"nodes":5,"quorum":3,"unreachable":0,"misconfigured":0,
     "quorum_answered":true}
    {"type":"set","resources":["a","b"],"states":["locked","free"],"locked":1,"free":1,
     "unknown":0,"token":"1a2b3c4d...","nodes":5,"quorum":3,"unreachable":0,"misconfigured":0,
     "quorum_answered":true}
    {"type":"rw_node","resource":"NAME","index":0,"address":"127.0.0.1:6379","state":"held",
     "writer":null,"writer_pttl_ms":null,"readers":["1a2b3c4d...","5e6f7a8b..."],
     "readers_left_ms":[29000,28000],"expired_readers":0,"waiting_writer":"9f8e7d6c...",
     "waiting_writer_pttl_ms":29500,"note":null,"error":null,"subscribers":1,"link":null}
    {"type":"rw_verdict","resource":"NAME","state":"read_locked","writer":null,
     "readers":["1a2b3c4d...","5e6f7a8b..."],"waiting_writer":"9f8e7d6c...","nodes":5,
     "quorum":3,"answered":5,"unreachable":0,"misconfigured":0,"writer_nodes":0,
     "reader_nodes":5,"waiting_writer_nodes":5,"quorum_answered":true}
  node: resource is the key asked about (a slot's key with --permits); index counts from 0 in
    the order of the nodes; state is free, held, unreachable or misconfigured; token is the
    key's whole value and pttl_ms its remaining TTL (-1: none), both null unless the key is held
    as a lock; note says why a held key is not a lock, error why the node could not be asked;
    subscribers and link as in the text, null when the text shows none.
  verdict: state is locked, free, not_locked, unknown or not_a_lock; token the owner's whole
    value when locked, else null; answered, unreachable and misconfigured count the nodes of each
    kind; held the nodes the key is on; owner_nodes the nodes of the owner with the most;
    quorum_answered whether the verdict is certain (exit 0); hint the hint line's text, or null.
  semaphore: held and unknown count slots; slots lists each slot's state by its number.
  set: states lists each resource's state in the order given; locked, free and unknown count
    them; token is the one owner of every locked resource, else null.
  rw_node: state is free, held (a writer, a live reader or a mark is there), unreachable or
    misconfigured; writer and waiting_writer are the tokens (the mark's id), with their PTTLs;
    readers the live readers' tokens, readers_left_ms the time to each one's deadline,
    expired_readers those past it; all null when the node could not be asked.
  rw_verdict: state is write_locked, read_locked, free, not_locked or unknown; writer the token
    on a quorum when write_locked; readers those live on a quorum; waiting_writer the mark on a
    quorum (new readers are kept out), else null; writer_nodes, reader_nodes and
    waiting_writer_nodes count the nodes with each.

)";

constexpr std::string_view acquire_section = R"(
redlock acquire [OPTIONS] RESOURCE
  Takes the lock RESOURCE as run does (the same rounds, --wait and --conflict-exit-code), prints
  its token on stdout, alone on one line, and exits 0, leaving the lock held. Nobody renews it:
  it ends when --ttl runs out, unless `redlock extend` gives it a new TTL or `redlock release`
  deletes it first, both with that token:
    TOKEN=$(redlock acquire --ttl 5m nightly-report) || exit
    ./first-step.sh
    redlock extend nightly-report --token "$TOKEN" --ttl 5m || exit
    ./second-step.sh
    redlock release nightly-report --token "$TOKEN"
  Unless --quiet, stderr says how long the lock is valid, on how many nodes it was granted, and
  the commands that extend and release it. SIGINT, SIGTERM and SIGHUP while it waits cancel the
  wait (nothing is left on the nodes) and redlock exits 128+N. A lock not acquired exits and
  says so as run does: 75 (or --conflict-exit-code N), 1 for misconfigured nodes, one line on
  stderr naming the cause and every node's answer.

  Options:
    --nodes URL,...   the Redlock nodes, as for run (default: $REDLOCK_NODES, else
                      redis://127.0.0.1:6379)
    --ttl DURATION    lifetime of the lock on each node, not renewed; at least 500ms
                      (default 30s)
    --wait DURATION   how long to keep trying, as for run (default 10s; 0: exactly one round)
    --conflict-exit-code N
                      exit with N (0..255) instead of 75 when the lock is held by another owner,
                      as for run
    --fencing         acquire with a fencing token (the lines on stderr and --json give it)
    -q, --quiet       nothing on stderr but errors; stdout still gets the token
    --json            stdout gets one JSON object instead of the token, whatever the outcome;
                      stderr then gets nothing but usage errors (see below)
    TLS options       see below
    -h, --help        this help

  With --json, the object on stdout is one of these (each on one line; wrapped here):
    {"event":"acquired","resource":"job","token":"1a2b3c4d...","fencing_token":null,
     "validity_ms":29990,"ttl_ms":30000,"granted_nodes":5,"nodes":5,"quorum":3}
    not_acquired  resource, reason, exit_code, message, as for run
    interrupted   resource, signal (e.g. "SIGINT"), exit_code (128+N)
    error         resource, exit_code, message

)";

constexpr std::string_view extend_section = R"(
redlock extend [OPTIONS] RESOURCE --token TOKEN --ttl DURATION
  Sets the TTL of the lock RESOURCE to DURATION from now, on every node where its key still
  holds TOKEN (as acquire printed it, or $REDLOCK_TOKEN in a run); a key that is gone is never
  created again. Exits 0 when a quorum of nodes extended it; 3 when a quorum says the key is gone
  (expired or released) or holds another token, the line saying which; 75 when too few nodes
  answered (those that did were extended: try again while the lock lasts).

  Options:
    --token TOKEN     the holder's token (required)
    --ttl DURATION    the lock's new lifetime from now; at least 500ms (required)
    --nodes URL,...   the Redlock nodes, as for run
    -q, --quiet       no line when it was extended (errors are still printed)
    --json            one JSON object on stdout instead of the line on stderr, e.g.
                      {"event":"extended","resource":"job","exit_code":0,"message":"..."}
                      event is extended, not_held or failed; message is the line's text
    TLS options       see below
    -h, --help        this help

)";

constexpr std::string_view release_section = R"(
redlock release [OPTIONS] RESOURCE --token TOKEN
redlock release [OPTIONS] RESOURCE --force [--yes]
  With --token, deletes the lock RESOURCE on every node where its key still holds TOKEN
  (compare-and-delete, as run releases). Exits 0 when no quorum of nodes contradicted it; 3 when
  a quorum says the key is gone or holds another token, the line saying which; 75 when too few
  nodes answered (those that did not keep the key until its TTL runs out).

  With --force, for an operator clearing a lock whose token is lost: redlock looks at every node
  (as status does), then releases each distinct token found there by that token, so that a
  holder that takes the lock between the look and the release is never deleted. A key that is
  not a lock (a value of another type) is named and left alone. Before anything is deleted it
  asks on the terminal:
    release RESOURCE held by 1a2b3c4d on 3 of 5 nodes? [y/N]
  and goes on only on y or yes; --yes skips the question. When stdin is not a terminal, --force
  needs --yes (else exit 2, and nothing is deleted). Every forced release writes one line to
  stderr and to syslog (facility auth, priority notice) naming the user, the host, the resource,
  each token in full with the nodes it was on, and how its release ended:
    redlock: alice on build-7 released "job" by force: token 1a2b3c4d... on 10.0.0.1:6379,...
  Exits 0 when every token found was released, 3 when no lock held RESOURCE on the nodes that
  answered, 75 when too few nodes answered the look or a release, 1 when the question was not
  confirmed. --token and --force exclude each other.

  Options:
    --token TOKEN     the holder's token
    --force           every holder found on the nodes instead (see above)
    --yes             with --force: do not ask
    --nodes URL,...   the Redlock nodes, as for run
    -q, --quiet       no line when it was released (errors and the --force record still are)
    --json            one JSON object on stdout instead of the line on stderr, as for extend;
                      event is released, not_held or failed. With --force it also has tokens
                      (those released), user and host; the record still goes to stderr as text
    TLS options       see below
    -h, --help        this help

)";

// The parts every command's help ends with, each starting with its heading line.
constexpr std::string_view node_urls_section = R"(
Node URLs (--nodes, REDLOCK_NODES), each one Redlock node; a lock is held on a majority of them:
  redis://[[user]:password@]host[:port][/db]
      a Redis master (port 6379 by default)
  rediss://...as redis://...[?ca=FILE&cert=FILE&key=FILE&sni=NAME&verify=no]
      the same over TLS (see TLS options below)
  unix://[[user]:password@]/path/to/redis.sock[?db=N]
      a Redis master on a Unix socket
  redis+cluster://[[user]:password@]host[:port][?seed=host:port&seed=...]
      a whole Redis Cluster as one node: host:port and the seeds are members to ask for its
      topology, and each key goes to the master of its hash slot
  redis+sentinel://[[user]:password@]host[:port][/db]?master=NAME[&seed=host:port...]
      the master that the sentinels (host:port and the seeds, port 26379 by default) name NAME,
      followed when they fail over; user and password log in to the master, and
      &sentinel_user=U&sentinel_password=P, when given, to the sentinels
  rediss+cluster://..., rediss+sentinel://...
      the same over TLS, with the parameters of rediss://
  Each also takes ?wait_replicas=N (unix:// too): a node's vote counts only once N replicas
  have the write (WAIT). A URL of the wrong kind (a cluster member as redis://, a sentinel as
  redis://, a plain server as redis+sentinel://) is reported as a misconfigured node.
)";

constexpr std::string_view tls_section = R"(
TLS options (every command), for every rediss:// node; what a node's URL sets itself wins:
  --tls-ca FILE           trusted CA certificates, PEM (default: the system's CA store)
  --tls-cert FILE         client certificate chain, PEM, for servers that require one
  --tls-key FILE          its private key, PEM (with --tls-cert)
  --tls-server-name NAME  the name the certificate must carry and the SNI sent (default: the host)
  --tls-insecure          do not verify the server (anyone in the path can read and change the
                          traffic); a warning is printed on every connect

)";

constexpr std::string_view durations_section = R"(
Durations: 500ms, 30s, 2m, 1h, or a bare number of seconds (1.5 = 1500ms); at least 1ms,
at most 7 days.

)";

constexpr std::string_view environment_section = R"(
Environment:
  REDLOCK_NODES   comma-separated node URLs (see above), used when --nodes is not given
                  (e.g. redis://redis-a:6379,redis://redis-b:6379,redis://redis-c:6379).
  Set for COMMAND by run:
  REDLOCK_TOKEN   the lock's random value on the nodes (40 hex digits), e.g. for logs.
  REDLOCK_FENCING_TOKEN
                  with --fencing: the lease's fencing token (a decimal number).
  REDLOCK_FENCING_TOKENS
                  with --fencing and several RESOURCEs: one token per RESOURCE, in the order
                  they were given, separated by spaces (REDLOCK_FENCING_TOKEN is then unset).
  REDLOCK_PERMIT  with --permits N: the number of the permit held, 0..N-1 (e.g. to pick one of
                  N connection slots or output files).

)";

constexpr std::string_view exit_codes_section = R"(
Exit codes:
  0..255       run: COMMAND's own exit code; 128+N if COMMAND was killed by signal N
               (status: 0 when a quorum of nodes answered, whatever the lock's state;
               acquire, extend, release: 0 when done)
  1            other failure, e.g. nodes that cannot serve the lock until their configuration
               is fixed (wrong password, missing ACL permission, two URLs of one server);
               status: fewer than a quorum of nodes could be asked; release --force: the
               question was not confirmed
  2            usage error: bad flag, bad URL, bad duration or --permits, missing RESOURCE,
               COMMAND, --token or --ttl; release --force without --yes when stdin is not a
               terminal
  3            extend, release: the lock is not held by TOKEN (a quorum says its key is gone,
               expired or released, or holds another token); release --force: no lock found
  75           lock not acquired (run, acquire): contended (held by another owner; with
               --permits: all N permits held) or wait timeout (both --conflict-exit-code N
               instead, if given), or no quorum (too few nodes answered); extend, release: too
               few nodes answered
  76           lock lost while COMMAND ran (COMMAND was terminated), or found lost at release
  126          COMMAND found but not executable
  127          COMMAND not found
  129/130/143  interrupted by SIGHUP/SIGINT/SIGTERM while waiting for the lock (run, acquire:
               nothing ran, nothing is held)
)";

// Each raw string above starts on the line after its opening quote, for readability here.
constexpr std::string_view body(std::string_view raw) {
  return raw.substr(1);
}

constexpr command_help command_sections[] = {
    {"run", body(run_section)},         {"status", body(status_section)},
    {"acquire", body(acquire_section)}, {"extend", body(extend_section)},
    {"release", body(release_section)},
};

constexpr help_parts all_parts{
    .summary = summary_line,
    .synopsis = body(usage_section),
    .description = body(description_section),
    .examples = body(examples_section),
    .commands = command_sections,
    .node_urls = body(node_urls_section),
    .tls_options = body(tls_section),
    .durations = body(durations_section),
    .environment = body(environment_section),
    .exit_codes = body(exit_codes_section),
};

}  // namespace

const help_parts& help_contents() noexcept {
  return all_parts;
}

std::string help_text(std::string_view topic) {
  std::string text;
  const auto* const one =
      std::find_if(std::begin(command_sections), std::end(command_sections),
                   [topic](const command_help& command) { return command.name == topic; });
  if (one != std::end(command_sections)) {
    text.append(one->text);
  } else {
    text.append("redlock: ").append(all_parts.summary).append(".\n\nUsage:\n");
    text.append(all_parts.synopsis).append("\n");
    text.append(all_parts.description).append("\nExamples:\n");
    text.append(all_parts.examples).append("\n");
    for (const auto& command : command_sections)
      text.append(command.text);
  }
  for (const auto part : {all_parts.node_urls, all_parts.tls_options, all_parts.durations,
                          all_parts.environment, all_parts.exit_codes})
    text.append(part);
  return text;
}

std::string version_text(std::string_view openssl_version) {
  // OpenSSL_version(OPENSSL_VERSION) reads "OpenSSL 3.0.17 1 Jul 2025": the date is left out.
  std::string_view openssl = openssl_version;
  if (const auto name_end = openssl.find(' '); name_end != std::string_view::npos) {
    openssl = openssl.substr(0, openssl.find(' ', name_end + 1));
  }
  return fmt::format("redlock {} (redlock-asio {}, Boost {}.{}.{}, {})\n", REDLOCK_VERSION_STRING,
                     REDLOCK_VERSION_STRING, BOOST_VERSION / 100000, BOOST_VERSION / 100 % 1000,
                     BOOST_VERSION % 100, openssl);
}

}  // namespace redlock::cli
