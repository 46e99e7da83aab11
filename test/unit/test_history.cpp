// The mutual-exclusion checker over lock histories. It must find every real overlap (it is what
// the fault scenarios rely on to fail), and it must not blame a history that is only ambiguous.

#include "support/history.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {
namespace rt = redlock::test;
using namespace std::chrono_literals;

constexpr rt::mono_ns ms = 1'000'000;

rt::event acquired(std::string process, std::string token, rt::mono_ns invoke, rt::mono_ns complete,
                   rt::mono_ns valid_until) {
  return {std::move(process),
          "r",
          std::move(token),
          rt::op_kind::acquire,
          rt::op_result::ok,
          invoke,
          complete,
          valid_until,
          0};
}

rt::event acquire_unknown(std::string process, rt::mono_ns invoke, rt::mono_ns ttl) {
  return {std::move(process), "r", "", rt::op_kind::acquire, rt::op_result::unknown, invoke,
          invoke + 100 * ms,  0,   ttl};
}

rt::event released(std::string process, std::string token, rt::mono_ns invoke) {
  return {std::move(process),
          "r",
          std::move(token),
          rt::op_kind::release,
          rt::op_result::ok,
          invoke,
          invoke + ms,
          0,
          0};
}

rt::event extended(std::string process, std::string token, rt::mono_ns complete,
                   rt::mono_ns valid_until, rt::op_result result = rt::op_result::ok) {
  return {std::move(process),
          "r",
          std::move(token),
          rt::op_kind::extend,
          result,
          complete - ms,
          complete,
          valid_until,
          0};
}

rt::event lost(std::string process, std::string token, rt::mono_ns at) {
  return {std::move(process),
          "r",
          std::move(token),
          rt::op_kind::lost,
          rt::op_result::ok,
          at,
          at,
          0,
          0};
}

rt::event on(std::string resource, rt::event e) {
  e.resource = std::move(resource);
  return e;
}

// The same event as a reader's (a shared lease of a read-write lock).
rt::event reading(rt::event e) {
  e.shared = true;
  return e;
}

// The slot keys of a semaphore "{s}", as the library names them.
std::string slot(int i) {
  return "{s}:slot:" + std::to_string(i);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(history)

BOOST_AUTO_TEST_CASE(holds_one_after_another_are_fine) {
  const std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 100 * ms),
      released("a", "t1", 50 * ms),
      acquired("b", "t2", 10 * ms, 52 * ms, 150 * ms),  // waited for a's release
      released("b", "t2", 90 * ms),
  };
  const auto result = rt::check_mutual_exclusion(events);
  BOOST_TEST(result.ok(), result.describe());
  BOOST_TEST(result.holds.size() == 2u);
  BOOST_TEST(result.holds[0].end == 50 * ms);  // cut at the release call, not at validity
}

BOOST_AUTO_TEST_CASE(two_holders_at_once_are_a_violation) {
  const std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 100 * ms),
      acquired("b", "t2", 30 * ms, 32 * ms, 130 * ms),  // a never released and was still valid
      released("a", "t1", 60 * ms),
  };
  const auto result = rt::check_mutual_exclusion(events);
  BOOST_TEST(!result.ok());
  BOOST_REQUIRE(result.violations.size() == 1u);
  BOOST_TEST(result.violations[0].by == 28 * ms);
  BOOST_TEST(result.describe().find("both held \"r\" for 28.000 ms") != std::string::npos,
             result.describe());
}

BOOST_AUTO_TEST_CASE(an_extension_in_time_moves_the_end_and_exposes_a_rival) {
  std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 100 * ms),
      extended("a", "t1", 50 * ms, 200 * ms),
      acquired("b", "t2", 110 * ms, 120 * ms, 300 * ms),
  };
  auto result = rt::check_mutual_exclusion(events);
  BOOST_REQUIRE(result.violations.size() == 1u);
  BOOST_TEST(result.violations[0].by == 80 * ms);

  // The same extension confirmed after the validity ran out does not count: the rival is fine.
  events[1] = extended("a", "t1", 105 * ms, 200 * ms);
  result = rt::check_mutual_exclusion(events);
  BOOST_TEST(result.ok(), result.describe());

  // A failed extension never moves the end later.
  events[1] = extended("a", "t1", 50 * ms, 200 * ms, rt::op_result::failed);
  BOOST_TEST(rt::check_mutual_exclusion(events).ok());
}

