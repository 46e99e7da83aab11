# Unity builds: a target's sources compiled in batches of eight, one translation unit per batch.
# Each source of the library, its tests, tool and benchmark parses the same Boost.Asio, OpenSSL
# and fmt headers and instantiates many of the same templates (the tests' coroutines most of
# all); compiled together, they do that once per batch, and each target builds in less than half
# the time. The sources keep the names of their file-local helpers distinct, so that any batching
# compiles; a helper two files need is shared in a header rather than copied.
#
# The batches are written here rather than by CMake's UNITY_BUILD, whose batch files include each
# source by its absolute path (until CMake 3.32): ccache then sees other text in every clone of
# the repository and compiles everything again. These batch files include their sources by paths
# relative to themselves, so the same build directory in another clone (build/release) gives the
# same files, and with ccache's base directory set to the clone, the same cache entries.
#
# On by default. A build with it off compiles each file alone, which checks that each includes
# what it uses (the add_subdirectory packaging test builds the library that way).
option(REDLOCK_UNITY_BUILD "Compile the larger targets' sources in batches (a unity build)" ON)
# Eight per batch keeps both cores busy; 0 puts each target's sources in one batch, which shows
# every clash of file-local names at once.
set(REDLOCK_UNITY_BATCH_SIZE 8 CACHE STRING "Sources per batch of a unity build (0: all)")

# redlock_unity_build(<target>): batches <target>'s sources when REDLOCK_UNITY_BUILD is on, once
# the directory that defines it is read (so that sources added and SKIP_UNITY_BUILD_INCLUSION set
# after this call count). The batch size is the target's REDLOCK_UNITY_BATCH_SIZE property if set
# by then, else the REDLOCK_UNITY_BATCH_SIZE variable.
function(redlock_unity_build target)
  if(NOT REDLOCK_UNITY_BUILD)
    return()
  endif()
  # A deferred call reads its arguments' variables when it runs: the name is written in now.
  cmake_language(EVAL CODE "cmake_language(DEFER CALL redlock_write_unity_batches [[${target}]])")
  # g++ warns when a class defined outside the main file holds a type of no linkage, which is
  # the point of the warning in a header; in a batch every source is outside the main file, and
  # every coroutine whose frame keeps a lambda would be reported.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
endfunction()

# Replaces <target>'s C++ sources by batch files <build dir>/<target>.unity/batch_N.cpp.
function(redlock_write_unity_batches target)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  get_target_property(batch_size ${target} REDLOCK_UNITY_BATCH_SIZE)
  if(NOT batch_size AND NOT batch_size STREQUAL "0")
    set(batch_size ${REDLOCK_UNITY_BATCH_SIZE})
  endif()
  set(unity_dir "${CMAKE_CURRENT_BINARY_DIR}/${target}.unity")
  set(kept "")
  set(batched "")
  foreach(source IN LISTS sources)
    get_source_file_property(skip "${source}" SKIP_UNITY_BUILD_INCLUSION)
    if(source MATCHES "\\.cpp$" AND NOT skip)
      get_filename_component(path "${source}" ABSOLUTE BASE_DIR "${source_dir}")
      list(APPEND batched "${path}")
    else()
      list(APPEND kept "${source}")
    endif()
  endforeach()
  list(LENGTH batched count)
  if(count LESS 2)
    return()
  endif()
  if(batch_size EQUAL 0)
    set(batch_size ${count})
  endif()
  set(batches "")
  set(batch 0)
  set(index 0)
  set(text "")
  foreach(path IN LISTS batched)
    file(RELATIVE_PATH relative "${unity_dir}" "${path}")
    string(APPEND text "#include \"${relative}\"\n")
    math(EXPR index "${index} + 1")
    math(EXPR filled "${index} % ${batch_size}")
    if(filled EQUAL 0 OR index EQUAL count)
      set(file "${unity_dir}/batch_${batch}.cpp")
      # Written only when its text changes, so that a new configure does not rebuild the target.
      file(CONFIGURE OUTPUT "${file}" CONTENT "${text}" @ONLY)
      list(APPEND batches "${file}")
      math(EXPR batch "${batch} + 1")
      set(text "")
    endif()
  endforeach()
  set_property(TARGET ${target} PROPERTY SOURCES ${kept} ${batches})
endfunction()
