#include "help.hpp"

#include <string>
#include <string_view>

namespace redlock::cli {
namespace {

constexpr std::string_view overview = R"(
redlock: a distributed lock over Redis (the Redlock algorithm) for scripts and cron jobs.

Usage:
  redlock run [OPTIONS] RESOURCE -- COMMAND [ARGS...]
  redlock run [OPTIONS] --permits N NAME -- COMMAND [ARGS...]
  redlock status [OPTIONS] [--permits N] RESOURCE
  redlock help [run|status]      (also: redlock --help, redlock COMMAND --help)
  redlock --version

)";

constexpr std::string_view run_section = R"(
redlock run [OPTIONS] RESOURCE -- COMMAND [ARGS...]
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

  Options:
    --nodes URL,...   the Redis masters: comma-separated URLs
                      redis://[[user]:password@]host[:port][/db]
                      rediss://...same...[?ca=FILE&cert=FILE&key=FILE&sni=NAME&verify=no]
                      unix://[[user]:password@]/path/to/redis.sock[?db=N]
                      (default: $REDLOCK_NODES, else redis://127.0.0.1:6379)
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
                      With --permits, each permit has a counter of its own
    --permits N       take one of the N permits (1..1024) of the semaphore RESOURCE instead of
                      the lock RESOURCE (see above). --wait 0: rounds over the permits that may
                      be free, no waiting; contended means all N are held
    -q, --quiet       no "acquired", "released" and warning lines on stderr (errors are still
                      printed)
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

)";

constexpr std::string_view status_section = R"(
redlock status [OPTIONS] [--permits N] RESOURCE
  Asks every node about RESOURCE and prints one line per node: its address, whether it could be
  reached (and if not, why), whether the key is held or free, its remaining TTL and the first 8
  characters of the owner's token. Each node is connected to as `run` would connect, so a node
  that could not serve the lock is shown as "misconfigured" with the reason: a wrong password
  (cannot log in: ...), a database it refuses (cannot select database ...), an ACL user without
  a command the lock needs (permission denied: ACL user "bob" may not run EVALSHA, ...), or a
  port where no Redis answers. A verdict line follows:
    RESOURCE: held on 3 of 5 nodes (quorum 3): locked (token 1a2b3c4d)
    RESOURCE: held on 0 of 5 nodes (quorum 3): free
    RESOURCE: held on 2 of 5 nodes (quorum 3): not locked (below quorum)
  and, when some nodes could not be asked, a count of each kind, "unreachable nodes: N" and
  "misconfigured nodes: N". It changes no key on the nodes (like run, it loads the lock's two
  Lua scripts into their script cache). Exits 0 when a quorum of nodes answered (whatever the
  lock's state), else 1.

  With --permits N, RESOURCE is a semaphore's NAME and every one of its N slot keys is shown so,
  one block each (its lines per node and its verdict, blocks apart by an empty line), all read in
  one step per node; a summary follows them:
    {NAME}:slot:0: held on 5 of 5 nodes (quorum 3): locked (token 1a2b3c4d)
    ...
    NAME: 1 of 2 permits held (quorum 3 of 5 nodes)
  with ", N unknown" added for slots whose state the nodes that answered cannot settle.

  Options:
    --nodes URL,...     the Redis masters, as for run (default: $REDLOCK_NODES, else
                        redis://127.0.0.1:6379)
    --timeout DURATION  how long to wait for each node, connecting included (default 1s)
    --permits N         RESOURCE is a semaphore of N permits (1..1024): show each slot
    TLS options         see below
    -h, --help          this help
  A TLS node's line ends in "tls, verified as NAME" (or "tls, NOT verified"), a Unix socket's in
  "unix socket". "subscribers N" counts the clients that wait for some lock on that node: lock
  clients subscribe to release announcements (channel redlock:released) while they wait. On a
  cluster node they subscribe per hash slot (SSUBSCRIBE on the slot's master), and N counts the
  clients subscribed to the key's slot there.

)";

constexpr std::string_view common_section = R"(
TLS options (run and status), for every rediss:// node; what a node's URL sets itself wins:
  --tls-ca FILE           trusted CA certificates, PEM (default: the system's CA store)
  --tls-cert FILE         client certificate chain, PEM, for servers that require one
  --tls-key FILE          its private key, PEM (with --tls-cert)
  --tls-server-name NAME  the name the certificate must carry and the SNI sent (default: the host)
  --tls-insecure          do not verify the server (anyone in the path can read and change the
                          traffic); a warning is printed on every connect

Durations: 500ms, 30s, 2m, 1h, or a bare number of seconds (1.5 = 1500ms); at least 1ms,
at most 7 days.

Environment:
  REDLOCK_NODES   comma-separated redis:// URLs of the nodes, used when --nodes is not given
                  (e.g. redis://redis-a:6379,redis://redis-b:6379,redis://redis-c:6379).
  Set for COMMAND by run:
  REDLOCK_TOKEN   the lock's random value on the nodes (40 hex digits), e.g. for logs.
  REDLOCK_FENCING_TOKEN
                  with --fencing: the lease's fencing token (a decimal number).
  REDLOCK_PERMIT  with --permits N: the number of the permit held, 0..N-1 (e.g. to pick one of
                  N connection slots or output files).

Exit codes:
  0..255       run: COMMAND's own exit code; 128+N if COMMAND was killed by signal N
               (status: 0 when a quorum of nodes answered, whatever the lock's state)
  1            other failure, e.g. nodes that cannot serve the lock until their configuration
               is fixed (wrong password, missing ACL permission, two URLs of one server);
               status: fewer than a quorum of nodes could be asked
  2            usage error: bad flag, bad URL, bad duration or --permits, missing RESOURCE or
               COMMAND
  75           lock not acquired: contended (held by another owner; with --permits: all N
               permits held) or wait timeout (both --conflict-exit-code N instead, if given),
               or no quorum (too few nodes answered)
  76           lock lost while COMMAND ran (COMMAND was terminated), or found lost at release
  126          COMMAND found but not executable
  127          COMMAND not found
  129/130/143  interrupted by SIGHUP/SIGINT/SIGTERM while waiting for the lock (nothing ran)
)";

}  // namespace

std::string help_text(std::string_view topic) {
  // Each section's raw string starts on the line after its opening quote, for readability here.
  std::string text;
  auto add = [&text](std::string_view section) { text.append(section.substr(1)); };
  if (topic == "run") add(run_section);
  if (topic == "status") add(status_section);
  if (topic != "run" && topic != "status") {
    add(overview);
    add(run_section);
    add(status_section);
  }
  add(common_section);
  return text;
}

}  // namespace redlock::cli