// An extension that may have run shortens what its holder may believe, whatever its answer: the
// validity the client reported after it is where the hold ends, also when that is earlier.
BOOST_AUTO_TEST_CASE(an_extension_that_shortened_the_validity_ends_the_hold_earlier) {
  std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 300 * ms),
      extended("a", "t1", 50 * ms, 80 * ms, rt::op_result::failed),
      acquired("b", "t2", 90 * ms, 100 * ms, 300 * ms),
  };
  auto result = rt::check_mutual_exclusion(events);
  BOOST_TEST(result.ok(), result.describe());
  BOOST_TEST(result.holds[0].end == 80 * ms);

  // Confirmed, the shorter validity counts just the same.
  events[1] = extended("a", "t1", 50 * ms, 80 * ms);
  result = rt::check_mutual_exclusion(events);
  BOOST_TEST(result.ok(), result.describe());

  // A holder that kept believing its old validity overlaps the rival.
  events[1] = extended("a", "t1", 50 * ms, 300 * ms, rt::op_result::failed);
  result = rt::check_mutual_exclusion(events);
  BOOST_REQUIRE(result.violations.size() == 1u);
  BOOST_TEST(result.violations[0].by == 200 * ms);
}

BOOST_AUTO_TEST_CASE(a_signalled_loss_ends_the_hold) {
  const std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 100 * ms),
      lost("a", "t1", 40 * ms),
      acquired("b", "t2", 41 * ms, 45 * ms, 150 * ms),
  };
  BOOST_TEST(rt::check_mutual_exclusion(events).ok());
}

BOOST_AUTO_TEST_CASE(overlaps_within_epsilon_are_tolerated) {
  const std::vector<rt::event> events = {
      acquired("a", "t1", 0, 2 * ms, 100 * ms), released("a", "t1", 50 * ms),
      acquired("b", "t2", 40 * ms, 47 * ms, 150 * ms),  // 3 ms before a's release call
  };
  BOOST_TEST(rt::check_mutual_exclusion(events, 5ms).ok());
  BOOST_TEST(!rt::check_mutual_exclusion(events, 1ms).ok());
}

BOOST_AUTO_TEST_CASE(an_unknown_acquire_is_ambiguous_not_a_violation) {
  const std::vector<rt::event> events = {
      acquire_unknown("a", 0, 100 * ms),
      acquired("b", "t2", 20 * ms, 25 * ms, 120 * ms),
  };
  const auto result = rt::check_mutual_exclusion(events);
  BOOST_TEST(result.ok(), result.describe());
  BOOST_TEST(result.ambiguous.size() == 1u);
  BOOST_TEST(result.holds[0].maybe);
  BOOST_TEST(result.holds[0].end == 100 * ms);  // invoke + ttl
}

BOOST_AUTO_TEST_CASE(resources_are_checked_separately) {
  auto other = acquired("b", "t2", 10 * ms, 12 * ms, 90 * ms);
  other.resource = "s";
  const std::vector<rt::event> events = {acquired("a", "t1", 0, 2 * ms, 100 * ms), other};
  BOOST_TEST(rt::check_mutual_exclusion(events).ok());
}

BOOST_AUTO_TEST_CASE(histories_of_several_processes_merge_through_text) {
  rt::history first;
  rt::history second;
  first.record(acquired("p1/c0", "t1", 0, 2 * ms, 100 * ms));
  auto odd = acquired("p2 c1%~\n", "t2", 30 * ms, 32 * ms, 130 * ms);  // needs escaping
  odd.resource = "r";
  second.record(odd);
  std::stringstream files;
  first.write(files);
  second.write(files);
  const auto merged = rt::history::read_lines(files);
  BOOST_REQUIRE(merged.size() == 2u);
  BOOST_TEST(merged[1].process == "p2 c1%~\n");
  BOOST_TEST(merged[1].valid_until == 130 * ms);
  BOOST_TEST(!rt::check_mutual_exclusion(merged).ok());

  rt::event empty_token = released("p", "", 5);
  BOOST_TEST(rt::event::from_line(empty_token.to_line()).token.empty());
}

BOOST_AUTO_TEST_CASE(malformed_lines_are_refused_with_the_field_named) {
  auto expect_error = [](std::string_view line, std::string_view words) {
    try {
      (void)rt::event::from_line(line);
      BOOST_ERROR("accepted: " << line);
    } catch (const std::invalid_argument& e) {
      BOOST_TEST(std::string(e.what()).find(words) != std::string::npos, e.what());
    }
  };
  expect_error("lock-event/1 p r t acquire ok 1 2 3", "9 fields");
  expect_error("lock-event/1 p r t grab ok 1 2 3 4", "unknown kind 'grab'");
  expect_error("lock-event/1 p r t acquire ok x 2 3 4", "field invoke");
  expect_error("lock-event/1 p%4 r t acquire ok 1 2 3 4", "escape in field process");
}

