#ifndef REDLOCK_TEST_SIM_CHECKERS_HPP
#define REDLOCK_TEST_SIM_CHECKERS_HPP

// The checkers every simulated history is judged by. Each returns the problems it found, one line
// each, naming the operations and the virtual instants; an empty list is a pass.
//
//  - exclusion: no two leases of a lock (or of any resource of a set) claimed overlapping
//    validity; at most N holders of a semaphore of N permits; never a reader beside a writer.
//  - fencing: tokens strictly increase in the order the leases were acquired, for every lock kind
//    (a reader's token is the last writer's: never below an earlier lease's, always below a later
//    writer's; readers are not ordered among themselves); and a fenced store never accepted a write
//    from a lease older than one whose write it had already accepted (a holder stalled past its
//    validity is refused).
//  - sets: a set's keys on one node all hold its token or none does.
//  - completions: every handler completed exactly once, every operation ended.
//  - outcomes: no operation failed with a node failure (condition::node_failure). The model nodes
//    answer as Redis does and are set up right, so such a failure means that the library misread
//    a reply, or that a script answered what it cannot (a careless edit of its source).
//  - leftovers: no lock key is left once every lease is released and the TTLs have passed; and in
//    a run without faults, none but those of leases whose release failed is left a moment after
//    the workload ended (a released lease, a failed or cancelled round, a writer's mark: gone).
//  - liveness, once the run is calm (calm_from): when a lock is released while someone waits for
//    it and every lock that waiter needs is free, some lease of those locks is acquired within
//    liveness_bound() (no waiter sleeps out a holder's TTL for a release it missed).
//
// A lock that a node lost before its keys would have expired (a restart at once, a failover to a
// lagging replica) is not the library's fault: overlaps and fencing inversions are excused when
// such losses explain them (checkers.cpp says exactly when); nothing else is excused.

#include "sim/history.hpp"
#include "sim/scenario.hpp"

#include <optional>
#include <string>
#include <vector>

namespace redlock::sim {

std::vector<std::string> check_exclusion(const scenario& s, const history& h);
std::vector<std::string> check_fencing(const scenario& s, const history& h);
std::vector<std::string> check_sets(const history& h);
std::vector<std::string> check_completions(const history& h);
std::vector<std::string> check_outcomes(const history& h);
std::vector<std::string> check_leftovers(const scenario& s, const history& h);
std::vector<std::string> check_liveness(const scenario& s, const history& h);

// Whether the run had no fault at all (no injected fault, no late message, no reset): the
// checks that judge promptness and tidiness apply to such runs.
bool fault_free(const scenario& s);
// How soon a released lock goes to a waiter in a calm run: three node timeouts, two of the
// longest one-way delays and the retry policy's longest backoff (250 ms).
duration liveness_bound(const scenario& s);
// From when a run is calm, so that promptness can be judged: from its start without any fault;
// else once every injected fault and the network's faults have ended and their traces are gone
// (keys left by failed releases expired, links past their longest reconnect backoff, sentinels
// asked again); never while late messages or resets go on to the end.
std::optional<time_point> calm_from(const scenario& s);

// Every checker above.
std::vector<std::string> check_all(const scenario& s, const history& h);

}  // namespace redlock::sim

#endif
