// Exponential backoff with full jitter.

#include "backoff.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <random>

using namespace std::chrono_literals;
using redlock::detail::backoff;

BOOST_AUTO_TEST_SUITE(backoff_policy)

BOOST_AUTO_TEST_CASE(ceiling_grows_by_the_multiplier_up_to_the_maximum_and_resets) {
  backoff b({10ms, 100ms, 2.0});
  std::mt19937 generator(42);
  const std::chrono::milliseconds expected[] = {10ms, 20ms, 40ms, 80ms, 100ms, 100ms};
  for (auto ceiling : expected) {
    BOOST_TEST(b.ceiling().count() == ceiling.count());
    const auto delay = b.next(generator);
    BOOST_TEST(delay.count() >= 0);
    BOOST_TEST(delay.count() <= ceiling.count());
  }
  b.reset();
  BOOST_TEST(b.ceiling().count() == 10);
}

BOOST_AUTO_TEST_CASE(delays_are_spread_over_the_whole_range) {
  backoff b({1000ms, 1000ms, 2.0});
  std::mt19937 generator(7);
  int low = 0;
  int high = 0;
  for (int i = 0; i < 2000; ++i) {
    const auto delay = b.next(generator).count();
    low += delay < 250 ? 1 : 0;
    high += delay > 750 ? 1 : 0;
  }
  // Uniform on [0, 1000]: about 500 in each outer quarter; the bounds are very generous.
  BOOST_TEST(low > 350);
  BOOST_TEST(high > 350);
}

BOOST_AUTO_TEST_CASE(nonsense_policies_are_made_safe) {
  std::mt19937 generator(1);
  backoff shrinking({100ms, 50ms, 0.5});  // max below initial, multiplier below one
  for (int i = 0; i < 5; ++i) {
    BOOST_TEST(shrinking.ceiling().count() == 100);
    BOOST_TEST(shrinking.next(generator).count() <= 100);
  }
  backoff negative({-5ms, -1ms, 2.0});
  BOOST_TEST(negative.next(generator).count() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
