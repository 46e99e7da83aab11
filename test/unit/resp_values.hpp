#ifndef REDLOCK_TEST_UNIT_RESP_VALUES_HPP
#define REDLOCK_TEST_UNIT_RESP_VALUES_HPP

// Replies as a server would send them, built in place for the unit tests that read replies.

#include "resp/value.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace redlock::test::reply {

inline resp::value text_of(resp::type kind, std::string text) {
  resp::value v;
  v.kind = kind;
  v.text = std::move(text);
  return v;
}
inline resp::value simple(std::string text) {
  return text_of(resp::type::simple_string, std::move(text));
}
inline resp::value bulk(std::string text) {
  return text_of(resp::type::bulk_string, std::move(text));
}
inline resp::value error_reply(std::string text) {
  return text_of(resp::type::simple_error, std::move(text));
}
inline resp::value integer(std::int64_t n) {
  resp::value v;
  v.kind = resp::type::integer;
  v.integer = n;
  return v;
}
inline resp::value array(std::vector<resp::value> elements) {
  resp::value v;
  v.kind = resp::type::array;
  v.elements = std::move(elements);
  return v;
}
inline resp::value nil() {
  return resp::value{};
}

}  // namespace redlock::test::reply

#endif
