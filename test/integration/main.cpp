// Integration tests: real redis-server processes started by the fixture on free loopback ports.
#define BOOST_TEST_MODULE redlock_integration_tests
#include <boost/test/unit_test.hpp>