// The generalised check: at most `limit` holders per group at any instant. For a semaphore the
// group is every slot of it; a holder is named with the slot it held.
BOOST_AUTO_TEST_CASE(three_holders_of_a_two_permit_semaphore_are_a_violation) {
  const std::vector<rt::event> events = {
      on(slot(0), acquired("a", "t1", 0, 2 * ms, 100 * ms)),
      on(slot(1), acquired("b", "t2", 10 * ms, 20 * ms, 120 * ms)),
      on(slot(0), acquired("c", "t3", 30 * ms, 40 * ms, 140 * ms)),  // over a's key: slot 0 twice
      on(slot(0), released("a", "t1", 70 * ms)),
  };
  const auto result = rt::check_at_most(events, rt::semaphore_of_slot, 2);
  BOOST_REQUIRE(result.violations.size() == 1u);
  const auto& v = result.violations[0];
  BOOST_TEST(v.group == "{s}");
  BOOST_TEST(v.limit == 2u);
  BOOST_REQUIRE(v.holders.size() == 3u);
  BOOST_TEST(v.holders[0].process == "a");
  BOOST_TEST(v.holders[2].process == "c");
  BOOST_TEST(v.from == 40 * ms);  // c's acquire completed
  BOOST_TEST(v.by == 30 * ms);    // until a's release call
  const std::string text = result.describe();
  BOOST_TEST(text.find("a [t1] on \"{s}:slot:0\", b [t2] on \"{s}:slot:1\" and c [t3] on "
                       "\"{s}:slot:0\" all held \"{s}\" at once (at most 2) for 30.000 ms from "
                       "+40.000 ms") != std::string::npos,
             text);

  // Two at once is what two permits allow; per slot, though, a and c broke mutual exclusion.
  BOOST_TEST(rt::check_at_most(events, rt::semaphore_of_slot, 3).ok());
  const auto per_slot = rt::check_mutual_exclusion(events);
  BOOST_REQUIRE(per_slot.violations.size() == 1u);
  BOOST_TEST(per_slot.violations[0].group == slot(0));
}

BOOST_AUTO_TEST_CASE(holders_within_the_limit_are_fine_however_they_interleave) {
  // Never more than two at once, although all four overlap some other.
  const std::vector<rt::event> events = {
      on(slot(0), acquired("a", "t1", 0, 0, 100 * ms)),
      on(slot(1), acquired("b", "t2", 0, 50 * ms, 150 * ms)),
      on(slot(0), acquired("c", "t3", 0, 100 * ms, 200 * ms)),
      on(slot(1), acquired("d", "t4", 0, 150 * ms, 250 * ms)),
  };
  const auto result = rt::check_at_most(events, rt::semaphore_of_slot, 2);
  BOOST_TEST(result.ok(), result.describe());
  BOOST_TEST(result.ambiguous.empty());
  BOOST_TEST(!rt::check_at_most(events, rt::semaphore_of_slot, 1).ok());
}

BOOST_AUTO_TEST_CASE(groups_are_counted_separately) {
  auto other = [](int i) { return "{t}:slot:" + std::to_string(i); };
  const std::vector<rt::event> events = {
      on(slot(0), acquired("a", "t1", 0, 0, 100 * ms)),
      on(slot(1), acquired("b", "t2", 0, 0, 100 * ms)),
      on(other(0), acquired("c", "t3", 0, 0, 100 * ms)),
      on(other(1), acquired("d", "t4", 0, 0, 100 * ms)),
  };
  BOOST_TEST(rt::check_at_most(events, rt::semaphore_of_slot, 2).ok());
  // All of them in one group: four at once.
  const auto one_group = rt::check_at_most(
      events, [](std::string_view) { return std::string("all"); }, 2);
  BOOST_REQUIRE(one_group.violations.size() == 1u);
  BOOST_TEST(one_group.violations[0].holders.size() == 4u);
}

// Three holds overlap pairwise for long, but all three only for 3 ms: within the tolerance.
BOOST_AUTO_TEST_CASE(epsilon_applies_to_the_common_overlap_of_all_holders) {
  const std::vector<rt::event> events = {
      on(slot(0), acquired("a", "t1", 0, 0, 100 * ms)),
      on(slot(1), acquired("b", "t2", 0, 50 * ms, 150 * ms)),
      on(slot(2), acquired("c", "t3", 0, 97 * ms, 200 * ms)),
  };
  BOOST_TEST(rt::check_at_most(events, rt::semaphore_of_slot, 2, 5ms).ok());
  const auto strict = rt::check_at_most(events, rt::semaphore_of_slot, 2, 1ms);
  BOOST_REQUIRE(strict.violations.size() == 1u);
  BOOST_TEST(strict.violations[0].from == 97 * ms);
  BOOST_TEST(strict.violations[0].by == 3 * ms);
}

