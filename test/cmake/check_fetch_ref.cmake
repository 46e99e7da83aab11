# The README's FetchContent recipe must name a GIT_TAG that the repository holds (a branch, a tag
# or a commit): a recipe naming a tag nobody made fails for every reader who copies it. Run by
# ctest as `cmake -P` with SOURCE_DIR, the source tree; skipped when that is not a git checkout
# (a source tarball) or git is missing.
cmake_minimum_required(VERSION 3.25)

file(READ ${SOURCE_DIR}/README.md readme)
if(NOT readme MATCHES "FetchContent_Declare\\(redlock [^)]*GIT_TAG ([^ )\n]+)")
  message(FATAL_ERROR "README.md has no FetchContent_Declare(redlock ... GIT_TAG ...) recipe")
endif()
set(tag "${CMAKE_MATCH_1}")

find_program(GIT git)
if(NOT GIT)
  message("cmake-test-skipped: git is not installed")
  return()
endif()
execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} rev-parse --is-inside-work-tree
                RESULT_VARIABLE code OUTPUT_QUIET ERROR_QUIET)
if(NOT code EQUAL 0)
  message("cmake-test-skipped: ${SOURCE_DIR} is not a git checkout")
  return()
endif()
# A clone names the remote's branches origin/NAME; FetchContent asks the remote, where it is NAME.
foreach(ref IN ITEMS "${tag}" "origin/${tag}")
  execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} rev-parse --verify --quiet "${ref}^{commit}"
                  RESULT_VARIABLE code OUTPUT_VARIABLE commit ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(code EQUAL 0)
    message(STATUS "README.md's GIT_TAG ${tag} is ${ref}, commit ${commit}")
    return()
  endif()
endforeach()
message(FATAL_ERROR "README.md's FetchContent recipe names GIT_TAG ${tag}, which this repository "
                    "does not hold (no such branch, tag or commit)")
