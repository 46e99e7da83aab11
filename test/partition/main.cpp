// Partition tests: redis-server processes in their own network namespaces, cut off from the client
// by taking links down. Building namespaces needs root; without it the run is skipped: exit status
// 77, which ctest reports as "Not Run (skipped)" (SKIP_RETURN_CODE).
#define BOOST_TEST_MODULE redlock_partition_tests
#define BOOST_TEST_NO_MAIN
#include "support/netns.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <string>

int main(int argc, char* argv[]) {
  std::string reason;
  if (!redlock::test::netns::permitted(reason)) {
    for (char& c : reason) {
      if (c == '\n') c = ' ';  // one line, whatever `ip` printed
    }
    std::printf("partition_tests: skipped, cannot build network namespaces: %s\n", reason.c_str());
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
