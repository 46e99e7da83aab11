#ifndef REDLOCK_CONFIG_HPP
#define REDLOCK_CONFIG_HPP

// REDLOCK_API marks what a shared libredlock exports. A shared build compiles everything else with
// hidden visibility, so that only the public API is part of the library's ABI; the build system
// defines REDLOCK_SHARED_LIBRARY for the library and its users (and REDLOCK_BUILDING_LIBRARY while
// compiling it). A static build needs neither, and REDLOCK_API is empty.
#if defined(REDLOCK_SHARED_LIBRARY)
#if defined(_WIN32)
#if defined(REDLOCK_BUILDING_LIBRARY)
#define REDLOCK_API __declspec(dllexport)
#else
#define REDLOCK_API __declspec(dllimport)
#endif
#else
#define REDLOCK_API __attribute__((visibility("default")))
#endif
#else
#define REDLOCK_API
#endif

namespace redlock::detail {

// Asio is header-only, so the library and the program both instantiate its inline functions, and
// the linker keeps one copy of each. Asio's configuration macros change some of their signatures
// (with BOOST_ASIO_NO_DEPRECATED, basic_socket::close(error_code&) returns void instead of an
// error_code), so a program and a library built with different settings call each other's copies
// with the wrong calling convention and corrupt memory. The library is built with Asio's defaults.
// The client's public constructor is inline and passes this tag to the compiled one, so a program
// built otherwise fails to link, with an undefined reference that names the setting, instead of
// crashing at run time.
#if defined(BOOST_ASIO_NO_DEPRECATED)
struct built_with_BOOST_ASIO_NO_DEPRECATED {};
using asio_configuration = built_with_BOOST_ASIO_NO_DEPRECATED;
#else
struct built_with_asio_defaults {};
using asio_configuration = built_with_asio_defaults;
#endif

}  // namespace redlock::detail

#endif
