# Unity builds: a target's sources compiled in batches of eight, one translation unit per batch.
# Each source of the library, its tests, tool and benchmark parses the same Boost.Asio, OpenSSL
# and fmt headers and instantiates many of the same templates (the tests' coroutines most of
# all); compiled together, they do that once per batch, and each target builds in less than half
# the time. The sources keep the names of their file-local helpers distinct, so that any batching
# compiles; a helper two files need is shared in a header rather than copied.
#
# On by default. A build with it off compiles each file alone, which checks that each includes
# what it uses (the add_subdirectory packaging test builds the library that way).
option(REDLOCK_UNITY_BUILD "Compile the larger targets' sources in batches (a unity build)" ON)
# Eight per batch keeps both cores busy; 0 puts each target's sources in one batch, which shows
# every clash of file-local names at once.
set(REDLOCK_UNITY_BATCH_SIZE 8 CACHE STRING "Sources per batch of a unity build (0: all)")

# redlock_unity_build(<target>): batches <target>'s sources when REDLOCK_UNITY_BUILD is on.
function(redlock_unity_build target)
  if(REDLOCK_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON
                                               UNITY_BUILD_BATCH_SIZE ${REDLOCK_UNITY_BATCH_SIZE})
    # g++ warns when a class defined outside the main file holds a type of no linkage, which is
    # the point of the warning in a header; in a batch every source is outside the main file, and
    # every coroutine whose frame keeps a lambda would be reported.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
    endif()
  endif()
endfunction()
