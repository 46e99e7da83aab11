#ifndef REDLOCK_TEST_UNIT_ANSWERS_OF_HPP
#define REDLOCK_TEST_UNIT_ANSWERS_OF_HPP

#include "algo/node_answer.hpp"

#include <initializer_list>

namespace redlock::test {

// A round's answers, one kind per node: answers_of({yes, no, failed}).
inline detail::node_answers answers_of(std::initializer_list<detail::node_answer::kind> kinds) {
  detail::node_answers out;
  for (auto kind : kinds) {
    detail::node_answer answer;
    answer.what = kind;
    out.push_back(answer);
  }
  return out;
}

}  // namespace redlock::test

#endif
