# Unity builds: a target's sources compiled in batches of eight, one translation unit per batch.
# Each source of the library parses the same Boost.Asio, OpenSSL and fmt headers and instantiates
# many of the same templates; compiled together, they do that once per batch, and the library
# builds in less than half the time. The sources keep the names of their file-local helpers
# distinct so that any batching compiles.
#
# On by default. A build with it off compiles each file alone, which checks that each includes
# what it uses (the add_subdirectory packaging test builds the library that way).
option(REDLOCK_UNITY_BUILD "Compile the library's sources in batches (a unity build)" ON)

# redlock_unity_build(<target>): batches <target>'s sources when REDLOCK_UNITY_BUILD is on.
function(redlock_unity_build target)
  if(REDLOCK_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
