# Debian packages with CPack, from a build tree: `cpack -G DEB` there writes
#
#   libredlock-asio-dev_<version>-1_<arch>.deb   the install component redlock_dev: headers, the
#                                                library, the CMake package and pkg-config files,
#                                                and the component redlock::prometheus when built
#   redlock-tools_<version>-1_<arch>.deb         the install component redlock_tools: the redlock
#                                                command, its manual page, its bash completion
#
# for /usr, each with its copyright file and changelogs in /usr/share/doc/<package>. Included by
# the top-level CMakeLists.txt after every install rule: CPack reads the list of components when
# it is included. Making them needs gzip, and dpkg-shlibdeps (dpkg-dev) for the tools' Depends.
#
# The packages hold what this tree built, where it installs. A tree that builds the tests also
# compiles the library's test switches in (src/unsafe_switches.hpp, all off unless a test sets
# them): for packages to ship, configure with -DREDLOCK_BUILD_TESTS=OFF. Debian's multiarch
# layout (/usr/lib/<triplet>) is what GNUInstallDirs chooses with -DCMAKE_INSTALL_PREFIX=/usr, or
# give -DCMAKE_INSTALL_LIBDIR=lib/<triplet> (scripts/test.sh does); the default, lib, makes
# packages that work but that lintian warns about (pkg-config-unavailable-for-cross-compilation).

set(REDLOCK_PACKAGE_MAINTAINER
    "redlock-asio maintainers <maintainers@redlock-asio.invalid>"
    CACHE STRING "The Maintainer field of the Debian packages, \"Name <address>\"")
set(REDLOCK_PACKAGE_HOMEPAGE "" CACHE STRING
    "The Homepage field of the Debian packages (left out when empty)")
set(REDLOCK_PACKAGE_RELEASE 1 CACHE STRING
    "The Debian revision of the packages: <version>-<revision>")

find_program(REDLOCK_GZIP gzip)
if(NOT REDLOCK_GZIP)
  message(STATUS "redlock: gzip not found; no Debian packages (cpack)")
  return()
endif()
if(REDLOCK_BUILD_TESTS)
  message(STATUS "redlock: packages made from this tree (cpack) carry the library's test "
                 "switches; configure with -DREDLOCK_BUILD_TESTS=OFF for packages to ship")
endif()

set(redlock_dev_package libredlock-asio-dev)
set(redlock_tools_package redlock-tools)
set(redlock_debian_dir ${PROJECT_BINARY_DIR}/redlock-package/debian)
set(redlock_debian_version ${PROJECT_VERSION}-${REDLOCK_PACKAGE_RELEASE})

# --- What each package's /usr/share/doc/<package> holds, as Debian policy asks ---------------

# The copyright file in the machine-readable format, the licence text from LICENSE.
file(READ ${PROJECT_SOURCE_DIR}/LICENSE redlock_license)
string(STRIP "${redlock_license}" redlock_license)
string(REGEX REPLACE "\n\n" "\n.\n" redlock_license "${redlock_license}")
string(REGEX REPLACE "\n\n" "\n.\n" redlock_license "${redlock_license}")
string(REPLACE "\n" "\n " redlock_license "${redlock_license}")
set(redlock_source_line "")
if(REDLOCK_PACKAGE_HOMEPAGE)
  set(redlock_source_line "Source: ${REDLOCK_PACKAGE_HOMEPAGE}\n")
