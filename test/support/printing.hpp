#ifndef REDLOCK_TEST_SUPPORT_PRINTING_HPP
#define REDLOCK_TEST_SUPPORT_PRINTING_HPP

// Lets Boost.Test print the library's enums in failed assertions (found by argument-dependent
// lookup).

#include "redlock/error.hpp"
#include "resp/value.hpp"

#include <ostream>

namespace redlock {
inline std::ostream& boost_test_print_type(std::ostream& os, error e) {
  return os << "redlock::error(" << make_error_code(e).message() << ")";
}
}  // namespace redlock

namespace redlock::resp {
inline std::ostream& boost_test_print_type(std::ostream& os, type t) {
  return os << to_string(t);
}
inline std::ostream& boost_test_print_type(std::ostream& os, const value& v) {
  return os << to_debug_string(v);
}
}  // namespace redlock::resp

#endif
