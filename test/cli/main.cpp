// Tests of the redlock command-line tool: its pure parsing and messages, and the tool itself run
// against redis-server processes of its own.
#define BOOST_TEST_MODULE redlock_cli_tests
#include <boost/test/unit_test.hpp>
