#ifndef REDLOCK_ALGO_HASH_SLOT_HPP
#define REDLOCK_ALGO_HASH_SLOT_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace redlock::detail {

// How Redis Cluster maps a key to one of its 16 384 hash slots: the CRC16 of the key (or of its
// hash tag) modulo 16 384. Every key the library writes for one resource carries the resource's
// name in braces or shares its hash tag, so a script never sees keys of two slots.
inline constexpr std::size_t cluster_slot_count = 16384;

// CRC16-CCITT in its XMODEM form (polynomial 0x1021, initial value 0, no reflection, no final
// XOR): the checksum Redis Cluster hashes keys with. crc16_xmodem("123456789") == 0x31C3.
std::uint16_t crc16_xmodem(std::string_view data) noexcept;

// The part of `key` that decides its slot. When the key has a '{' followed later by a '}' with at
// least one character between them, the text between the first '{' and the first '}' after it
// (the hash tag); otherwise the whole key. "{user}:a" and "{user}:b" share a slot; "a{}b" hashes
// whole; "a{{b}}c" hashes "{b".
std::string_view hash_tag_part(std::string_view key) noexcept;

// The slot of `key`, in [0, cluster_slot_count).
inline std::uint16_t hash_slot(std::string_view key) noexcept {
  return static_cast<std::uint16_t>(crc16_xmodem(hash_tag_part(key)) % cluster_slot_count);
}

// The smallest non-negative integer whose decimal form hashes to `slot`: a short hash tag that
// names the slot, for names that must live in a given slot without being derived from a key
// (shard channels). Every slot has one below 110 000; the table is built on first use.
std::uint32_t slot_tag(std::uint16_t slot) noexcept;

// The hash tag that moves a name into `slot`: "{" + slot_tag(slot) + "}", at most 8 characters.
struct slot_hash_tag {
  char text[8];
  std::uint8_t size;
  std::string_view view() const noexcept { return {text, size}; }
};
slot_hash_tag hash_tag_of_slot(std::uint16_t slot) noexcept;

// `name` moved into `slot`: hash_tag_of_slot(slot) + name. Braces in `name` do not matter, since
// the first hash tag decides.
std::string in_slot(std::uint16_t slot, std::string_view name);

}  // namespace redlock::detail

#endif
