# Precompiled headers, for the repository's own test runs (scripts/test.sh turns them on). Nearly
# every file here includes the same Boost.Asio, Boost.System, fmt and standard headers, and reading
# them is about a third of the time g++ spends on a file (more with -g1); a target compiles them
# once instead. Only third-party and standard headers are precompiled: a change to the library's
# own headers never rebuilds one.
#
# Off by default: a build without them checks that every file includes what it uses, and g++ 12
# reports some of its -Warray-bounds false positives inside precompiled standard headers that it
# suppresses in ordinary ones, which with REDLOCK_WERROR would fail an optimized build for nothing.
# The sources here avoid the constructs that trigger them (see src/resp/parser.cpp).
option(REDLOCK_PRECOMPILED_HEADERS "Precompile the third-party headers of the larger targets" OFF)

set(redlock_precompiled_common
  <algorithm> <array> <atomic> <chrono> <cstddef> <cstdint> <exception> <functional> <memory>
  <optional> <span> <string> <string_view> <tuple> <type_traits> <utility> <variant> <vector>
  <boost/asio/any_io_executor.hpp> <boost/asio/as_tuple.hpp> <boost/asio/async_result.hpp>
  <boost/asio/awaitable.hpp> <boost/asio/bind_cancellation_slot.hpp>
  <boost/asio/cancellation_signal.hpp> <boost/asio/co_spawn.hpp> <boost/asio/detached.hpp>
  <boost/asio/error.hpp> <boost/asio/io_context.hpp> <boost/asio/ip/tcp.hpp>
  <boost/asio/post.hpp> <boost/asio/steady_timer.hpp> <boost/asio/use_awaitable.hpp>
  <boost/system/error_code.hpp> <boost/system/system_error.hpp> <fmt/format.h>)

# redlock_precompile_headers(<target> [TESTS]): the common set for <target>; TESTS adds
# Boost.Test, whose main file (the one defining BOOST_TEST_MODULE before including it) must be
# marked SKIP_PRECOMPILE_HEADERS.
function(redlock_precompile_headers target)
  if(NOT REDLOCK_PRECOMPILED_HEADERS)
    return()
  endif()
  set(headers ${redlock_precompiled_common})
  if("TESTS" IN_LIST ARGN)
    list(APPEND headers <boost/test/unit_test.hpp>)
  endif()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()
