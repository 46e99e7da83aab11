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

#endif