endif()
file(CONFIGURE OUTPUT ${redlock_debian_dir}/copyright CONTENT "\
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: redlock-asio
${redlock_source_line}
Files: *
Copyright: the redlock-asio authors
License: BSL-1.0

License: BSL-1.0
 ${redlock_license}
" @ONLY)

# The Debian changelog: one entry for the version packaged. Its date is SOURCE_DATE_EPOCH's when
# set, else the time the version header last changed, so that rebuilding the packages of one
# version gives the same file.
if(DEFINED ENV{SOURCE_DATE_EPOCH})
  string(TIMESTAMP redlock_changelog_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
else()
  file(TIMESTAMP ${PROJECT_SOURCE_DIR}/include/redlock/version.hpp redlock_changelog_date
       "%a, %d %b %Y %H:%M:%S +0000" UTC)
endif()
file(CONFIGURE OUTPUT ${redlock_debian_dir}/changelog.Debian CONTENT "\
redlock-asio (${redlock_debian_version}) unstable; urgency=medium

  * Built with CPack from the redlock-asio sources of version ${PROJECT_VERSION}; what it
    changed is in changelog.gz.

 -- ${REDLOCK_PACKAGE_MAINTAINER}  ${redlock_changelog_date}
" @ONLY)

# Both compressed with -9 and without the file's name and time in the header (-n), as lintian
# checks; changelog.gz is the project's own CHANGELOG.md.
add_custom_command(
  OUTPUT ${redlock_debian_dir}/changelog.Debian.gz ${redlock_debian_dir}/changelog.gz
  COMMAND ${REDLOCK_GZIP} -9 -n -k -f ${redlock_debian_dir}/changelog.Debian
  COMMAND ${CMAKE_COMMAND} -E copy ${PROJECT_SOURCE_DIR}/CHANGELOG.md
          ${redlock_debian_dir}/changelog
  COMMAND ${REDLOCK_GZIP} -9 -n -f ${redlock_debian_dir}/changelog
  DEPENDS ${redlock_debian_dir}/changelog.Debian ${PROJECT_SOURCE_DIR}/CHANGELOG.md
  COMMENT "Compressing the changelogs of the Debian packages"
  VERBATIM)
add_custom_target(redlock_debian_docs ALL
  DEPENDS ${redlock_debian_dir}/changelog.Debian.gz ${redlock_debian_dir}/changelog.gz)

# EXCLUDE_FROM_ALL: only in the packages; `cmake --install` into a prefix leaves them out.
set(redlock_components redlock_dev)
if(TARGET redlock_cli)
  list(APPEND redlock_components redlock_tools)
endif()
foreach(component IN LISTS redlock_components)
  install(FILES ${redlock_debian_dir}/copyright ${redlock_debian_dir}/changelog.Debian.gz
                ${redlock_debian_dir}/changelog.gz
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${${component}_package}
    COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

# --- The packages -----------------------------------------------------------------------------

set(CPACK_PACKAGE_NAME redlock-asio)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# CPackDeb puts this summary before each component's description unless it is CPack's default:
# with the default, the first line of each component's description is that package's synopsis.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CPACK_PACKAGE_NAME} built using CMake")
set(CPACK_PACKAGE_CONTACT "${REDLOCK_PACKAGE_MAINTAINER}")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL ${redlock_components})
# Debian ships no debugging symbols in the package itself.
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${REDLOCK_PACKAGE_RELEASE})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${REDLOCK_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SOURCE redlock-asio)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
if(REDLOCK_PACKAGE_HOMEPAGE)
  set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${REDLOCK_PACKAGE_HOMEPAGE}")
endif()
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)

# libredlock-asio-dev. What a program that includes the headers and links the library needs:
# the Boost headers of the version the library was compiled with (Asio's inline functions are
# shared between the two, so another Boost would break the one-definition rule), and, for the
# static library, fmt of the same major version (its symbols are versioned by an inline
# namespace, fmt::v9) and OpenSSL 3 or later. prometheus-cpp only for the component
# redlock::prometheus, which a program asks for: suggested.
string(REGEX MATCH "^[0-9]+\\.[0-9]+" redlock_boost_series "${Boost_VERSION}")
set(redlock_dev_depends "libboost${redlock_boost_series}-dev")
get_target_property(redlock_library_kind redlock TYPE)
if(redlock_library_kind STREQUAL "STATIC_LIBRARY")
  string(REGEX MATCH "^[0-9]+" redlock_fmt_major "${fmt_VERSION}")
  math(EXPR redlock_fmt_next "${redlock_fmt_major} + 1")
  string(REGEX MATCH "^[0-9]+" redlock_openssl_major "${OPENSSL_VERSION}")
  string(APPEND redlock_dev_depends ", libfmt-dev (>= ${fmt_VERSION}), "
                "libfmt-dev (<< ${redlock_fmt_next}), libssl-dev (>= ${redlock_openssl_major})")
else()
  # A shared library brings its own dependencies, which dpkg-shlibdeps finds.
  set(CPACK_DEBIAN_REDLOCK_DEV_PACKAGE_SHLIBDEPS ON)
endif()
set(CPACK_DEBIAN_REDLOCK_DEV_PACKAGE_NAME ${redlock_dev_package})
set(CPACK_DEBIAN_REDLOCK_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_REDLOCK_DEV_PACKAGE_DEPENDS "${redlock_dev_depends}")
if(REDLOCK_HAS_PROMETHEUS)
  # Debian's prometheus-cpp package file states no version.
  set(CPACK_DEBIAN_REDLOCK_DEV_PACKAGE_SUGGESTS prometheus-cpp-dev)
  if(prometheus-cpp_VERSION)
    string(APPEND CPACK_DEBIAN_REDLOCK_DEV_PACKAGE_SUGGESTS " (>= ${prometheus-cpp_VERSION})")
  endif()
endif()
set(CPACK_DEBIAN_REDLOCK_DEV_DESCRIPTION "\
Redlock distributed lock over Redis for Boost.Asio - development files
redlock-asio implements the Redlock distributed lock over independent Redis
masters (a single one is the single-instance lock) for programs that run a
Boost.Asio io_context: leases that renew themselves and report their loss,
mutexes, semaphores, read-write locks, several resources at once and fencing
tokens, on plain, TLS, Unix socket, Redis Cluster and Sentinel nodes.

This package holds the headers, the static library, the CMake package
(find_package(redlock)) and the pkg-config file (redlock). The component
redlock::prometheus, which exports the locks' metrics, needs
prometheus-cpp-dev.")

# redlock-tools. dpkg-shlibdeps derives the Depends from the shared libraries the command links.
set(CPACK_DEBIAN_REDLOCK_TOOLS_PACKAGE_NAME ${redlock_tools_package})
set(CPACK_DEBIAN_REDLOCK_TOOLS_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_REDLOCK_TOOLS_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_REDLOCK_TOOLS_DESCRIPTION "\
Redlock distributed lock over Redis for shell scripts and cron jobs
The redlock command runs a command under a Redlock distributed lock held on a
majority of independent Redis masters: it renews the lock while the command
runs, releases it when the command ends and stops the command when the lock is
lost. It also shows who holds a lock on which node, and takes, extends and
releases a lock across the steps of a script; semaphores, read-write locks and
several resources at once are locks it can take too.")

include(CPack)