// One stretch over the limit is one violation, naming everyone who took part in it, also those
// who came while it lasted; a stretch after the count fell back is another.
BOOST_AUTO_TEST_CASE(a_stretch_over_the_limit_is_one_violation_with_every_holder_in_it) {
  const std::vector<rt::event> events = {
      on(slot(0), acquired("a", "t1", 0, 0, 100 * ms)),
      on(slot(1), acquired("b", "t2", 0, 10 * ms, 60 * ms)),
      on(slot(2), acquired("c", "t3", 0, 20 * ms, 80 * ms)),
      on(slot(3), acquired("d", "t4", 0, 50 * ms, 90 * ms)),    // joins while over
      on(slot(1), acquired("e", "t5", 0, 200 * ms, 300 * ms)),  // later, alone: fine
      on(slot(2), acquired("f", "t6", 0, 210 * ms, 300 * ms)),
      on(slot(3), acquired("g", "t7", 0, 220 * ms, 250 * ms)),
  };
  const auto result = rt::check_at_most(events, rt::semaphore_of_slot, 2, 0ms);
  BOOST_TEST_REQUIRE(result.violations.size() == 2u, result.describe());
  BOOST_TEST(result.violations[0].holders.size() == 4u);
  BOOST_TEST(result.violations[0].from == 20 * ms);
  BOOST_TEST(result.violations[0].by == 60 * ms);  // until c ended, leaving a and d
  BOOST_TEST(result.violations[1].holders.size() == 3u);
  BOOST_TEST(result.violations[1].by == 30 * ms);
}

BOOST_AUTO_TEST_CASE(an_unknown_acquire_over_the_limit_is_ambiguous) {
  const std::vector<rt::event> events = {
      on(slot(0), acquired("a", "t1", 0, 0, 100 * ms)),
      on(slot(1), acquired("b", "t2", 0, 0, 100 * ms)),
      on(slot(0), acquire_unknown("c", 10 * ms, 100 * ms)),
  };
  const auto result = rt::check_at_most(events, rt::semaphore_of_slot, 2);
  BOOST_TEST(result.ok(), result.describe());
  BOOST_REQUIRE(result.ambiguous.size() == 1u);
  BOOST_TEST(result.ambiguous[0].holders.size() == 3u);
  // Unknown outcomes alone are never judged.
  const std::vector<rt::event> unknown_only = {
      on(slot(0), acquire_unknown("a", 0, 100 * ms)),
      on(slot(1), acquire_unknown("b", 0, 100 * ms)),
      on(slot(0), acquire_unknown("c", 0, 100 * ms)),
  };
  const auto none = rt::check_at_most(unknown_only, rt::semaphore_of_slot, 2);
  BOOST_TEST(none.ok());
  BOOST_TEST(none.ambiguous.empty());
}

BOOST_AUTO_TEST_CASE(two_holds_of_one_lease_count_once) {
  // The re-SET of an unsafe variant records a second acquire with the lease's own token.
  const std::vector<rt::event> events = {
      acquired("a", "t1", 0, 0, 100 * ms),
      acquired("a", "t1", 40 * ms, 50 * ms, 200 * ms),
  };
  BOOST_TEST(rt::check_mutual_exclusion(events).ok());
}

BOOST_AUTO_TEST_CASE(slot_keys_map_to_their_semaphore) {
  BOOST_TEST(rt::semaphore_of_slot("{jobs}:slot:0") == "{jobs}");
  BOOST_TEST(rt::semaphore_of_slot("{jobs}:slot:1023") == "{jobs}");
  BOOST_TEST(rt::semaphore_of_slot("a:{tag}:slot:7") == "a:{tag}");
  BOOST_TEST(rt::semaphore_of_slot("jobs") == "jobs");
  BOOST_TEST(rt::semaphore_of_slot("jobs:slot:") == "jobs:slot:");
  BOOST_TEST(rt::semaphore_of_slot("jobs:slot:1a") == "jobs:slot:1a");
  BOOST_TEST(rt::each_resource("{jobs}:slot:0") == "{jobs}:slot:0");
}

// Readers and writers: readers together, a writer alone.

