# The API reference, generated from the public headers, and the guide of docs/, as one HTML site:
#   cmake --build BUILD --target docs      ->  BUILD/docs/html/index.html
# Doxygen (Debian's doxygen; scripts/bootstrap.sh --docs installs it) is needed only for this
# target; without it the target says so and fails, and everything else builds as before. Every
# warning fails the target (docs/Doxyfile.in): an undocumented public name, a broken reference.
find_package(Doxygen 1.9)
if(NOT DOXYGEN_FOUND)
  add_custom_target(docs
    COMMAND ${CMAKE_COMMAND} -E echo
            "docs: Doxygen was not found; install it (scripts/bootstrap.sh --docs) and reconfigure"
    COMMAND ${CMAKE_COMMAND} -E false
    VERBATIM)
  return()
endif()

set(REDLOCK_DOCS_OUTPUT ${PROJECT_BINARY_DIR}/docs)
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${PROJECT_BINARY_DIR}/Doxyfile @ONLY)
add_custom_target(docs
  COMMAND Doxygen::doxygen ${PROJECT_BINARY_DIR}/Doxyfile
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  COMMENT "API reference and guide: ${REDLOCK_DOCS_OUTPUT}/html/index.html"
  VERBATIM)
