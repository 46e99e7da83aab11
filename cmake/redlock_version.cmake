# Sets REDLOCK_VERSION (major.minor.patch) for project() from include/redlock/version.hpp, where
# the version is written once. Included before project(), so it finds the header from its own
# place. Configuring fails when the header's three numbers and its string disagree.
function(redlock_read_version header)
  file(READ ${header} text)
  set(numbers "")
  foreach(part MAJOR MINOR PATCH)
    if(NOT text MATCHES "\n#define REDLOCK_VERSION_${part} +([0-9]+)\n")
      message(FATAL_ERROR "${header}: no REDLOCK_VERSION_${part} number")
    endif()
    list(APPEND numbers ${CMAKE_MATCH_1})
  endforeach()
  list(JOIN numbers "." version)

  set(string_value "")
  if(text MATCHES "\n#define REDLOCK_VERSION_STRING +\"([^\"\n]*)\"\n")
    set(string_value ${CMAKE_MATCH_1})
  endif()
  if(NOT string_value STREQUAL version)
    message(FATAL_ERROR "${header}: REDLOCK_VERSION_STRING is \"${string_value}\" but the "
                        "numbers say ${version}")
  endif()
  set(REDLOCK_VERSION ${version} PARENT_SCOPE)
endfunction()

cmake_path(SET redlock_version_header NORMALIZE
           ${CMAKE_CURRENT_LIST_DIR}/../include/redlock/version.hpp)
redlock_read_version(${redlock_version_header})
