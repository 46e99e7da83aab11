// The semaphore's nemesis soak: 16 contenders (4 clients x 4 coroutines) take permits of one
// 3-permit semaphore on five nodes behind chaos proxies, while a nemesis stops servers, drops,
// resets, stalls and delays their traffic. Judged by an occupancy witness (never more than 3
// sections at once whose lease is valid), the generalised checker over the recorded history (at
// most 3 holders of the semaphore, at most one per slot), and no slot key left at the end.

#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "redlock/redlock.hpp"
#include "support/async_test.hpp"
#include "support/chaos_proxy.hpp"
#include "support/client_options.hpp"
#include "support/history.hpp"
#include "support/inspector.hpp"
#include "support/printing.hpp"
#include "support/proxied_fleet.hpp"
#include "support/soak_length.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace rt = redlock::test;
using redlock::test::mono_now;
using redlock::test::to_mono_ns;

constexpr std::size_t permits = 3;
constexpr std::size_t node_count = 5;
constexpr std::size_t client_count = 4;
constexpr std::size_t contenders_per_client = 4;
const std::string semaphore_name = "soak-permits";

// Sections a contender is in: entered after its acquire completed with a held lease, left before
// its release is sent, or as soon as it sees the lease is no longer held (a signalled loss, or its
// validity ran out). At every entry it counts the sections whose lease is valid right now: only
// they are believed to hold a permit, and the count only rises at an entry (a lease that stops
// being held never becomes held again), so checking at the entries checks every moment.
class occupancy_witness {
 public:
  explicit occupancy_witness(std::size_t limit) : limit_(limit) {}

  void enter(const redlock::lease& held, const std::string& who) {
    inside_.push_back({&held, who});
    most_inside_ = std::max(most_inside_, inside_.size());
    std::size_t valid = 0;
    std::string holders;
    for (const auto& section : inside_) {
      if (!section.held->held()) continue;
      ++valid;
      holders += fmt::format("{}{} on \"{}\" (valid for {} ms more)", holders.empty() ? "" : ", ",
                             section.who, section.held->resource(),
                             rt::ms_between(steady_clock::now(), section.held->valid_until()));
    }
    most_valid_ = std::max(most_valid_, valid);
    if (valid > limit_ && violations_.size() < 10)
      violations_.push_back(fmt::format("{} valid holders at {}: {}", valid, mono_now(), holders));
  }

  void leave(const redlock::lease& held) {
    inside_.erase(std::find_if(inside_.begin(), inside_.end(),
                               [&](const section& s) { return s.held == &held; }));
  }

  std::size_t most_valid() const noexcept { return most_valid_; }
  std::size_t most_inside() const noexcept { return most_inside_; }
  const std::vector<std::string>& violations() const noexcept { return violations_; }

 private:
  struct section {
    const redlock::lease* held;
    std::string who;
  };
  std::size_t limit_;
  std::vector<section> inside_;
  std::size_t most_valid_ = 0;
  std::size_t most_inside_ = 0;  // whatever the leases said: a loss is seen within a slice
  std::vector<std::string> violations_;
};

// What the contenders share; all of them run on one io_context thread.
struct soak_run {
  rt::history log;
  occupancy_witness witness{permits};
  bool stop = false;
  std::size_t running = 0;
  std::uint64_t acquisitions = 0;
  std::uint64_t renewed = 0;                      // sections whose lease was extended by renewal
  std::uint64_t ended_by_loss = 0;                // sections that found their lease no longer held
  std::uint64_t with_permit_runs = 0;             // bodies run by with_permit
  std::map<std::string, std::uint64_t> failures;  // "acquire: ..." -> count
};

// One section, entered on construction and left on destruction (also when with_permit cancels
// the body on a loss). Records the hold's end: a release at the end of the section, or a loss.
class section_guard {
 public:
  section_guard(soak_run& run, const redlock::lease& held, std::string who)
      : run_(run), held_(held), who_(std::move(who)) {
    run_.witness.enter(held_, who_);
  }
  ~section_guard() {
    run_.witness.leave(held_);
    if (!finished_) record(rt::op_kind::lost);
  }
  section_guard(const section_guard&) = delete;
  section_guard& operator=(const section_guard&) = delete;

