#ifndef REDLOCK_TOOLS_REDLOCK_FORCE_RELEASE_HPP
#define REDLOCK_TOOLS_REDLOCK_FORCE_RELEASE_HPP

// `redlock release --force`, decided without I/O: what the nodes hold (from client::async_inspect)
// becomes a list of holders to release, each by its own token, a question for the operator, and
// the line that records who released what.
//
// Each holder is released with the token-checked release (client::async_release), never with a
// plain DEL: a holder that takes the lock between the look and the release is never deleted.

#include "json_line.hpp"
#include "redlock/error.hpp"
#include "redlock/inspection.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::cli {

// One token found on the nodes, and where.
struct holder_on_nodes {
  std::string token;
  std::vector<std::string> nodes;  // addresses, in the order of the node list
};

struct force_release_plan {
  std::string resource;
  std::size_t nodes = 0;  // in the node list
  std::size_t quorum = 0;
  std::size_t answered = 0;
  // Every distinct token, the one on the most nodes first: the lock's holder, when there is one,
  // then the leftovers of failed rounds or of an ending lock.
  std::vector<holder_on_nodes> holders;
  // Nodes whose key holds a value of another type: nobody's lock, though it blocks the lock there.
  // Left alone: it is someone's data, and deleting it is not for a lock tool to decide.
  std::vector<std::string> not_a_lock;
  // Nodes that could not be asked, each "address: why"; what they hold stays until its TTL ends.
  std::vector<std::string> silent;
};

force_release_plan plan_force_release(const inspection& seen);

// The question asked on a terminal before anything is released:
// "release job held by 1a2b3c4d on 3 of 5 nodes? [y/N] ", with every holder named
// ("... on 3 of 5 nodes and by 9f8e7d6c on 1 of 5 nodes? [y/N] "). No line break: the answer
// follows on the same line.
std::string confirmation_question(const force_release_plan& plan);

// "y" or "yes", in any case, blanks around them ignored; anything else (an empty line, end of
// input) is no.
bool confirms(std::string_view answer);

// The record of one forced release, for stderr and syslog alike (without "redlock: " in front),
// one line naming who (`user`: the login name, and the effective user's when it differs), from
// which `host`, the resource,
// each token in full with the nodes it was on, and how its release ended (`outcomes`, one per
// holder of the plan):
// alice on host1 released "job" by force: token 1a2b... on 127.0.0.1:7001,127.0.0.1:7002
// (released); token 9f8e... on 127.0.0.1:7003 (not released: no quorum ...)
// A release that a quorum answered with error::not_held counts as released: the token is gone
// there, deleted by it where it was still held (a leftover below quorum always ends so).
std::string audit_line(std::string_view user, std::string_view host, const force_release_plan& plan,
                       std::span<const error_code> outcomes);

// Whether the release of one holder removed it: success, or error::not_held (see audit_line).
bool released(error_code outcome) noexcept;

// The exit code of a forced release: exit_code::not_held when there was nobody to release; else
// 0 when every holder was released, exit_code::not_acquired when one could not be released for
// too few nodes answering, and exit_code::failure for any other failure.
int force_release_exit_code(const force_release_plan& plan, std::span<const error_code> outcomes);

// The tokens released, in the order of the plan.
std::vector<std::string> released_tokens(const force_release_plan& plan,
                                         std::span<const error_code> outcomes);

// release --force --json: the one object on stdout:
// {"event":"released","resource":...,"exit_code":0,"message":...,"tokens":[...],"user":...,
//  "host":...}
// event is "released", "not_held" (nothing to release) or "failed"; tokens lists those released.
json_line json_of_force_release(std::string_view event, std::string_view resource, int exit_code,
                                std::string_view message, std::span<const std::string> tokens,
                                std::string_view user, std::string_view host);

}  // namespace redlock::cli

#endif
