#include "text.hpp"

#include <fmt/format.h>

namespace redlock::detail {

std::string printable(std::string_view bytes, std::size_t limit) {
  const std::string_view shown = bytes.substr(0, limit);
  std::string out;
  out.reserve(shown.size());
  for (const unsigned char c : shown) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (shown.size() < bytes.size()) out += fmt::format("... ({} bytes)", bytes.size());
  return out;
}

std::string quoted_resource(std::string_view resource) {
  constexpr std::size_t shown_bytes = 200;
  return '"' + printable(resource, shown_bytes) + '"';
}

std::string quoted_keys(std::initializer_list<std::string_view> keys) {
  std::string out;
  for (const auto key : keys) {
    if (!out.empty()) out += ", ";
    out += quoted_resource(key);
  }
  return out;
}

std::string quoted_keys(std::span<const std::string> keys) {
  std::string out;
  for (const auto& key : keys) {
    if (!out.empty()) out += ", ";
    out += quoted_resource(key);
  }
  return out;
}

std::string quoted_set(std::span<const std::string> resources) {
  return "the set " + quoted_keys(resources);
}

}  // namespace redlock::detail
