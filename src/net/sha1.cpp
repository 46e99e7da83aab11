#include "net/sha1.hpp"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

// SHA-1 as specified in FIPS 180-4, section 6.1. Only used to name Lua scripts for EVALSHA, so it
// is written for clarity, not speed; the scripts are hashed once per process.
namespace redlock::detail {
namespace {

class sha1 {
 public:
  void update(std::string_view data) {
    for (char c : data) {
      block_[block_size_++] = static_cast<std::uint8_t>(c);
      if (block_size_ == block_.size()) {
        compress();
        block_size_ = 0;
      }
    }
    // No real message reaches 2^61 bytes, so the bit count written by finish() cannot wrap.
    total_bytes_ += data.size();
  }

  std::array<std::uint32_t, 5> finish() {
    const std::uint64_t total_bits = total_bytes_ * 8;
    // Padding: a single 1 bit, zeros up to 56 mod 64 bytes, then the bit length big-endian.
    block_[block_size_++] = 0x80;
    if (block_size_ > 56) {
      while (block_size_ < block_.size())
        block_[block_size_++] = 0;
      compress();
      block_size_ = 0;
    }
    while (block_size_ < 56)
      block_[block_size_++] = 0;
    for (int i = 7; i >= 0; --i) {
      block_[block_size_++] = static_cast<std::uint8_t>(total_bits >> (i * 8));
    }
    compress();
    block_size_ = 0;
    return h_;
  }

 private:
  void compress() {
    std::array<std::uint32_t, 80> w{};
    for (std::size_t t = 0; t < 16; ++t) {
      w[t] = (std::uint32_t{block_[t * 4]} << 24) | (std::uint32_t{block_[t * 4 + 1]} << 16) |
             (std::uint32_t{block_[t * 4 + 2]} << 8) | std::uint32_t{block_[t * 4 + 3]};
    }
    for (std::size_t t = 16; t < 80; ++t) {
      w[t] = std::rotl(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
    }

    std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4];
    for (std::size_t t = 0; t < 80; ++t) {
      std::uint32_t f = 0;
      std::uint32_t k = 0;
      if (t < 20) {
        f = (b & c) | (~b & d);  // Ch
        k = 0x5a827999;
      } else if (t < 40) {
        f = b ^ c ^ d;  // Parity
        k = 0x6ed9eba1;
      } else if (t < 60) {
        f = (b & c) | (b & d) | (c & d);  // Maj
        k = 0x8f1bbcdc;
      } else {
        f = b ^ c ^ d;  // Parity
        k = 0xca62c1d6;
      }
      const std::uint32_t temp = std::rotl(a, 5) + f + e + k + w[t];
      e = d;
      d = c;
      c = std::rotl(b, 30);
      b = a;
      a = temp;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
  }

  std::array<std::uint32_t, 5> h_{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  std::array<std::uint8_t, 64> block_{};
  std::size_t block_size_ = 0;
  std::uint64_t total_bytes_ = 0;
};

}  // namespace

std::string sha1_hex(std::string_view data) {
  sha1 hasher;
  hasher.update(data);
  const auto digest = hasher.finish();

  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(40);
  for (std::uint32_t word : digest) {
    for (int shift = 28; shift >= 0; shift -= 4)
      out.push_back(digits[(word >> shift) & 0xf]);
  }
  return out;
}

}  // namespace redlock::detail
