# Builds and runs consumer/ against redlock one way, as a ctest script (cmake -P):
#
#   MODE=find_package      installs the outer build into WORK_DIR/prefix (cmake --install), checks
#                          what was installed and the pkg-config file (also by compiling the
#                          consumer with pkg-config's flags alone), builds the consumer with
#                          CMAKE_PREFIX_PATH=WORK_DIR/prefix
#   MODE=build_tree        builds the consumer with redlock_DIR=<outer build directory>
#   MODE=add_subdirectory  builds the consumer with add_subdirectory(<redlock source tree>), as a
#                          shared library (the two modes above cover the default static one)
#   MODE=unpacked          as find_package, with PREFIX an install that is there already: the
#                          Debian packages unpacked into a directory (scripts/check_packages.sh),
#                          whose files must work from wherever they were unpacked
#
# Each mode then runs the consumer against a port where no Redis listens (it must fail quickly),
# with a bad node list (it must refuse it), and, when the outer build has the redis_nodes launcher,
# against three real nodes (it must acquire and release).
#
# Inputs (-D): MODE, SOURCE_DIR, BINARY_DIR (the outer build), WORK_DIR, CONFIG, GENERATOR,
# MAKE_PROGRAM, CXX_COMPILER, CXX_COMPILER_LAUNCHER (optional: the outer build's, e.g. ccache),
# CXX_FLAGS (what programs linking the outer build's library need, e.g. its sanitizers), WERROR,
# VERSION, INCLUDEDIR, LIBDIR, BINDIR (GNUInstallDirs, relative),
# PKG_CONFIG, REDIS_NODES and CLI_NAME (empty when the outer build has no such target), PROMETHEUS
# (ON when the outer build has the component redlock::prometheus: the consumer then asks for it
# and builds consumer_metrics too), PREFIX (MODE=unpacked only).
cmake_minimum_required(VERSION 3.25)

foreach(required MODE SOURCE_DIR BINARY_DIR WORK_DIR GENERATOR CXX_COMPILER VERSION)
  if(NOT DEFINED ${required} OR "${${required}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: -D${required}=... is missing")
  endif()
endforeach()
if(NOT MODE MATCHES "^(find_package|build_tree|add_subdirectory|unpacked)$")
  message(FATAL_ERROR "run_consumer.cmake: unknown MODE \"${MODE}\"")
endif()

# Runs one step, its output going straight to ctest's log; fails naming the step.
function(run_step what)
  message(STATUS "${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${what}: failed (${code})")
  endif()
endfunction()

# The consumer starts from nothing every time: a cache or binary left from an earlier run could
# hide a broken package.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(consumer_build ${WORK_DIR}/consumer-build)
set(prefix ${WORK_DIR}/prefix)
if(MODE STREQUAL "unpacked")
  if(NOT IS_DIRECTORY "${PREFIX}")
    message(FATAL_ERROR "run_consumer.cmake: MODE=unpacked needs -DPREFIX=<a directory>")
  endif()
  set(prefix ${PREFIX})
endif()

set(configure_args
  -S ${CMAKE_CURRENT_LIST_DIR}/consumer -B ${consumer_build} -G ${GENERATOR}
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  # Only the package under test may be found, never one left in the user's package registry.
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DWITH_PROMETHEUS=${PROMETHEUS})
if(MAKE_PROGRAM)
  list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
# The outer build's compiler launcher (ccache): the library compiled here is then compiled once
# per source change, not on every run.
if(CXX_COMPILER_LAUNCHER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_COMPILER_LAUNCHER})
endif()

