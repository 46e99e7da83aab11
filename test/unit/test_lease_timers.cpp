// The leases' timers on one timer of the clock: each entry is called once, in time order, at the
// time it was last armed for, never once disarmed, and nothing is called after the set is gone.
// The times are a few milliseconds ahead: the verdicts are about order and counts, not timing.

#include "lock/lease_timers.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using redlock::detail::lease_timers;
using redlock::detail::lock_clock;

class recording_entry final : public lease_timers::entry {
 public:
  recording_entry(std::string name, std::vector<std::string>& calls)
      : name_(std::move(name)), calls_(calls) {}
  std::function<void()> then;  // run inside due(), after the call is recorded

 private:
  void due() override {
    calls_.push_back(name_);
    if (then) then();
  }
  std::string name_;
  std::vector<std::string>& calls_;
};

BOOST_AUTO_TEST_SUITE(lease_timer_set)

BOOST_AUTO_TEST_CASE(entries_are_called_once_in_time_order_at_their_last_arming) {
  boost::asio::io_context io;
  std::vector<std::string> calls;
  lease_timers timers(io.get_executor());
  recording_entry a("a", calls), b("b", calls), c("c", calls), d("d", calls);
  const auto now = lock_clock::now();
  timers.arm(c, now + 30ms);
  timers.arm(a, now + 10ms);
  timers.arm(b, now + 20ms);
  timers.arm(d, now + 5ms);
  timers.arm(a, now + 40ms);  // armed again: later
  timers.disarm(d);           // the earliest, which the clock's timer waits for: never called
  BOOST_TEST(timers.armed() == 3u);
  io.run();
  BOOST_TEST((calls == std::vector<std::string>{"b", "c", "a"}));
  BOOST_TEST(!a.armed());
  BOOST_TEST(timers.armed() == 0u);
}

BOOST_AUTO_TEST_CASE(an_entry_armed_earlier_than_the_wait_is_called_first) {
  boost::asio::io_context io;
  std::vector<std::string> calls;
  lease_timers timers(io.get_executor());
  recording_entry late("late", calls), early("early", calls);
  const auto now = lock_clock::now();
  timers.arm(late, now + 30ms);
  boost::asio::post(io, [&] { timers.arm(early, lock_clock::now() + 1ms); });
  io.run();
  BOOST_TEST((calls == std::vector<std::string>{"early", "late"}));
}

// A due() that arms entries again (a renewal arming the lease's next timer) or arms another: each
// is called at its new time, one call per arming, and the set keeps waiting.
BOOST_AUTO_TEST_CASE(entries_armed_while_called_are_called_again) {
  boost::asio::io_context io;
  std::vector<std::string> calls;
  lease_timers timers(io.get_executor());
  recording_entry a("a", calls), b("b", calls), past("past", calls);
  int rounds = 0;
  a.then = [&] {
    if (++rounds < 3) timers.arm(a, lock_clock::now() + 2ms);
    if (rounds == 1) timers.arm(past, lock_clock::now() - 1s);  // already due
  };
  timers.arm(a, lock_clock::now() + 1ms);
  timers.arm(b, lock_clock::now() + 50ms);
  io.run();
  BOOST_TEST((calls == std::vector<std::string>{"a", "past", "a", "a", "b"}));
}

// Many entries due at one time are called in one turn of the executor, before anything posted
// meanwhile: what lets the renewals of one tick go out together.
BOOST_AUTO_TEST_CASE(entries_due_together_are_called_in_one_turn) {
  boost::asio::io_context io;
  std::vector<std::string> calls;
  lease_timers timers(io.get_executor());
  std::vector<std::unique_ptr<recording_entry>> entries;
  const auto at = lock_clock::now() + 5ms;
  for (int i = 0; i < 100; ++i) {
    entries.push_back(std::make_unique<recording_entry>("e", calls));
    entries.back()->then = [&] {
      if (calls.size() == 1) boost::asio::post(io, [&] { calls.push_back("posted"); });
    };
    timers.arm(*entries.back(), at);
  }
  io.run();
  BOOST_TEST_REQUIRE(calls.size() == 101u);
  BOOST_TEST(calls.back() == "posted");
}