  // The section ran its course; the holder stops relying on the permit now.
  void finish(rt::op_kind how) {
    finished_ = true;
    record(how);
  }

 private:
  void record(rt::op_kind how) {
    const auto now = mono_now();
    run_.log.record(
        {who_, held_.resource(), held_.token(), how, rt::op_result::ok, now, now, 0, 0});
  }

  soak_run& run_;
  const redlock::lease& held_;
  std::string who_;
  bool finished_ = false;
};

// The work under a permit: `hold` long, in slices of at most 5 ms, each of which first looks at
// the lease. Renewals seen are recorded (the checker moves the hold's end with them); a lease no
// longer held ends the section. Returns how the section ended.
asio::awaitable<rt::op_kind> work(soak_run& run, const redlock::lease& held, const std::string& who,
                                  milliseconds hold) {
  const auto until = steady_clock::now() + hold;
  auto validity = held.valid_until();
  bool counted_renewal = false;
  while (steady_clock::now() < until) {
    if (!held.held()) {
      ++run.ended_by_loss;
      co_return rt::op_kind::lost;
    }
    if (held.valid_until() != validity) {
      // Confirmed renewals lengthen it; an extension sent but unconfirmed can only shorten it.
      const bool longer = held.valid_until() > validity;
      validity = held.valid_until();
      const auto now = mono_now();
      run.log.record({who, held.resource(), held.token(), rt::op_kind::extend,
                      longer ? rt::op_result::ok : rt::op_result::unknown, now, now,
                      to_mono_ns(validity), 0});
      if (longer && !counted_renewal) {
        counted_renewal = true;
        ++run.renewed;
      }
    }
    co_await sleep_for(std::min<steady_clock::duration>(5ms, until - steady_clock::now()));
  }
  co_return rt::op_kind::release;
}

rt::event acquire_event(const std::string& who, const redlock::lease& held, rt::mono_ns invoke,
                        milliseconds ttl) {
  return {who,
          held.resource(),
          held.token(),
          rt::op_kind::acquire,
          rt::op_result::ok,
          invoke,
          mono_now(),
          to_mono_ns(held.valid_until()),
          std::chrono::duration_cast<std::chrono::nanoseconds>(ttl).count()};
}

// Mostly short sections, one in eight across the renewal at half of the TTL.
milliseconds pick_hold(std::minstd_rand& random) {
  if (std::uniform_int_distribution<int>(0, 7)(random) == 0)
    return milliseconds(std::uniform_int_distribution<int>(300, 700)(random));
  return milliseconds(std::uniform_int_distribution<int>(5, 60)(random));
}

// Acquire, work, release by hand.
asio::awaitable<void> manual_contender(soak_run& run, redlock::semaphore permits, std::string who) {
  ++run.running;
  std::minstd_rand random(std::random_device{}());
  while (!run.stop) {
    const auto invoke = mono_now();
    auto [ec, held] = co_await permits.async_acquire(tuple_awaitable);
    if (ec) {
      run.log.record(
          {who, permits.name(), "", rt::op_kind::acquire,
           ec == asio::error::operation_aborted ? rt::op_result::unknown : rt::op_result::failed,
           invoke, mono_now(), 0,
           std::chrono::duration_cast<std::chrono::nanoseconds>(permits.options().ttl).count()});
      ++run.failures[fmt::format("acquire: {}", ec.message())];
      co_await sleep_for(5ms);
      continue;
    }
    run.log.record(acquire_event(who, held, invoke, permits.options().ttl));
    ++run.acquisitions;
    if (held.held()) {
      section_guard section(run, held, who);
      const auto how = co_await work(run, held, who, pick_hold(random));
      if (how == rt::op_kind::release) section.finish(rt::op_kind::release);
    }
    auto [release_ec] = co_await held.async_release(tuple_awaitable);
    if (release_ec) ++run.failures[fmt::format("release: {}", release_ec.message())];
  }
  --run.running;
}

