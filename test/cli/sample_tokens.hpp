#ifndef REDLOCK_TEST_CLI_SAMPLE_TOKENS_HPP
#define REDLOCK_TEST_CLI_SAMPLE_TOKENS_HPP

// Lock tokens of the form the library makes (40 hex digits), told apart by their first letters.

#include <string>

namespace redlock::test::sample_tokens {

inline const std::string token_a = "aaaaaaaa11112222333344445555666677778888";
inline const std::string token_b = "bbbbbbbb11112222333344445555666677778888";
inline const std::string token_c = "cccccccc11112222333344445555666677778888";

}  // namespace redlock::test::sample_tokens

#endif
