# Runs the README example against a node where nothing listens and checks that it fails the way the
# README says: exit status 1 and one line on stderr naming the lock and the node's answer.
set(ENV{REDLOCK_NODES} "redis://127.0.0.1:1")
execute_process(COMMAND ${EXAMPLE} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 30)
if(NOT status EQUAL 1)
  message(FATAL_ERROR "expected exit status 1, got ${status}; stderr: ${err}")
endif()
foreach(part "redlock: \"order:42\" not acquired" "127.0.0.1:1 failed" "Connection refused"
             "gave up waiting for the lock")
  if(NOT err MATCHES "${part}")
    message(FATAL_ERROR "stderr lacks \"${part}\": ${err}")
  endif()
endforeach()
if(err MATCHES "terminate called")
  message(FATAL_ERROR "the example ended in std::terminate: ${err}")
endif()
message(STATUS "as the README says: ${err}")