if(MODE MATCHES "^(find_package|unpacked)$")
  foreach(dir INCLUDEDIR LIBDIR BINDIR)
    if(IS_ABSOLUTE "${${dir}}")
      # An absolute install directory ignores --prefix: installing would write outside WORK_DIR.
      message("cmake-test-skipped: CMAKE_INSTALL_${dir} is absolute (${${dir}})")
      return()
    endif()
  endforeach()

  if(MODE STREQUAL "find_package")
    set(install_args --install ${BINARY_DIR} --prefix ${prefix})
    if(CONFIG)
      list(APPEND install_args --config ${CONFIG})
    endif()
    run_step("install the outer build into ${prefix}" ${CMAKE_COMMAND} ${install_args})
  endif()

  # What an install holds: the headers, the library, the package files, the CLI and, from the
  # tools, anything under share/. Never a test, a benchmark or a helper library.
  file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
  list(SORT installed)
  string(REPLACE ";" "\n  " listing "${installed}")
  message(STATUS "installed:\n  ${listing}")
  foreach(file IN LISTS installed)
    get_filename_component(name ${file} NAME)
    if(file MATCHES "^${INCLUDEDIR}/redlock/.*\\.hpp$"
       OR (file STREQUAL "${LIBDIR}/${name}"
           AND name MATCHES "^libredlock(_prometheus)?\\.(a|so[.0-9]*)$")
       OR file MATCHES "^${LIBDIR}/cmake/redlock/redlock[A-Za-z-]*\\.cmake$"
       OR file STREQUAL "${LIBDIR}/pkgconfig/redlock.pc"
       OR (CLI_NAME AND file STREQUAL "${BINDIR}/${CLI_NAME}")
       OR file MATCHES "^share/")
      continue()
    endif()
    message(FATAL_ERROR "${file} was installed: only the library, its public headers, its package "
                        "files and the redlock CLI belong in an install")
  endforeach()
  foreach(file ${INCLUDEDIR}/redlock/redlock.hpp ${INCLUDEDIR}/redlock/detail/initiate.hpp
               ${LIBDIR}/cmake/redlock/redlockConfig.cmake
               ${LIBDIR}/cmake/redlock/redlockConfigVersion.cmake
               ${LIBDIR}/cmake/redlock/redlockTargets.cmake ${LIBDIR}/pkgconfig/redlock.pc)
    if(NOT EXISTS ${prefix}/${file})
      message(FATAL_ERROR "${file} was not installed")
    endif()
  endforeach()
  file(GLOB library ${prefix}/${LIBDIR}/libredlock.*)
  if(NOT library)
    message(FATAL_ERROR "the library was not installed into ${LIBDIR}")
  endif()
  if(CLI_NAME)
    if(NOT EXISTS ${prefix}/${BINDIR}/${CLI_NAME})
      message(FATAL_ERROR "the outer build has the CLI, but ${BINDIR}/${CLI_NAME} is not installed")
    endif()
    execute_process(COMMAND ${prefix}/${BINDIR}/${CLI_NAME} --version RESULT_VARIABLE code
      OUTPUT_VARIABLE cli_version ERROR_VARIABLE cli_version OUTPUT_STRIP_TRAILING_WHITESPACE)
    string(FIND "${cli_version}" "${VERSION}" at)
    if(NOT code EQUAL 0 OR at EQUAL -1)
      message(FATAL_ERROR "the installed ${BINDIR}/${CLI_NAME} --version: exit ${code}, "
                          "\"${cli_version}\"; expected ${VERSION}")
    endif()
    message(STATUS "the installed CLI runs: ${cli_version}")
  endif()

  file(READ ${prefix}/${LIBDIR}/cmake/redlock/redlockTargets.cmake targets_file)
  string(REGEX MATCHALL "add_library\\([^ )]+" exported "${targets_file}")
  if(NOT exported STREQUAL "add_library(redlock::redlock")
    message(FATAL_ERROR "the export set holds ${exported}; expected redlock::redlock only")
  endif()

  if(NOT PKG_CONFIG)
    message(FATAL_ERROR "pkg-config was not found (scripts/bootstrap.sh installs it)")
  endif()
  set(pkg_env ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${prefix}/${LIBDIR}/pkgconfig)
  execute_process(COMMAND ${pkg_env} ${PKG_CONFIG} --modversion redlock
    RESULT_VARIABLE code OUTPUT_VARIABLE pc_version OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT code EQUAL 0 OR NOT pc_version STREQUAL VERSION)
    message(FATAL_ERROR "pkg-config --modversion redlock: \"${pc_version}\" (${code}), "
                        "expected ${VERSION}")
  endif()
  execute_process(COMMAND ${pkg_env} ${PKG_CONFIG} --cflags --libs redlock
    RESULT_VARIABLE code OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE)
  message(STATUS "pkg-config --cflags --libs redlock: ${pc_flags}")
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags --libs redlock failed (${code})")
  endif()
  # A static library (the default): pkg-config --libs, without --static, must already name what
  # the archive needs.
  set(wanted_flags -lredlock -pthread)
  if(EXISTS ${prefix}/${LIBDIR}/libredlock.a)
    list(APPEND wanted_flags -lfmt)
  endif()
  foreach(flag ${wanted_flags})
    if(NOT " ${pc_flags} " MATCHES " ${flag} ")
      message(FATAL_ERROR "pkg-config --cflags --libs redlock lacks ${flag}")
    endif()
  endforeach()
  # Proof that those flags are enough: the consumer built with them and nothing else.
  separate_arguments(pc_args UNIX_COMMAND "${pc_flags}")
  separate_arguments(extra_flags UNIX_COMMAND "${CXX_FLAGS}")
  run_step("compile the consumer with pkg-config's flags"
    ${CXX_COMPILER} -std=c++20 ${extra_flags} "-DREDLOCK_PACKAGE_VERSION=\"${pc_version}\""
    ${CMAKE_CURRENT_LIST_DIR}/consumer/main.cpp ${pc_args} -o ${WORK_DIR}/consumer_pkg_config)
  # LD_LIBRARY_PATH: for a shared library, which pkg-config gives no run path for.
  run_step("run the pkg-config consumer against a closed port"
    ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${prefix}/${LIBDIR}
    ${WORK_DIR}/consumer_pkg_config --nodes redis://127.0.0.1:1 --expect refused)

  # A program built with other Asio settings than the library would corrupt memory at run time
  # (redlock/config.hpp): it must fail to link instead, naming the setting. (The library of a
  # package is the same archive: checked once, here.)
  if(MODE STREQUAL "find_package")
    message(STATUS "link a consumer built with BOOST_ASIO_NO_DEPRECATED (must fail)")
    execute_process(
      COMMAND ${CXX_COMPILER} -std=c++20 -DBOOST_ASIO_NO_DEPRECATED ${extra_flags}
              ${CMAKE_CURRENT_LIST_DIR}/consumer/main.cpp ${pc_args}
              -o ${WORK_DIR}/consumer_no_deprecated
      RESULT_VARIABLE code OUTPUT_VARIABLE link_output ERROR_VARIABLE link_output)
    if(code EQUAL 0 OR NOT link_output MATCHES "built_with_BOOST_ASIO_NO_DEPRECATED")
      message(FATAL_ERROR "a consumer built with BOOST_ASIO_NO_DEPRECATED: exit ${code}, expected "
                          "a link failure naming the setting; output:\n${link_output}")
    endif()
  endif()

  list(APPEND configure_args -DCMAKE_PREFIX_PATH=${prefix} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}")
  set(expected_dir ${prefix}/${LIBDIR}/cmake/redlock)
elseif(MODE STREQUAL "build_tree")
  list(APPEND configure_args -Dredlock_DIR=${BINARY_DIR} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}")
  set(expected_dir ${BINARY_DIR})
else()
  # Built from source here, so the outer build's sanitizers are not needed. What this mode checks
  # is how the library builds as a subproject and a shared library (and, without precompiled
  # headers or a unity build, that each of its files includes what it uses), not its code, which
  # the outer build compiles and tests: unoptimized and without debug information it builds in
  # half the time.
  list(APPEND configure_args -DREDLOCK_SOURCE_DIR=${SOURCE_DIR} -DBUILD_SHARED_LIBS=ON
       -DREDLOCK_UNITY_BUILD=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -DNDEBUG")
  if(WERROR)
    list(APPEND configure_args -DREDLOCK_WERROR=ON)
  endif()
endif()

run_step("configure the consumer (${MODE})" ${CMAKE_COMMAND} ${configure_args})
if(DEFINED expected_dir)
  file(STRINGS ${consumer_build}/CMakeCache.txt found_dir REGEX "^redlock_DIR:")
  string(REGEX REPLACE "^[^=]*=" "" found_dir "${found_dir}")
  file(REAL_PATH ${found_dir} found_dir)
  file(REAL_PATH ${expected_dir} expected_dir)
  if(NOT found_dir STREQUAL expected_dir)
    message(FATAL_ERROR "find_package(redlock) used ${found_dir}, not ${expected_dir}")
  endif()
endif()
run_step("build the consumer" ${CMAKE_COMMAND} --build ${consumer_build} --config RelWithDebInfo
  --parallel 2)

if(MODE STREQUAL "add_subdirectory")
  # The embedded build made the shared library and none of redlock's own programs.
  file(GLOB shared_library ${consumer_build}/redlock-build/libredlock.so*)
  if(NOT shared_library)
    message(FATAL_ERROR "BUILD_SHARED_LIBS=ON did not make libredlock.so")
  endif()
  # It exports the public API (REDLOCK_API) and hides the internals.
  find_program(NM_PROGRAM nm)
  if(NM_PROGRAM)
    list(GET shared_library 0 library_file)
    execute_process(COMMAND ${NM_PROGRAM} -D -C --defined-only ${library_file}
      RESULT_VARIABLE code OUTPUT_VARIABLE exported)
    if(NOT code EQUAL 0)
      message(FATAL_ERROR "nm -D ${library_file} failed (${code})")
    endif()
    foreach(wanted "redlock::client::client" "redlock::lease::get_executor" "redlock::error_category"
                   "redlock::node_config::from_url" "redlock::detail::initiate_acquire")
      string(FIND "${exported}" "${wanted}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "libredlock.so does not export ${wanted}")
      endif()
    endforeach()
    foreach(hidden "redlock::detail::connection::" "redlock::resp::parser::"
                   "redlock::detail::client_impl::")
      string(FIND "${exported}" "${hidden}" at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR "libredlock.so exports internals: ${hidden}")
      endif()
    endforeach()
    message(STATUS "libredlock.so exports the public API only")
  endif()
  foreach(unwanted unit_tests integration_tests partition_tests redis_nodes resp_fuzz
                   libredlock_test_support.a)
    file(GLOB_RECURSE found ${consumer_build}/redlock-build/${unwanted})
    if(found)
      message(FATAL_ERROR "the embedded redlock built ${found}")
    endif()
  endforeach()
endif()

set(consumer ${consumer_build}/consumer)
if(NOT EXISTS ${consumer})
  set(consumer ${consumer_build}/RelWithDebInfo/consumer)
endif()
run_step("run the consumer against a closed port" ${consumer} --nodes redis://127.0.0.1:1
  --expect refused)
if(PROMETHEUS)
  run_step("run consumer_metrics (redlock::prometheus)" ${consumer}_metrics)
endif()

execute_process(COMMAND ${consumer} --nodes http://127.0.0.1:6379 RESULT_VARIABLE code
  ERROR_VARIABLE complaint ERROR_STRIP_TRAILING_WHITESPACE)
if(NOT code EQUAL 2 OR NOT complaint MATCHES "bad node list: .*http://127.0.0.1:6379.*scheme")
  message(FATAL_ERROR "a bad node list gave exit ${code} and \"${complaint}\"; expected exit 2 "
                      "and a message naming it")
endif()
message(STATUS "a bad node list is refused: ${complaint}")

if(REDIS_NODES AND EXISTS ${REDIS_NODES})
  run_step("run the consumer against 3 redis-server nodes"
    ${REDIS_NODES} --count 3 --quiet -- ${consumer} --expect held)
else()
  message(STATUS "redis_nodes is not built: the consumer was not run against real nodes")
endif()
message(STATUS "cmake.${MODE}: passed")
