#include "resp/script.hpp"

#include "resp/encoder.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <openssl/evp.h>
#include <stdexcept>
#include <vector>

namespace redlock::detail {

std::string sha1_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha1(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL could not compute a SHA-1 digest");
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * size);
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back(digits[digest[i] >> 4]);
    hex.push_back(digits[digest[i] & 0xf]);
  }
  return hex;
}

script::script(std::string source)
    : source_(std::move(source)),
      sha1_(sha1_hex(source_)),
      one_key_call_(resp::encode_bare_words("EVALSHA", sha1_, "1")) {}

std::string encode_evalsha(const script& s, std::span<const std::string_view> keys,
                           std::span<const std::string_view> args) {
  return encode_evalsha_as<std::string>(s, keys, args);
}

namespace {

// Returns the offset just past the CRLF that ends the line starting at `pos`.
std::size_t skip_line(std::string_view payload, std::size_t pos) {
  const auto end = payload.find("\r\n", pos);
  if (end == std::string_view::npos) throw std::logic_error("malformed EVALSHA payload");
  return end + 2;
}

// Returns the offset just past the bulk string ($len CRLF bytes CRLF) starting at `pos`.
std::size_t skip_bulk(std::string_view payload, std::size_t pos) {
  const auto header_end = skip_line(payload, pos);
  std::size_t length = 0;
  std::from_chars(payload.data() + pos + 1, payload.data() + header_end - 2, length);
  return header_end + length + 2;
}

}  // namespace

std::string evalsha_to_eval(const script& s, std::string_view evalsha_payload) {
  // Layout: "*N" CRLF, bulk "EVALSHA", bulk sha, then numkeys/keys/args, which are kept as is.
  const auto header_end = skip_line(evalsha_payload, 0);
  const auto tail = skip_bulk(evalsha_payload, skip_bulk(evalsha_payload, header_end));
  std::string payload(evalsha_payload.substr(0, header_end));
  const std::string_view head[] = {"EVAL", s.source()};
  std::string head_encoded;
  resp::encode_command(head_encoded, head);
  // encode_command wrote "*2" CRLF first; keep only the two bulk strings.
  payload.append(head_encoded, skip_line(head_encoded, 0));
  payload.append(evalsha_payload.substr(tail));
  return payload;
}

}  // namespace redlock::detail
