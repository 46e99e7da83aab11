#include "algo/hash_slot.hpp"

#include <array>
#include <charconv>
#include <memory>

namespace redlock::detail {

namespace {

// Redis Cluster's CRC16: polynomial 0x1021, initial value 0, no reflection, no final xor. Every
// lock request to a cluster node hashes its key, so it is computed eight bytes at a time
// ("slicing by eight"): row k of the table is what a byte does to the register when k zero bytes
// follow it, and the CRC is linear, so the eight bytes' effects combine by XOR.
using crc16_rows = std::array<std::array<std::uint16_t, 256>, 8>;

constexpr crc16_rows make_crc16_rows() {
  crc16_rows rows{};
  for (unsigned byte = 0; byte < 256; ++byte) {
    auto reg = static_cast<std::uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit)
      reg = static_cast<std::uint16_t>((reg & 0x8000u) ? (reg << 1) ^ 0x1021u : reg << 1);
    rows[0][byte] = reg;
  }
  for (std::size_t k = 1; k < rows.size(); ++k) {
    for (unsigned byte = 0; byte < 256; ++byte) {
      const std::uint16_t before = rows[k - 1][byte];
      rows[k][byte] = static_cast<std::uint16_t>((before << 8) ^ rows[0][before >> 8]);
    }
  }
  return rows;
}

constexpr crc16_rows crc16_table = make_crc16_rows();

}  // namespace

std::uint16_t crc16_xmodem(std::string_view data) noexcept {
  const auto* at = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t left = data.size();
  unsigned reg = 0;
  const auto& t = crc16_table;
  for (; left >= 8; left -= 8, at += 8) {
    // The register's two bytes meet the block's first two; the other six enter as they are.
    const unsigned head = reg ^ (static_cast<unsigned>(at[0]) << 8 | at[1]);
    reg = t[7][head >> 8] ^ t[6][head & 0xffu] ^ t[5][at[2]] ^ t[4][at[3]] ^ t[3][at[4]] ^
          t[2][at[5]] ^ t[1][at[6]] ^ t[0][at[7]];
  }
  for (; left > 0; --left, ++at)
    reg = ((reg << 8) ^ t[0][((reg >> 8) ^ *at) & 0xffu]) & 0xffffu;
  return static_cast<std::uint16_t>(reg);
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

slot_hash_tag hash_tag_of_slot(std::uint16_t slot) noexcept {
  // Slot tags stay below 110 000 (slot_tag): six digits at most, with room for both braces.
  slot_hash_tag tag{};
  tag.text[0] = '{';
  char* const end = std::to_chars(tag.text + 1, tag.text + sizeof tag.text - 1, slot_tag(slot)).ptr;
  *end = '}';
  tag.size = static_cast<std::uint8_t>(end + 1 - tag.text);
  return tag;
}

std::string in_slot(std::uint16_t slot, std::string_view name) {
  const auto tag = hash_tag_of_slot(slot);
  std::string tagged;
  tagged.reserve(tag.size + name.size());
  tagged.append(tag.view());
  tagged.append(name);
  return tagged;
}

}  // namespace redlock::detail
