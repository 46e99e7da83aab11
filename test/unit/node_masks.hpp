#ifndef REDLOCK_TEST_UNIT_NODE_MASKS_HPP
#define REDLOCK_TEST_UNIT_NODE_MASKS_HPP

// Sets of nodes written as masks, one character per node: "00100" is node 2 of five.

#include <string>
#include <vector>

namespace redlock::test {

inline std::string mask(const std::vector<bool>& nodes) {
  std::string out;
  for (bool on : nodes)
    out += on ? '1' : '0';
  return out;
}

inline std::vector<bool> nodes_of(const std::string& mask) {
  std::vector<bool> out;
  for (char c : mask)
    out.push_back(c == '1');
  return out;
}

}  // namespace redlock::test

#endif