// The same through with_permit, which cancels the body when the lease is lost.
asio::awaitable<void> with_permit_contender(soak_run& run, redlock::semaphore permits,
                                            std::string who) {
  ++run.running;
  std::minstd_rand random(std::random_device{}());
  while (!run.stop) {
    const auto invoke = mono_now();
    bool entered = false;
    boost::system::error_code failure;
    try {
      co_await redlock::with_permit(permits, [&](redlock::lease& held) -> asio::awaitable<void> {
        entered = true;
        run.log.record(acquire_event(who, held, invoke, permits.options().ttl));
        ++run.acquisitions;
        ++run.with_permit_runs;
        if (!held.held()) co_return;
        section_guard section(run, held, who);
        const auto how = co_await work(run, held, who, pick_hold(random));
        if (how == rt::op_kind::release) section.finish(rt::op_kind::release);
      });
    } catch (const boost::system::system_error& e) {
      failure = e.code();
    }
    if (!failure) continue;
    if (entered) {
      ++run.failures[fmt::format("with_permit: {}", failure.message())];
      continue;
    }
    run.log.record(
        {who, permits.name(), "", rt::op_kind::acquire,
         failure == asio::error::operation_aborted ? rt::op_result::unknown : rt::op_result::failed,
         invoke, mono_now(), 0,
         std::chrono::duration_cast<std::chrono::nanoseconds>(permits.options().ttl).count()});
    ++run.failures[fmt::format("acquire: {}", failure.message())];
    co_await sleep_for(5ms);
  }
  --run.running;
}

enum class semaphore_fault { stop, blackhole, reset, delay, stall };
constexpr std::array<std::string_view, 5> semaphore_fault_names = {"stop", "blackhole", "reset",
                                                                   "delay", "stall"};

