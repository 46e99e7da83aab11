#ifndef REDLOCK_TOOLS_REDLOCK_EXIT_CODES_HPP
#define REDLOCK_TOOLS_REDLOCK_EXIT_CODES_HPP

// Exit codes of the redlock tool besides COMMAND's own (0..255, 128 + N for signal N). They follow
// the shell for COMMAND that cannot be run and <sysexits.h> for a lock that could not be had, so
// scripts can tell "the job failed" from "the job never ran". `acquire`, `extend` and `release`
// run no COMMAND, so the small codes are free for what a script of several steps must tell apart:
// "done" (0), "the lock is not (or no longer) mine" (not_held), "the nodes did not answer, try
// again" (not_acquired).
namespace redlock::cli::exit_code {

inline constexpr int failure = 1;  // anything else: out of processes, internal error
inline constexpr int usage = 2;    // bad flag, URL or duration; missing RESOURCE or COMMAND
// extend, release: a quorum of nodes says the key is gone (expired, released) or holds another
// token; release --force: nobody holds it. Not an outage: retrying cannot help.
inline constexpr int not_held = 3;
// run, acquire: contended, no quorum, wait timeout; extend, release: no quorum (EX_TEMPFAIL).
inline constexpr int not_acquired = 75;
inline constexpr int lock_lost = 76;        // lost while COMMAND ran; COMMAND was stopped
inline constexpr int cannot_execute = 126;  // COMMAND found but not executable
inline constexpr int not_found = 127;       // COMMAND not found
inline constexpr int signal_base = 128;     // 128 + N: ended by signal N

}  // namespace redlock::cli::exit_code

#endif
