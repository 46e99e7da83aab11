# Install rules and package files for the library; included by the top-level CMakeLists.txt when
# REDLOCK_INSTALL is on. Only the `redlock` target (and `redlock_prometheus`, the component
# `prometheus`, when built) is exported: redlock_internal and the test
# support libraries name the source tree and are for this repository's own tests and benchmarks.
#
# Installed layout (GNUInstallDirs):
#   include/redlock/**                 public headers, detail/ too (the public templates use it)
#   lib/libredlock.a (or .so)          the library
#   lib/cmake/redlock/                 redlockConfig.cmake, redlockConfigVersion.cmake,
#                                      redlockTargets*.cmake (namespace redlock::)
#   lib/pkgconfig/redlock.pc           for builds that do not use CMake
# all in the install component redlock_dev (the package libredlock-asio-dev,
# cmake/redlock_packaging.cmake). The command-line tool installs itself from tools/, in the
# component redlock_tools.

include(CMakePackageConfigHelpers)

set(redlock_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/redlock)
set(redlock_package_dir ${PROJECT_BINARY_DIR}/redlock-package)

# A shared build's installed programs (the CLI) must find the library in whatever prefix they land.
if(BUILD_SHARED_LIBS AND NOT DEFINED CMAKE_INSTALL_RPATH
   AND NOT IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}" AND NOT IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  file(RELATIVE_PATH redlock_bin_to_lib "/prefix/${CMAKE_INSTALL_BINDIR}"
       "/prefix/${CMAKE_INSTALL_LIBDIR}")
  set(CMAKE_INSTALL_RPATH "$ORIGIN/${redlock_bin_to_lib}")
endif()

install(TARGETS redlock EXPORT redlockTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT redlock_dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT redlock_dev
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT redlock_dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/redlock
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT redlock_dev
  FILES_MATCHING PATTERN "*.hpp")
install(EXPORT redlockTargets NAMESPACE redlock:: DESTINATION ${redlock_config_dir}
  COMPONENT redlock_dev)

# The component `prometheus` (redlock::prometheus) has an export set of its own, which
# redlockConfig.cmake imports only when asked for it: a consumer that does not use metrics needs
# no prometheus-cpp.
if(REDLOCK_HAS_PROMETHEUS)
  install(TARGETS redlock_prometheus EXPORT redlockPrometheusTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT redlock_dev
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT redlock_dev
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT redlock_dev)
  install(EXPORT redlockPrometheusTargets NAMESPACE redlock:: DESTINATION ${redlock_config_dir}
    COMPONENT redlock_dev)
  export(EXPORT redlockPrometheusTargets NAMESPACE redlock::
    FILE ${PROJECT_BINARY_DIR}/redlockPrometheusTargets.cmake)
endif()

# fmt and OpenSSL are linked privately, but a static library carries its private dependencies in
# its link interface ($<LINK_ONLY:fmt::fmt>), so only then must consumers find them too.
get_target_property(redlock_library_type redlock TYPE)
if(redlock_library_type STREQUAL "STATIC_LIBRARY")
  set(REDLOCK_NEEDS_PRIVATE_DEPS ON)
else()
  set(REDLOCK_NEEDS_PRIVATE_DEPS OFF)
endif()

# An install that strips (cmake --install --strip, and cpack for the Debian packages) strips the
# programs and shared libraries, but leaves a static library's debugging information, most of
# its size: drop that too, keeping every symbol a link needs, as Debian's dh_strip does.
if(redlock_library_type STREQUAL "STATIC_LIBRARY" AND CMAKE_STRIP)
  set(redlock_archives $<TARGET_FILE_NAME:redlock>)
  if(REDLOCK_HAS_PROMETHEUS)
    list(APPEND redlock_archives $<TARGET_FILE_NAME:redlock_prometheus>)
  endif()
  foreach(archive IN LISTS redlock_archives)
    install(CODE "if(CMAKE_INSTALL_DO_STRIP)
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug --enable-deterministic-archives
        \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/${archive}\"
        COMMAND_ERROR_IS_FATAL ANY)
    endif()" COMPONENT redlock_dev)
  endforeach()
endif()

# A 0.x project may break its API with any minor release (0.1 -> 0.2), so only the same major.minor
# satisfies a request: SameMajorVersion would let find_package(redlock 0.1) accept 0.2.
# Patch releases stay compatible.
write_basic_package_version_file(${redlock_package_dir}/redlockConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/redlockConfig.cmake.in
  ${redlock_package_dir}/redlockConfig.cmake
  INSTALL_DESTINATION ${redlock_config_dir})
install(FILES ${redlock_package_dir}/redlockConfig.cmake
              ${redlock_package_dir}/redlockConfigVersion.cmake
  DESTINATION ${redlock_config_dir} COMPONENT redlock_dev)

# The build tree is a package too: -Dredlock_DIR=<this build directory> finds these files, and the
# targets they import point at the library and headers in place.
export(EXPORT redlockTargets NAMESPACE redlock:: FILE ${PROJECT_BINARY_DIR}/redlockTargets.cmake)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/redlockConfig.cmake.in
  ${PROJECT_BINARY_DIR}/redlockConfig.cmake
  INSTALL_DESTINATION ${PROJECT_BINARY_DIR}
  INSTALL_PREFIX ${PROJECT_BINARY_DIR})
configure_file(${redlock_package_dir}/redlockConfigVersion.cmake
  ${PROJECT_BINARY_DIR}/redlockConfigVersion.cmake COPYONLY)

# pkg-config. The prefix is derived from the .pc file's own location, so the file stays right when
# `cmake --install --prefix` (or DESTDIR) puts it elsewhere than CMAKE_INSTALL_PREFIX.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(REDLOCK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(REDLOCK_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH redlock_pc_up "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" redlock_pc_up "${redlock_pc_up}")
  set(REDLOCK_PC_PREFIX "\${pcfiledir}/${redlock_pc_up}")
  set(REDLOCK_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(REDLOCK_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(REDLOCK_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# Static: `pkg-config --libs` must already name everything the archive needs (fmt, OpenSSL,
# threads), since most users do not pass --static. Shared: the library brings them itself.
if(REDLOCK_NEEDS_PRIVATE_DEPS)
  set(REDLOCK_PC_REQUIRES "Requires: fmt, libssl, libcrypto")
else()
  set(REDLOCK_PC_REQUIRES "Requires.private: fmt, libssl, libcrypto")
endif()
# Two steps: configure_file for the variables above, file(GENERATE) for the library's file name,
# which depends on the configuration (a debug postfix, for instance).
configure_file(${CMAKE_CURRENT_LIST_DIR}/redlock.pc.in ${redlock_package_dir}/redlock.pc.in @ONLY)
file(GENERATE OUTPUT ${redlock_package_dir}/$<CONFIG>/redlock.pc
  INPUT ${redlock_package_dir}/redlock.pc.in)
install(FILES ${redlock_package_dir}/$<CONFIG>/redlock.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT redlock_dev)
