#ifndef REDLOCK_TEST_SUPPORT_TEXT_CONTAINS_HPP
#define REDLOCK_TEST_SUPPORT_TEXT_CONTAINS_HPP

#include <string_view>

namespace redlock::test {

// Whether `part` occurs in `text`: what the checks on messages and outputs ask.
inline bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

}  // namespace redlock::test

#endif
