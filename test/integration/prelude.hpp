#ifndef REDLOCK_TEST_INTEGRATION_PRELUDE_HPP
#define REDLOCK_TEST_INTEGRATION_PRELUDE_HPP

// The names the integration tests use unqualified, declared once: each name here was declared by
// at least 12 of the test files. A file still declares the names that only it, or a few files,
// use.
//
// Only using-declarations, the chrono literals and a namespace alias: no definitions, so nothing
// that could differ between the test files. They are in the unnamed namespace, where each file had
// them, so that name lookup in the files is what it was. Names that are also suite names (renewal,
// fake_server, chaos_proxy) stay out: BOOST_AUTO_TEST_SUITE(x) opens a namespace x at global
// scope, and an unqualified x would then be ambiguous.

#include "redlock/error.hpp"
#include "support/async_test.hpp"
#include "support/client_options.hpp"
#include "support/inspector.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using redlock::error;
using redlock::test::eventually;
using redlock::test::fast_client_options;
using redlock::test::inspector;
using redlock::test::lock_for;
using redlock::test::ms_since;
using redlock::test::redis_fleet;
using redlock::test::run_async;
using redlock::test::sleep_for;
using redlock::test::sync_client;
using redlock::test::tuple_awaitable;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

}  // namespace

#endif  // REDLOCK_TEST_INTEGRATION_PRELUDE_HPP