BOOST_AUTO_TEST_CASE(readers_together_are_fine) {
  const std::vector<rt::event> events = {
      reading(acquired("a", "t1", 0, 0, 100 * ms)),
      reading(acquired("b", "t2", 0, 10 * ms, 110 * ms)),
      reading(acquired("c", "t3", 0, 20 * ms, 120 * ms)),
      acquired("w", "t4", 0, 130 * ms, 200 * ms),  // after every reader
  };
  const auto result = rt::check_readers_writers(events);
  BOOST_TEST(result.ok(), result.describe());
  BOOST_TEST(result.ambiguous.empty());
  // The same holds as leases of a mutex overlap.
  BOOST_TEST(!rt::check_mutual_exclusion(events).ok());
}

BOOST_AUTO_TEST_CASE(a_writer_overlapping_a_reader_is_a_violation) {
  const std::vector<rt::event> events = {
      reading(acquired("a", "t1", 0, 0, 100 * ms)),
      reading(acquired("b", "t2", 0, 10 * ms, 110 * ms)),
      acquired("w", "t3", 0, 80 * ms, 200 * ms),  // while a and b still read
      reading(released("a", "t1", 90 * ms)),
  };
  const auto result = rt::check_readers_writers(events, 0ms);
  BOOST_TEST_REQUIRE(result.violations.size() == 1u, result.describe());
  const auto& v = result.violations[0];
  BOOST_TEST(v.readers_writers);
  BOOST_TEST(v.holders.size() == 3u);
  BOOST_TEST(v.from == 80 * ms);
  BOOST_TEST(v.by == 30 * ms);  // until b's validity ended, 20 ms after a's release
  const std::string text = result.describe();
  BOOST_TEST(text.find("a [t1, reader], b [t2, reader] and w [t3] all held \"r\" (a writer "
                       "with anyone) for 30.000 ms from +80.000 ms") != std::string::npos,
             text);
}

BOOST_AUTO_TEST_CASE(two_writers_at_once_are_a_violation) {
  const std::vector<rt::event> events = {
      acquired("v", "t1", 0, 0, 100 * ms),
      acquired("w", "t2", 0, 60 * ms, 200 * ms),
  };
  const auto result = rt::check_readers_writers(events, 0ms);
  BOOST_REQUIRE(result.violations.size() == 1u);
  BOOST_TEST(result.violations[0].by == 40 * ms);
}

BOOST_AUTO_TEST_CASE(a_writer_with_an_unknown_reader_is_ambiguous) {
  const std::vector<rt::event> events = {
      reading(acquire_unknown("a", 0, 100 * ms)),
      acquired("w", "t2", 0, 20 * ms, 120 * ms),
  };
  const auto result = rt::check_readers_writers(events);
  BOOST_TEST(result.ok(), result.describe());
  BOOST_REQUIRE(result.ambiguous.size() == 1u);
  BOOST_TEST(result.ambiguous[0].holders.size() == 2u);
  // A certain reader with an unknown one is fine: readers may share.
  const std::vector<rt::event> readers = {
      reading(acquire_unknown("a", 0, 100 * ms)),
      reading(acquired("b", "t2", 0, 20 * ms, 120 * ms)),
  };
  const auto shared = rt::check_readers_writers(readers);
  BOOST_TEST(shared.ok());
  BOOST_TEST(shared.ambiguous.empty());
}

BOOST_AUTO_TEST_CASE(a_readers_extension_and_loss_move_its_end) {
  std::vector<rt::event> events = {
      reading(acquired("a", "t1", 0, 0, 100 * ms)),
      reading(extended("a", "t1", 50 * ms, 200 * ms)),
      acquired("w", "t2", 0, 150 * ms, 300 * ms),
  };
  BOOST_TEST(!rt::check_readers_writers(events).ok());
  events.push_back(reading(lost("a", "t1", 120 * ms)));
  BOOST_TEST(rt::check_readers_writers(events).ok());
}

BOOST_AUTO_TEST_CASE(a_shared_lease_survives_the_text_form) {
  const auto line = reading(acquired("p1/c0", "t1", 1, 2, 3)).to_line();
  BOOST_TEST(line.ends_with(" shared"), line);
  const auto back = rt::event::from_line(line);
  BOOST_TEST(back.shared);
  BOOST_TEST(back.valid_until == 3);
  BOOST_TEST(!rt::event::from_line(acquired("p", "t", 1, 2, 3).to_line()).shared);
  try {
    (void)rt::event::from_line("lock-event/1 p r t acquire ok 1 2 3 4 public");
    BOOST_ERROR("an eleventh field that is not \"shared\" was accepted");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()).find("'public'") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
