#include "lock/key_names.hpp"

#include "algo/hash_slot.hpp"

#include <fmt/format.h>

#include <charconv>

namespace redlock::detail {

std::string key_in_hash_slot_of(std::string_view name, std::string_view suffix) {
  const auto open = name.find('{');
  if (open != std::string_view::npos) {
    const auto close = name.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      return fmt::format("{}{}", name, suffix);  // its hash tag decides the slot
    }
  }
  if (name.find('}') == std::string_view::npos) return fmt::format("{{{}}}{}", name, suffix);
  return fmt::format("{}{}", name, suffix);
}

bool keys_share_hash_slot(std::string_view name) noexcept {
  const auto open = name.find('{');
  if (open != std::string_view::npos) {
    const auto close = name.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) return true;
  }
  return name.find('}') == std::string_view::npos;
}

std::string fencing_counter_key(std::string_view resource) {
  return key_in_hash_slot_of(resource, ":fence");
}

std::string semaphore_slot_key(std::string_view name, std::size_t slot) {
  return key_in_hash_slot_of(name, fmt::format(":slot:{}", slot));
}

std::string permit_queue_key(std::string_view name) {
  return key_in_hash_slot_of(name, ":slot:");
}

std::optional<std::size_t> slot_of_key(std::string_view key, std::string_view prefix) {
  if (!key.starts_with(prefix) || key.size() == prefix.size() || key.size() - prefix.size() > 9) {
    return std::nullopt;
  }
  std::size_t slot = 0;
  for (const char digit : key.substr(prefix.size())) {
    if (digit < '0' || digit > '9') return std::nullopt;
    slot = slot * 10 + static_cast<std::size_t>(digit - '0');
  }
  return slot;
}

std::optional<std::pair<std::string_view, std::size_t>> split_slot_key(std::string_view key) {
  const auto digits = key.find_last_not_of("0123456789");
  if (digits == std::string_view::npos || digits + 1 == key.size()) return std::nullopt;
  const std::string_view prefix = key.substr(0, digits + 1);
  if (!prefix.ends_with(":slot:")) return std::nullopt;
  const auto slot = slot_of_key(key, prefix);
  if (!slot) return std::nullopt;
  return std::pair{prefix, *slot};
}

std::string semaphore_permits_key(std::string_view name) {
  return key_in_hash_slot_of(name, ":permits");
}

std::string rw_writer_key(std::string_view name) {
  return key_in_hash_slot_of(name, ":write");
}

std::string rw_readers_key(std::string_view name) {
  return key_in_hash_slot_of(name, ":read");
}

std::string rw_mark_key(std::string_view name) {
  return key_in_hash_slot_of(name, ":write-waiting");
}

std::string rw_queue_key(std::string_view name) {
  return key_in_hash_slot_of(name, ":rw");
}

}  // namespace redlock::detail
