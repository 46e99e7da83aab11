#include "help.hpp"

#include <string>
#include <string_view>

namespace redlock::cli {
namespace {

constexpr std::string_view overview = R"(
redlock: a distributed lock over Redis (the Redlock algorithm) for scripts and cron jobs.

Usage:
  redlock run [OPTIONS] RESOURCE -- COMMAND [ARGS...]
  redlock status [OPTIONS] RESOURCE
  redlock help [run|status]      (also: redlock --help, redlock COMMAND --help)
  redlock --version

)";

constexpr std::string_view run_section = R"(
redlock run [OPTIONS] RESOURCE -- COMMAND [ARGS...]
  Takes the lock RESOURCE on a majority of the nodes, runs COMMAND while renewing the lock at half
  its TTL, releases the lock when COMMAND ends and exits with COMMAND's exit status.
  If the lock cannot be kept (too few nodes confirm a renewal in time, or the key is gone or
  owned by someone else), COMMAND gets SIGTERM, then SIGKILL after the grace period, and redlock
  exits 76. SIGINT, SIGTERM and SIGHUP sent to redlock while COMMAND runs are passed on to
  COMMAND; the lock is released once COMMAND has ended. While redlock still waits for the lock
  they cancel the wait (nothing is left on the nodes) and redlock exits 128+N (130 for SIGINT,
  143 for SIGTERM). Signals that were ignored when redlock started stay ignored, for COMMAND
  too. COMMAND also gets SIGTERM if redlock itself dies, since its lock then stops being renewed.

  Options:
    --nodes URL,...   the Redis masters: comma-separated URLs
                      redis://[[user]:password@]host[:port][/db]
                      (default: $REDLOCK_NODES, else redis://127.0.0.1:6379)
    --ttl DURATION    lifetime of the lock on each node, renewed at half-life while COMMAND runs;
                      at least 500ms (default 30s)
    --wait DURATION   how long to keep trying to get the lock (default 10s)
    --grace DURATION  after the lock is lost, time between SIGTERM and SIGKILL to COMMAND
                      (default 5s)
    -q, --quiet       no "acquired" and "released" lines on stderr (errors are still printed)
    -h, --help        this help

  Unless --quiet, stderr gets one line when the lock is acquired and one when it is released:
    redlock: acquired RESOURCE (valid 29990 ms, 3/5 nodes)
    redlock: released RESOURCE after 1520 ms

)";

constexpr std::string_view status_section = R"(
redlock status [OPTIONS] RESOURCE
  Asks every node about RESOURCE and prints one line per node: its address, whether it could be
  reached (and if not, why), whether the key is held or free, its remaining TTL and the first 8
  characters of the owner's token. A verdict line follows:
    RESOURCE: held on 3 of 5 nodes (quorum 3): locked (token 1a2b3c4d)
    RESOURCE: held on 0 of 5 nodes (quorum 3): free
    RESOURCE: held on 2 of 5 nodes (quorum 3): not locked (below quorum)
  and, when some nodes could not be asked, "unreachable nodes: N". It changes nothing on the
  nodes. Exits 0 when a quorum of nodes answered (whatever the lock's state), else 1.

  Options:
    --nodes URL,...     the Redis masters, as for run (default: $REDLOCK_NODES, else
                        redis://127.0.0.1:6379)
    --timeout DURATION  how long to wait for each node, connecting included (default 1s)
    -h, --help          this help

)";

constexpr std::string_view common_section = R"(
Durations: 500ms, 30s, 2m, 1h, or a bare number of seconds (1.5 = 1500ms); at least 1ms,
at most 7 days.

Environment:
  REDLOCK_NODES   comma-separated redis:// URLs of the nodes, used when --nodes is not given
                  (e.g. redis://redis-a:6379,redis://redis-b:6379,redis://redis-c:6379).

Exit codes:
  0..255       run: COMMAND's own exit code; 128+N if COMMAND was killed by signal N
               (status: 0 when a quorum of nodes answered, whatever the lock's state)
  1            other failure; status: fewer than a quorum of nodes could be asked
  2            usage error: bad flag, bad URL, bad duration, missing RESOURCE or COMMAND
  75           lock not acquired: contended (held by another owner), no quorum, or wait timeout
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
