#ifndef REDLOCK_TEST_UNIT_ANSWER_KINDS_HPP
#define REDLOCK_TEST_UNIT_ANSWER_KINDS_HPP

// A node's answer in one fan-out, as the round tests write it: pending, yes, no, failed.

#include "algo/node_answer.hpp"

namespace redlock::test::answers {

inline constexpr auto pending = detail::node_answer::kind::pending;
inline constexpr auto yes = detail::node_answer::kind::yes;
inline constexpr auto no = detail::node_answer::kind::no;
inline constexpr auto failed = detail::node_answer::kind::failed;

}  // namespace redlock::test::answers

#endif
