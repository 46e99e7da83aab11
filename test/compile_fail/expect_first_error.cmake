# Compiles one source that must not compile, and passes when the compiler's first error contains
# EXPECTED. Run by ctest as `cmake -P`, with
#   COMPILER   the C++ compiler
#   FLAGS      its arguments before the source, separated by '|'
#   SOURCE     the source file
#   EXPECTED   text the first error line must contain
# With EXPECTED empty, the source must compile instead.

string(REPLACE "|" ";" flags "${FLAGS}")
execute_process(
  COMMAND ${COMPILER} ${flags} ${SOURCE}
  RESULT_VARIABLE status
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output)

if(EXPECTED STREQUAL "")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "expected ${SOURCE} to compile; the compiler said:\n${output}")
  endif()
  return()
endif()

if(status EQUAL 0)
  message(FATAL_ERROR "expected ${SOURCE} to fail to compile, but it compiled")
endif()
string(REGEX MATCH "[^\n]*error: [^\n]*" first_error "${output}")
string(FIND "${first_error}" "${EXPECTED}" at)
if(at EQUAL -1)
  string(SUBSTRING "${output}" 0 4000 head)
  message(FATAL_ERROR
          "the first error is not the expected one\n  expected it to contain: ${EXPECTED}\n"
          "  first error: ${first_error}\ncompiler output (start):\n${head}")
endif()
message(STATUS "first error: ${first_error}")
