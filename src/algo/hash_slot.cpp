#include "algo/hash_slot.hpp"

#include <boost/crc.hpp>

#include <array>
#include <charconv>
#include <memory>

namespace redlock::detail {

std::uint16_t crc16_xmodem(std::string_view data) noexcept {
  // Redis Cluster's CRC16: polynomial 0x1021, initial value 0, no reflection, no final xor.
  boost::crc_optimal<16, 0x1021, 0, 0, false, false> crc;
  crc.process_bytes(data.data(), data.size());
  return crc.checksum();
}

std::string_view hash_tag_part(std::string_view key) noexcept {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return key;
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

std::uint32_t slot_tag(std::uint16_t slot) noexcept {
  // Slots are filled in increasing order of the integers, so each keeps the smallest.
  static const auto tags = [] {
    auto table = std::make_unique<std::array<std::uint32_t, cluster_slot_count>>();
    std::array<bool, cluster_slot_count> found{};
    std::size_t missing = cluster_slot_count;
    char digits[16];
    for (std::uint32_t n = 0; missing > 0; ++n) {
      const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
      const auto s = hash_slot(std::string_view(digits, static_cast<std::size_t>(end - digits)));
      if (found[s]) continue;
      found[s] = true;
      (*table)[s] = n;
      --missing;
    }
    return table;
  }();
  return (*tags)[slot % cluster_slot_count];
}

std::string in_slot(std::uint16_t slot, std::string_view name) {
  // Once per release on a cluster node: built by hand, which costs a tenth of a format.
  char digits[16];
  const auto end = std::to_chars(digits, digits + sizeof digits, slot_tag(slot)).ptr;
  std::string tagged;
  tagged.reserve(static_cast<std::size_t>(end - digits) + 2 + name.size());
  tagged += '{';
  tagged.append(digits, end);
  tagged += '}';
  tagged += name;
  return tagged;
}

}  // namespace redlock::detail