// Strikes every 0.5 to 2 s, for 0.3 to 1.5 s: one or two nodes, or one time in five three of them
// (no permit can be taken or kept until they are back). Every fault is undone before it returns.
asio::awaitable<void> nemesis(rt::proxied_fleet& nodes, steady_clock::time_point end,
                              std::array<int, semaphore_fault_names.size()>& counts,
                              int& on_majority) {
  std::minstd_rand random(std::random_device{}());
  const auto pick = [&](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(random);
  };
  while (steady_clock::now() + 2s < end) {
    co_await sleep_for(milliseconds(pick(500, 2000)));
    const bool majority = pick(0, 4) == 0;
    std::vector<std::size_t> victims(node_count);
    std::iota(victims.begin(), victims.end(), std::size_t{0});
    std::shuffle(victims.begin(), victims.end(), random);
    victims.resize(majority ? 3 : static_cast<std::size_t>(pick(1, 2)));
    const auto what =
        static_cast<semaphore_fault>(pick(0, static_cast<int>(semaphore_fault_names.size()) - 1));
    for (const auto v : victims) {
      auto& proxy = *nodes.proxies[v];
      switch (what) {
        case semaphore_fault::stop:
          nodes.fleet[v].pause();
          break;
        case semaphore_fault::blackhole:
          proxy.set_blackhole(true);
          break;
        case semaphore_fault::reset:
          proxy.set_reset_peer(true);
          break;
        case semaphore_fault::delay: {
          const milliseconds delay(pick(60, 600));  // beyond node_timeout, sometimes the TTL
          proxy.set_latency(delay, delay / 4);
          break;
        }
        case semaphore_fault::stall:
          proxy.set_timeout(milliseconds(pick(100, 400)));
          break;
      }
    }
    co_await sleep_for(milliseconds(pick(300, 1500)));
    for (const auto v : victims) {
      if (what == semaphore_fault::stop) nodes.fleet[v].resume();
      nodes.proxies[v]->clear();
    }
    ++counts[static_cast<std::size_t>(what)];
    on_majority += majority ? 1 : 0;
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(semaphore_soak)

// 16 contenders on a 3-permit semaphore (TTL 500 ms, renewed; sections of 5-60 ms, one in eight
// of 300-700 ms, across the renewal), half by hand and half through with_permit, for 10 s
// (REDLOCK_SOAK_SECONDS) under the nemesis above. Checked: the occupancy witness never saw more
// than 3 valid holders and saw 3; the checker finds no more than 3 holders of the semaphore and no
// two of one slot; no slot key is left once the contenders stopped and one TTL passed.
BOOST_AUTO_TEST_CASE(sixteen_contenders_three_permits_under_faults) {
  const milliseconds ttl = 500ms;
  const auto duration = redlock::test::soak_length(10s);
  rt::proxied_fleet nodes(node_count);
  soak_run run;
  std::array<int, semaphore_fault_names.size()> fault_counts{};
  int on_majority = 0;
  rt::run_async(
      [&](asio::io_context& io) -> asio::awaitable<void> {
        redlock::lock_options options = rt::lock_for(ttl);
        options.wait = 3s;
        std::vector<std::unique_ptr<redlock::client>> clients;
        for (std::size_t c = 0; c < client_count; ++c) {
          // A node_timeout of a tenth of the TTL, as in production.
          clients.push_back(std::make_unique<redlock::client>(io.get_executor(), nodes.configs(),
                                                              fast_client_options(50ms)));
          BOOST_TEST_REQUIRE(co_await nodes.connect(*clients.back()), "client " << c);
        }
        const auto end = steady_clock::now() + duration;
        for (std::size_t c = 0; c < client_count; ++c) {
          for (std::size_t i = 0; i < contenders_per_client; ++i) {
            redlock::semaphore permits_of_c(*clients[c], semaphore_name, permits, options);
            std::string who = fmt::format("c{}/{}", c, i);
            if (i % 2 == 0) {
              asio::co_spawn(io, manual_contender(run, permits_of_c, std::move(who)),
                             asio::detached);
            } else {
              asio::co_spawn(io, with_permit_contender(run, permits_of_c, std::move(who)),
                             asio::detached);
            }
          }
        }
        co_await nemesis(nodes, end, fault_counts, on_majority);
        const auto left = end - steady_clock::now();
        if (left > 0s) co_await sleep_for(left);
        run.stop = true;
        // The last attempts end within their 3 s wait, and the last sections within 700 ms.
        BOOST_TEST(co_await eventually([&] { return run.running == 0; }, 10s),
                   run.running << " contenders still running");
        for (auto& locks : clients)
          co_await locks->async_shutdown(tuple_awaitable);
      },
      duration + 60s);

  // Released everywhere, or expired where a release could not reach: nothing after one TTL more.
  rt::inspector audit(nodes.fleet);
  const auto slot_keys_left = [&] {
    std::size_t left = 0;
    for (std::size_t s = 0; s < permits; ++s)
      left += audit.present(redlock::detail::semaphore_slot_key(semaphore_name, s));
    return left;
  };
  const bool no_key_left = rt::eventually_blocking([&] { return slot_keys_left() == 0; }, ttl + 2s);

  const auto events = run.log.events();
  const auto per_semaphore = rt::check_at_most(events, rt::semaphore_of_slot, permits);
  const auto per_slot = rt::check_mutual_exclusion(events);
  std::string schedule;
  for (std::size_t f = 0; f < semaphore_fault_names.size(); ++f)
    schedule +=
        fmt::format("{}{} {}", f == 0 ? "" : ", ", semaphore_fault_names[f], fault_counts[f]);
  std::string failures;
  for (const auto& [what, count] : run.failures)
    failures += fmt::format("; {} x{}", what, count);
  BOOST_TEST_MESSAGE(fmt::format(
      "semaphore soak {} s: faults {} ({} on a majority), {} acquisitions ({} through "
      "with_permit), {} sections renewed, {} ended by a loss, at most {} valid holders at once "
      "({} sections open){}\n  at most {}: {}\n  per slot: {}",
      duration.count(), schedule, on_majority, run.acquisitions, run.with_permit_runs, run.renewed,
      run.ended_by_loss, run.witness.most_valid(), run.witness.most_inside(), failures, permits,
      per_semaphore.describe(), per_slot.describe()));

  std::string witnessed;
  for (const auto& v : run.witness.violations())
    witnessed += "\n  " + v;
  BOOST_TEST(run.witness.violations().empty(), "occupancy over " << permits << ":" << witnessed);
  BOOST_TEST(run.witness.most_valid() <= permits);
  BOOST_TEST(run.witness.most_valid() == permits, "never " << permits << " holders at once");
  BOOST_TEST(per_semaphore.ok(), per_semaphore.describe());
  BOOST_TEST(per_slot.ok(), per_slot.describe());
  BOOST_TEST(no_key_left, slot_keys_left() << " slot keys left on the nodes");
  BOOST_TEST(run.acquisitions > 100u);
  BOOST_TEST(run.with_permit_runs > 0u);
}

BOOST_AUTO_TEST_SUITE_END()