// Entries armed mostly in the order of their times (renewals half a TTL ahead) and some out of
// it, some disarmed and some armed again while others are called: every entry still armed is
// called once, and the calls come in the order of the times they were last armed for.
BOOST_AUTO_TEST_CASE(entries_in_and_out_of_order_are_called_in_time_order) {
  boost::asio::io_context io;
  std::vector<std::string> calls;  // the entries' indices, as called
  lease_timers timers(io.get_executor());
  constexpr std::size_t count = 120;
  std::vector<std::unique_ptr<recording_entry>> entries;
  std::vector<int> at(count);  // the time each entry is last armed for, in 0.1 ms from `now`
  const auto now = lock_clock::now();
  const auto arm = [&](std::size_t i, int tenths) {
    at[i] = tenths;
    timers.arm(*entries[i], now + std::chrono::microseconds(100 * tenths));
  };
  for (std::size_t i = 0; i < count; ++i) {
    entries.push_back(std::make_unique<recording_entry>(std::to_string(i), calls));
    // Every third earlier than those armed just before it.
    const int i_ = static_cast<int>(i);
    arm(i, i % 3 == 2 ? 10 + (i_ * 37) % 200 : 20 + 2 * i_);
  }
  for (std::size_t i = 0; i < count; i += 10)
    timers.disarm(*entries[i]);
  // The first entry called arms others again, later than all of them.
  std::size_t first = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (i % 10 != 0 && at[i] < at[first]) first = i;
  }
  bool armed_again = false;
  entries[first]->then = [&] {
    if (std::exchange(armed_again, true)) return;
    for (std::size_t i = 1; i < count; i += 7) {
      if (i % 10 != 0 && i != first) arm(i, 300 + static_cast<int>(i));
    }
  };
  io.run();
  std::vector<int> called_at;
  std::vector<bool> called(count, false);
  for (const auto& name : calls) {
    const auto i = static_cast<std::size_t>(std::stoi(name));
    BOOST_TEST(!called[i], "entry " << i << " called twice");
    called[i] = true;
    called_at.push_back(at[i]);
  }
  for (std::size_t i = 0; i < count; ++i)
    BOOST_TEST(called[i] == (i % 10 != 0), "entry " << i);
  BOOST_TEST(std::is_sorted(called_at.begin(), called_at.end()));
  BOOST_TEST(timers.armed() == 0u);
}

// The last entry disarmed: nothing is waited for, so the io_context runs out of work at once
// instead of at the entry's time.
BOOST_AUTO_TEST_CASE(disarming_the_last_entry_leaves_no_wait) {
  boost::asio::io_context io;
  std::vector<std::string> calls;
  lease_timers timers(io.get_executor());
  recording_entry a("a", calls), b("b", calls);
  timers.arm(a, lock_clock::now() + 1h);
  timers.arm(b, lock_clock::now() + 2h);
  timers.disarm(a);
  timers.disarm(b);
  const auto start = lock_clock::now();
  io.run();
  BOOST_TEST((lock_clock::now() - start < 10min));
  BOOST_TEST(calls.empty());
}

// The clock's timer waits for the earliest entry armed; once that one is disarmed, the wait may
// end early. It then calls nothing before its time, and every entry still armed is called once,
// at its time, in order, also entries armed and disarmed many times meanwhile.
BOOST_AUTO_TEST_CASE(a_wait_for_a_disarmed_entry_calls_nothing_early) {
  boost::asio::io_context io;
  std::vector<std::string> calls;
  std::vector<bool> on_time;
  lease_timers timers(io.get_executor());
  recording_entry gone("gone", calls), first("first", calls), second("second", calls);
  const auto now = lock_clock::now();
  const auto first_at = now + 10ms, second_at = now + 20ms;
  first.then = [&] { on_time.push_back(lock_clock::now() >= first_at); };
  second.then = [&] { on_time.push_back(lock_clock::now() >= second_at); };
  timers.arm(gone, now + 1ms);
  timers.arm(second, now + 5ms);
  timers.arm(first, first_at);
  for (int i = 0; i < 100; ++i) {
    timers.arm(second, now + std::chrono::milliseconds(30 + i));
    timers.disarm(second);
  }
  timers.arm(second, second_at);
  timers.disarm(gone);
  BOOST_TEST(timers.armed() == 2u);
  io.run();
  BOOST_TEST((calls == std::vector<std::string>{"first", "second"}));
  BOOST_TEST((on_time == std::vector<bool>{true, true}));
  BOOST_TEST(timers.armed() == 0u);
}

// The set destroyed with a wait pending (the client gone before its io_context): the wait
// completes without touching it.
BOOST_AUTO_TEST_CASE(a_wait_outliving_its_set_calls_nothing) {
  boost::asio::io_context io;
  std::vector<std::string> calls;
  {
    recording_entry a("a", calls);
    lease_timers timers(io.get_executor());
    timers.arm(a, lock_clock::now() + 1ms);
    timers.disarm(a);
  }
  io.run();
  BOOST_TEST(calls.empty());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
