#ifndef REDLOCK_VERSION_HPP
#define REDLOCK_VERSION_HPP

/// @file
/// The version of redlock-asio these headers belong to, for code that must know it while it is
/// compiled.
///
/// It is written here once: CMake reads it from this file, and the package
/// (`find_package(redlock 0.1)`), pkg-config, `redlock --version` and the reference report it.
/// Before 1.0.0 a new minor version may change the API (CHANGELOG.md).

/// The major version: 0 until the API is declared stable.
#define REDLOCK_VERSION_MAJOR 0
/// The minor version; before 1.0.0 a new one may change the API.
#define REDLOCK_VERSION_MINOR 1
/// The patch version: fixes that keep the API of their minor version.
#define REDLOCK_VERSION_PATCH 0

/// The version as one number, major * 10000 + minor * 100 + patch (0.1.0 is 100), for `#if`:
/// `#if REDLOCK_VERSION >= 200` selects code for 0.2.0 and later.
#define REDLOCK_VERSION \
  (REDLOCK_VERSION_MAJOR * 10000 + REDLOCK_VERSION_MINOR * 100 + REDLOCK_VERSION_PATCH)

/// The version as text, "major.minor.patch"; configuring the build fails unless it agrees with
/// the three numbers above.
#define REDLOCK_VERSION_STRING "0.1.0"

#endif
