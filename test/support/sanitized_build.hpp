#ifndef REDLOCK_TEST_SUPPORT_SANITIZED_BUILD_HPP
#define REDLOCK_TEST_SUPPORT_SANITIZED_BUILD_HPP

namespace redlock::test {

// Whether this test binary runs under AddressSanitizer or ThreadSanitizer: several times slower on
// the same timeouts, so that checks of speed or of timing are reported there rather than judged.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif

}  // namespace redlock::test

#endif
