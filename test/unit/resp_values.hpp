#ifndef REDLOCK_TEST_UNIT_RESP_VALUES_HPP
#define REDLOCK_TEST_UNIT_RESP_VALUES_HPP

// Replies as a server would send them, built in place for the unit tests that read replies: one
// builder per RESP2 and RESP3 type.

#include "resp/value.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace redlock::test::reply {

inline resp::value of_kind(resp::type kind) {
  resp::value v;
  v.kind = kind;
  return v;
}
inline resp::value text_of(resp::type kind, std::string text) {
  resp::value v = of_kind(kind);
  v.text = std::move(text);
  return v;
}
inline resp::value simple(std::string text) {
  return text_of(resp::type::simple_string, std::move(text));
}
inline resp::value ok() {
  return simple("OK");
}
inline resp::value bulk(std::string text) {
  return text_of(resp::type::bulk_string, std::move(text));
}
inline resp::value error_reply(std::string text) {
  return text_of(resp::type::simple_error, std::move(text));
}
inline resp::value blob_error(std::string text) {
  return text_of(resp::type::blob_error, std::move(text));
}
inline resp::value big_number(std::string text) {
  return text_of(resp::type::big_number, std::move(text));
}
inline resp::value integer(std::int64_t n) {
  resp::value v = of_kind(resp::type::integer);
  v.integer = n;
  return v;
}
inline resp::value boolean(bool b) {
  resp::value v = of_kind(resp::type::boolean);
  v.integer = b ? 1 : 0;
  return v;
}
inline resp::value number(std::string text, double d) {
  resp::value v = text_of(resp::type::double_number, std::move(text));
  v.number = d;
  return v;
}
inline resp::value verbatim(std::string format, std::string text) {
  resp::value v = text_of(resp::type::verbatim_string, std::move(text));
  v.format = std::move(format);
  return v;
}
inline resp::value aggregate(resp::type kind, std::vector<resp::value> elements) {
  resp::value v = of_kind(kind);
  v.elements = std::move(elements);
  return v;
}
inline resp::value array(std::vector<resp::value> elements) {
  return aggregate(resp::type::array, std::move(elements));
}
// A fenced grant as the scripts answer it: every fencing counter as decimal text, in an array.
inline resp::value counters(std::vector<std::uint64_t> values) {
  std::vector<resp::value> elements;
  for (const auto value : values)
    elements.push_back(bulk(std::to_string(value)));
  return array(std::move(elements));
}
inline resp::value map(std::vector<resp::value> elements) {
  return aggregate(resp::type::map, std::move(elements));
}
inline resp::value set(std::vector<resp::value> elements) {
  return aggregate(resp::type::set, std::move(elements));
}
inline resp::value push(std::vector<resp::value> elements) {
  return aggregate(resp::type::push, std::move(elements));
}
inline resp::value nil() {
  return of_kind(resp::type::null);
}

}  // namespace redlock::test::reply

#endif
