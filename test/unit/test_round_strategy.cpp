// What an acquire's rounds send and learn, without a server: a lock's rounds (plain SET first,
// then asking the holder's PTTL; fenced from the first), a semaphore permit's (a slot this client
// does not hold, each slot once in a try), a read-write lock's (a reader's or a writer's, and
// when a waiting writer keeps, renews or drops its marks) and a set of locks' (one script on
// every key of the set, the set made canonical first), and how their refusals, late refusals
// and announcements say when the lock can be free.

#include "algo/replies.hpp"
#include "lock/key_names.hpp"
#include "lock/local_queues.hpp"
#include "lock/lock_rounds.hpp"
#include "lock/rw_rounds.hpp"
#include "lock/scripts.hpp"
#include "lock/set_rounds.hpp"
#include "lock/slot_rounds.hpp"
#include "resp/encoder.hpp"
#include "unit/answer_kinds.hpp"
#include "unit/answers_of.hpp"
#include "unit/queue_holder_stub.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <ostream>
#include <random>
#include <set>
#include <string>

using namespace std::chrono_literals;
using redlock::detail::lock_request;
using redlock::detail::lock_rounds;
using redlock::detail::node_answer;
using redlock::detail::resource_queue;
using redlock::detail::round_strategy;
using redlock::detail::rw_rounds;
using redlock::detail::set_answer;
using redlock::detail::set_form;
using redlock::detail::set_rounds;
using redlock::detail::slot_rounds;
using redlock::detail::steady_clock;
using redlock::test::answers_of;

namespace redlock::detail {
// For Boost.Test's messages.
std::ostream& boost_test_print_type(std::ostream& out, set_form form) {
  constexpr const char* names[] = {"plain", "asking_ttl",  "fenced", "slot",         "fenced_slot",
                                   "read",  "fenced_read", "write",  "fenced_write", "fenced_set"};
  return out << names[static_cast<int>(form)];
}
std::ostream& boost_test_print_type(std::ostream& out, lock_request kind) {
  return out << "lock_request " << static_cast<int>(kind);
}
}  // namespace redlock::detail

namespace {

using redlock::test::answers::failed;
using redlock::test::answers::no;
using redlock::test::answers::pending;
using redlock::test::answers::yes;
constexpr double drift = 0.01;
// The lock's name, which a lock's rounds refer to (in an acquire it is its lease's).
const std::string res = "res";

round_strategy::round_inputs inputs(bool first, bool fencing = false, bool competing = false) {
  return {.nodes = 5,
          .token = "tok",
          .ttl = 10'000ms,
          .fencing = fencing,
          .first = first,
          .competing = competing,
          .single_round = false};
}

std::string payload_of(const round_strategy::round_request& request) {
  return request.shared ? *request.shared : std::string(request.owned);
}

set_answer refusal_with_pttl(long long pttl) {
  set_answer answer;
  answer.what = no;
  answer.holder_pttl = pttl;
  return answer;
}

using redlock::test::some_lease;

set_answer slot_refusal(std::vector<long long> ttls) {
  set_answer answer;
  answer.what = no;
  answer.slot_ttls = std::move(ttls);
  return answer;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lock_round_strategy)

BOOST_AUTO_TEST_CASE(the_first_uncontended_round_is_a_plain_set_and_later_ones_ask_the_pttl) {
  lock_rounds rounds(res);
  std::minstd_rand random(1);
  const auto first = rounds.next_round(inputs(true), random);
  BOOST_REQUIRE(first);
  BOOST_TEST(first->form == set_form::plain);
  BOOST_TEST(first->kind == lock_request::set);
  BOOST_TEST(first->key == "res");
  BOOST_TEST(!first->shared);
  std::string expected;
  redlock::resp::encode_command(expected, {"SET", "res", "tok", "NX", "PX", "10000"});
  BOOST_TEST(payload_of(*first) == expected);

  const auto second = rounds.next_round(inputs(false), random);
  BOOST_REQUIRE(second);
  BOOST_TEST(second->form == set_form::asking_ttl);
  BOOST_TEST(second->kind == lock_request::set_asking_ttl);
  {
    const std::string_view keys[] = {"res"};
    const std::string_view args[] = {"tok", "10000"};
    BOOST_TEST(payload_of(*second) ==
               redlock::detail::encode_evalsha(redlock::detail::acquire_script(), keys, args));
  }
  // The first round's bytes stay as they were: its requests may still be queued with a view.
  BOOST_TEST(payload_of(*first) == expected);
}

BOOST_AUTO_TEST_CASE(a_competing_first_round_asks_and_fencing_rounds_always_count) {
  lock_rounds rounds(res);
  std::minstd_rand random(1);
  const auto competing = rounds.next_round(inputs(true, false, true), random);
  BOOST_REQUIRE(competing);
  BOOST_TEST(competing->form == set_form::asking_ttl);

  lock_rounds fenced(res);
  const auto first = fenced.next_round(inputs(true, true), random);
  BOOST_REQUIRE(first);
  BOOST_TEST(first->form == set_form::fenced);
  BOOST_TEST(first->kind == lock_request::fenced_set);
  const std::string counter = redlock::detail::fencing_counter_key("res");
  const std::string_view keys[] = {"res", counter};
  const std::string_view args[] = {"tok", "10000"};
  BOOST_TEST(payload_of(*first) ==
             redlock::detail::encode_evalsha(redlock::detail::fenced_acquire_script(), keys, args));
  BOOST_TEST(fenced.keys_of_round(true).find("res") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(refusals_bound_the_wait_and_announcements_free_their_nodes) {
  lock_rounds rounds(res);
  std::minstd_rand random(1);
  rounds.next_round(inputs(false), random);
  const auto t0 = steady_clock::now();
  // Three of five nodes refuse with the holder's PTTL, two failed: no quorum of five is free
  // until the refusals' keys expire.
  for (std::size_t node = 0; node < 3; ++node)
    rounds.record(node, refusal_with_pttl(1000 * static_cast<long long>(node + 1)), t0);
  rounds.learn(answers_of({no, no, no, failed, failed}), 3, t0, drift);
  BOOST_TEST(!rounds.may_be_free());
  // Failed nodes never expire: a quorum of 3 needs every refusing node free, the latest at 3 s.
  const auto by = rounds.free_by();
  BOOST_REQUIRE(by);
  BOOST_TEST((*by > t0 + 3000ms && *by < t0 + 3100ms));

  rounds.forget_holder(0, 0);
  rounds.forget_holder(0, 1);
  BOOST_TEST(!rounds.may_be_free());
  rounds.forget_holder(0, 2);
  BOOST_TEST(rounds.may_be_free());
}

BOOST_AUTO_TEST_CASE(a_late_refusal_is_applied_only_to_a_watching_op_but_kept_for_learn) {
  lock_rounds rounds(res);
  std::minstd_rand random(1);
  rounds.next_round(inputs(false), random);
  const auto t0 = steady_clock::now();
  // Decided without the lock: nodes 0 and 1 refused with their PTTL, node 2 with nil (the key
  // expired between SET and PTTL), node 3 failed; node 4's refusal answers after the decision.
  rounds.record(0, refusal_with_pttl(100), t0);
  rounds.record(1, refusal_with_pttl(200), t0);
  const auto answers = answers_of({no, no, no, failed, no});
  rounds.learn(answers, 3, t0, drift);
  BOOST_TEST(!rounds.free_by());  // two known expiries of the three a quorum needs

  // Not watching (a fenced round's write-back still in flight): not applied, but kept...
  BOOST_TEST(!rounds.late_refusal(4, refusal_with_pttl(500), t0, drift, false));
  BOOST_TEST(!rounds.free_by());
  // ... for the learn that follows a failed write-back.
  rounds.learn(answers, 3, t0, drift);
  BOOST_REQUIRE(rounds.free_by());
  BOOST_TEST((*rounds.free_by() > t0 + 500ms && *rounds.free_by() < t0 + 520ms));

  // A refusal without PTTL teaches nothing.
  set_answer nil_refusal;
  nil_refusal.what = no;
  BOOST_TEST(!rounds.late_refusal(4, nil_refusal, t0, drift, true));

  // Watching: applied at once. Node 2 granted (its key was cleaned up), so two more nodes free
  // make a quorum.
  lock_rounds other(res);
  other.next_round(inputs(false), random);
  other.learn(answers_of({no, no, yes, failed, no}), 3, t0, drift);
  BOOST_TEST(!other.free_by());
  BOOST_TEST(other.late_refusal(0, refusal_with_pttl(200), t0, drift, true));
  BOOST_TEST(!other.free_by());
  BOOST_TEST(other.late_refusal(4, refusal_with_pttl(300), t0, drift, true));
  BOOST_REQUIRE(other.free_by());
  BOOST_TEST((*other.free_by() > t0 + 300ms && *other.free_by() < t0 + 320ms));
}

BOOST_AUTO_TEST_CASE(after_a_handoff_limit_every_node_is_held_until_the_key_is_gone) {
  lock_rounds rounds(res);
  const auto gone_by = steady_clock::now() + 2s;
  rounds.held_until(5, 3, gone_by);
  BOOST_TEST(!rounds.may_be_free());
  BOOST_REQUIRE(rounds.free_by());
  BOOST_TEST((*rounds.free_by() == gone_by));
}

BOOST_AUTO_TEST_CASE(a_try_is_contended_here_behind_a_local_holder_or_waiter) {
  lock_rounds rounds(res);
  BOOST_TEST(rounds.contended_here(nullptr, false).empty());
  resource_queue queue;
  BOOST_TEST(rounds.contended_here(&queue, false).empty());
  BOOST_TEST(rounds.contended_here(&queue, true).find("awaited by another lease") !=
             std::string::npos);
  queue.holder = some_lease();
  BOOST_TEST(rounds.contended_here(&queue, false).find("held by another lease") !=
             std::string::npos);
  std::minstd_rand random(1);
  BOOST_TEST(!rounds.another_try_may_win(random));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(slot_round_strategy)

BOOST_AUTO_TEST_CASE(bad_semaphores_are_refused_with_the_reason) {
  BOOST_TEST(slot_rounds("", 3, false).problem(1 << 20).find("name is empty") != std::string::npos);
  BOOST_TEST(slot_rounds("s", 0, false).problem(1 << 20).find("between 1 and") !=
             std::string::npos);
  BOOST_TEST(slot_rounds("s", 1'000'000, false).problem(1 << 20).find("between 1 and") !=
             std::string::npos);
  BOOST_TEST(slot_rounds("s", 1000, false).problem(4096).find("max_reply_memory") !=
             std::string::npos);
  BOOST_TEST(slot_rounds("s", 3, false).problem(1 << 20).empty());
}

BOOST_AUTO_TEST_CASE(a_round_never_tries_a_slot_this_client_holds) {
  slot_rounds rounds("sem", 4, false);
  resource_queue queue;
  rounds.join(queue);
  BOOST_TEST(queue.semaphore);
  BOOST_REQUIRE(queue.slot_holders.size() == 4);
  auto* ours = some_lease();
  queue.slot_holders[0] = ours;
  queue.slot_holders[2] = ours;
  std::minstd_rand random(3);
  std::set<std::string> keys;
  for (int i = 0; i < 100; ++i) {
    const auto request = rounds.next_round(inputs(i == 0), random);
    BOOST_REQUIRE(request);
    BOOST_TEST(request->kind == lock_request::slot_set);
    BOOST_TEST(request->form == set_form::slot);
    keys.insert(std::string(request->key));
  }
  const std::string prefix = redlock::detail::permit_queue_key("sem");
  BOOST_TEST((keys == std::set<std::string>{prefix + "1", prefix + "3"}));

  queue.slot_holders[1] = ours;
  queue.slot_holders[3] = ours;
  BOOST_TEST(!rounds.next_round(inputs(false), random));
  BOOST_TEST(rounds.nothing_to_try().find("held by this client") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_try_tries_each_slot_once_and_stops_when_none_may_be_free) {
  slot_rounds rounds("sem", 3, true);
  resource_queue queue;
  rounds.join(queue);
  std::minstd_rand random(5);
  const auto t0 = steady_clock::now();
  std::set<std::string> tried;
  for (int round = 0; round < 3; ++round) {
    auto in = inputs(round == 0);
    in.nodes = 3;
    in.single_round = true;
    const auto request = rounds.next_round(in, random);
    BOOST_REQUIRE(request);
    tried.insert(std::string(request->key));
    // Every node refuses the tried slot and reports the others free.
    for (std::size_t node = 0; node < 3; ++node)
      rounds.record(node, slot_refusal({-2, -2, -2}), t0);
    rounds.learn(answers_of({no, no, no}), 2, t0, drift);
    BOOST_TEST(rounds.another_try_may_win(random) == (round < 2));
  }
  BOOST_TEST(tried.size() == 3u);
  BOOST_TEST(!rounds.next_round(inputs(false), random));
}

BOOST_AUTO_TEST_CASE(refusals_and_announcements_tell_which_slot_can_be_free) {
  slot_rounds rounds("sem", 2, false);
  resource_queue queue;
  rounds.join(queue);
  std::minstd_rand random(5);
  const auto t0 = steady_clock::now();
  auto in = inputs(true, true);
  in.nodes = 3;
  const auto request = rounds.next_round(in, random);
  BOOST_REQUIRE(request);
  BOOST_TEST(request->form == set_form::fenced_slot);
  BOOST_TEST(rounds.keys_of_round(true).find(redlock::detail::fencing_counter_key(request->key)) !=
             std::string::npos);
  // Both slots held for 1 s on every node that refused; the third node failed.
  rounds.record(0, slot_refusal({1000, 1000}), t0);
  rounds.record(1, slot_refusal({1000, 1000}), t0);
  rounds.learn(answers_of({no, no, failed}), 2, t0, drift);
  BOOST_TEST(!rounds.may_be_free());
  BOOST_REQUIRE(rounds.free_by());
  BOOST_TEST((*rounds.free_by() < t0 + 1100ms));

  // An announcement of slot 1 on node 0 alone frees no quorum; on node 1 too it does.
  rounds.forget_holder(1, 0);
  BOOST_TEST(!rounds.may_be_free());
  rounds.forget_holder(1, 1);
  BOOST_TEST(rounds.may_be_free());

  // A late refusal is applied only to an op that watches this round.
  BOOST_TEST(!rounds.late_refusal(2, slot_refusal({-2, -2}), t0, drift, false));
  BOOST_TEST(rounds.late_refusal(2, slot_refusal({-2, -2}), t0, drift, true));
}

BOOST_AUTO_TEST_CASE(a_try_of_a_semaphore_is_contended_only_behind_a_local_waiter) {
  slot_rounds rounds("sem", 2, true);
  resource_queue queue;
  BOOST_TEST(rounds.contended_here(&queue, false).empty());
  queue.slot_holders.assign(2, some_lease());
  BOOST_TEST(rounds.contended_here(&queue, false).empty());
  BOOST_TEST(rounds.contended_here(&queue, true).find("waits for a permit") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(rw_round_strategy)

namespace {

set_answer refusal_by_readers(long long ms) {
  set_answer answer = refusal_with_pttl(ms);
  answer.marked = true;
  return answer;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_readers_and_a_writers_rounds_run_their_scripts_on_the_locks_keys) {
  namespace d = redlock::detail;
  std::minstd_rand random(1);
  rw_rounds reader("doc", rw_rounds::side::read, "mark-id");
  const auto read = reader.next_round(inputs(true), random);
  BOOST_REQUIRE(read);
  BOOST_TEST(read->form == set_form::read);
  BOOST_TEST(read->kind == lock_request::read_set);
  BOOST_TEST(read->key == d::rw_readers_key("doc"));
  BOOST_TEST(payload_of(*read).find(d::rw_read_acquire_script().sha1()) != std::string::npos);
  BOOST_TEST(payload_of(*read).find("mark-id") == std::string::npos);
  BOOST_TEST(payload_of(*read).find(d::fencing_counter_key("doc")) == std::string::npos);
  const auto fenced_read = reader.next_round(inputs(false, true), random);
  BOOST_REQUIRE(fenced_read);
  BOOST_TEST(fenced_read->form == set_form::fenced_read);
  BOOST_TEST(payload_of(*fenced_read).find(d::fencing_counter_key("doc")) != std::string::npos);
  // A fenced reader writes its token back, guarded by its entry among the readers.
  BOOST_TEST_REQUIRE(reader.fenced_keys().size() == 1u);
  BOOST_TEST(reader.fenced_keys().front().key == d::rw_readers_key("doc"));
  BOOST_TEST(reader.fenced_keys().front().counter == d::fencing_counter_key("doc"));
  BOOST_TEST(reader.fenced_keys().front().token_is_member);
  BOOST_TEST(reader.queue_key() == d::rw_queue_key("doc"));
  BOOST_TEST(reader.keys_in_one_slot(true));

  rw_rounds writer("doc", rw_rounds::side::write, "mark-id");
  const auto write = writer.next_round(inputs(true, true), random);
  BOOST_REQUIRE(write);
  BOOST_TEST(write->form == set_form::fenced_write);
  BOOST_TEST(write->kind == lock_request::write_set);
  BOOST_TEST(write->key == d::rw_writer_key("doc"));
  BOOST_TEST(payload_of(*write).find(d::rw_write_acquire_script().sha1()) != std::string::npos);
  BOOST_TEST(payload_of(*write).find("mark-id") != std::string::npos);
  BOOST_TEST_REQUIRE(writer.fenced_keys().size() == 1u);
  BOOST_TEST(writer.fenced_keys().front().key == d::rw_writer_key("doc"));
  BOOST_TEST(writer.fenced_keys().front().counter == d::fencing_counter_key("doc"));
  BOOST_TEST(!writer.fenced_keys().front().token_is_member);
  // A reader and a writer of one lock wait in one local queue.
  BOOST_TEST(writer.queue_key() == reader.queue_key());
}

BOOST_AUTO_TEST_CASE(marks_on_a_quorum_are_kept_and_renewed_within_a_third_of_the_ttl) {
  std::minstd_rand random(1);
  rw_rounds writer("doc", rw_rounds::side::write, "mark-id");
  BOOST_REQUIRE(writer.next_round(inputs(false), random));
  const auto now = steady_clock::now();
  // Three of five nodes marked (readers there for another minute), two failed.
  for (std::size_t node = 0; node < 3; ++node)
    writer.record(node, refusal_by_readers(60'000), now);
  writer.learn(answers_of({no, no, no, failed, failed}), 3, now, drift);
  BOOST_TEST(!writer.take_marks_to_drop());
  BOOST_TEST(writer.marks_may_stand());
  BOOST_TEST(!writer.may_be_free());
  // The readers free the nodes in a minute, but the marks are renewed long before.
  const auto by = writer.free_by();
  BOOST_REQUIRE(by.has_value());
  BOOST_TEST((*by <= now + 10'000ms / 3));
  BOOST_TEST((*by > now));
}

BOOST_AUTO_TEST_CASE(marks_on_fewer_than_a_quorum_are_dropped_once) {
  std::minstd_rand random(1);
  rw_rounds writer("doc", rw_rounds::side::write, "mark-id");
  BOOST_REQUIRE(writer.next_round(inputs(false), random));
  const auto now = steady_clock::now();
  // Two nodes marked; three refused by another writer's marks (a plain PTTL): a split.
  writer.record(0, refusal_by_readers(5000), now);
  writer.record(1, refusal_by_readers(5000), now);
  for (std::size_t node = 2; node < 5; ++node)
    writer.record(node, refusal_with_pttl(8000), now);
  writer.learn(answers_of({no, no, no, no, no}), 3, now, drift);
  BOOST_TEST(writer.take_marks_to_drop());
  BOOST_TEST(!writer.take_marks_to_drop());
  BOOST_TEST(!writer.marks_may_stand());
  // Waiting as for the holders' PTTLs, with no renewal due: it has no marks to keep.
  const auto by = writer.free_by();
  BOOST_REQUIRE(by.has_value());
  BOOST_TEST((*by >= now + 4000ms));

  // A mark that answers after a decision must still be deleted when the acquire ends.
  BOOST_REQUIRE(writer.next_round(inputs(false), random));
  writer.late_refusal(4, refusal_by_readers(5000), now, drift, false);
  BOOST_TEST(writer.marks_may_stand());
}

// A round whose answer never comes (a timeout), comes after the acquire ended, or after the next
// round opened may have set a mark all the same: from a writer's first round on, until its marks
// are deleted, the acquire deletes them when it ends. A round refused only by another writer
// deletes nothing on its own (no mark of ours was seen).
BOOST_AUTO_TEST_CASE(a_writers_marks_may_stand_from_its_first_round_until_they_are_dropped) {
  std::minstd_rand random(1);
  rw_rounds writer("doc", rw_rounds::side::write, "mark-id");
  BOOST_TEST(!writer.marks_may_stand());
  BOOST_REQUIRE(writer.next_round(inputs(false), random));
  BOOST_TEST(writer.marks_may_stand(), "an answer still to come may set a mark");
  const auto now = steady_clock::now();
  for (std::size_t node = 0; node < 3; ++node)
    writer.record(node, refusal_with_pttl(8000), now);
  writer.learn(answers_of({no, no, no, pending, pending}), 3, now, drift);
  BOOST_TEST(!writer.take_marks_to_drop());
  BOOST_TEST(writer.marks_may_stand());
  // An earlier round's answer that set a mark after the next round opened.
  BOOST_REQUIRE(writer.next_round(inputs(false), random));
  writer.mark_seen();
  for (std::size_t node = 0; node < 3; ++node)
    writer.record(node, refusal_with_pttl(8000), now);
  writer.learn(answers_of({no, no, no, pending, pending}), 3, now, drift);
  BOOST_TEST(writer.take_marks_to_drop());
  BOOST_TEST(!writer.marks_may_stand());
}

BOOST_AUTO_TEST_CASE(a_reader_never_marks_and_announcements_free_its_nodes) {
  std::minstd_rand random(1);
  rw_rounds reader("doc", rw_rounds::side::read, "unused");
  BOOST_REQUIRE(reader.next_round(inputs(false), random));
  const auto now = steady_clock::now();
  for (std::size_t node = 0; node < 5; ++node)
    reader.record(node, refusal_with_pttl(4000), now);  // a writer's key or mark
  reader.learn(answers_of({no, no, no, no, no}), 3, now, drift);
  BOOST_TEST(!reader.take_marks_to_drop());
  BOOST_TEST(!reader.marks_may_stand());
  BOOST_TEST(!reader.may_be_free());
  for (std::size_t node = 0; node < 3; ++node)
    reader.forget_holder(0, node);
  BOOST_TEST(reader.may_be_free());
}

BOOST_AUTO_TEST_CASE(a_try_shares_with_local_readers_but_never_passes_a_local_waiter) {
  resource_queue queue;
  rw_rounds reader("doc", rw_rounds::side::read, "a");
  rw_rounds writer("doc", rw_rounds::side::write, "b");
  BOOST_TEST(reader.contended_here(&queue, false).empty());
  BOOST_TEST(writer.contended_here(&queue, false).empty());
  queue.readers.push_back(some_lease());
  BOOST_TEST(reader.contended_here(&queue, false).empty());
  BOOST_TEST(!writer.contended_here(&queue, false).empty());
  queue.readers.clear();
  queue.holder = some_lease();
  BOOST_TEST(!reader.contended_here(&queue, false).empty());
  queue.holder = nullptr;
  BOOST_TEST(reader.contended_here(&queue, true).find("(to read)") != std::string::npos);
  BOOST_TEST(!writer.contended_here(&queue, true).empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(set_round_strategy)

BOOST_AUTO_TEST_CASE(a_set_is_sorted_merged_and_bounded) {
  std::string problem;
  const auto set = redlock::detail::normalize_set({"b", "a", "c", "a", "b"}, problem);
  BOOST_TEST(problem.empty());
  BOOST_TEST((set == std::vector<std::string>{"a", "b", "c"}));

  problem.clear();
  BOOST_TEST(redlock::detail::normalize_set({}, problem).empty());
  BOOST_TEST(problem == "the set of resources is empty");

  problem.clear();
  BOOST_TEST(redlock::detail::normalize_set({"a", ""}, problem).empty());
  BOOST_TEST(problem == "a resource of the set is empty");

  std::vector<std::string> largest;
  for (std::size_t i = 0; i < redlock::detail::max_set_size; ++i)
    largest.push_back("r" + std::to_string(i));
  problem.clear();
  BOOST_TEST(redlock::detail::normalize_set(largest, problem).size() ==
             redlock::detail::max_set_size);
  BOOST_TEST(problem.empty());
  largest.push_back("one-more");
  BOOST_TEST(redlock::detail::normalize_set(largest, problem).empty());
  BOOST_TEST(problem == "the set has 65 resources, more than the 64 one set may have");
  // Duplicates do not count against the bound.
  largest.pop_back();
  largest.push_back("r0");
  problem.clear();
  BOOST_TEST(redlock::detail::normalize_set(largest, problem).size() == 64u);

  set_rounds invalid({});
  BOOST_TEST(invalid.problem(0) ==
             "redlock: cannot acquire a set of locks: the set of resources is empty");
  set_rounds valid({"y", "x"});
  BOOST_TEST(valid.problem(0).empty());
  BOOST_TEST(valid.name() == "x,y");
  BOOST_TEST(valid.queue_key() == "x");
  BOOST_TEST(valid.queue_keys().size() == 2u);
  BOOST_TEST(valid.queue_keys()[1] == "y");
  BOOST_TEST(valid.subject() == "the set \"x\", \"y\"");
}

BOOST_AUTO_TEST_CASE(every_round_runs_the_set_script_on_every_key) {
  set_rounds rounds({"b", "a"});
  std::minstd_rand random(1);
  for (const bool first : {true, false}) {
    const auto round = rounds.next_round(inputs(first), random);
    BOOST_REQUIRE(round);
    BOOST_TEST(round->form == set_form::asking_ttl);
    BOOST_TEST(round->kind == lock_request::multi_set);
    BOOST_TEST(round->key == "a");
    const std::string_view keys[] = {"a", "b"};
    const std::string_view args[] = {"tok", "10000", "0"};
    BOOST_TEST(payload_of(*round) == redlock::detail::encode_evalsha(
                                         redlock::detail::multi_acquire_script(), keys, args));
  }
  const auto fenced = rounds.next_round(inputs(false, true), random);
  BOOST_REQUIRE(fenced);
  BOOST_TEST(fenced->form == set_form::fenced_set);
  const std::string counter_a = redlock::detail::fencing_counter_key("a");
  const std::string counter_b = redlock::detail::fencing_counter_key("b");
  const std::string_view keys[] = {"a", "b", counter_a, counter_b};
  const std::string_view args[] = {"tok", "10000", "1"};
  BOOST_TEST(payload_of(*fenced) ==
             redlock::detail::encode_evalsha(redlock::detail::multi_acquire_script(), keys, args));
  BOOST_TEST(rounds.keys_of_round(true) ==
             "\"a\", \"b\", \"" + counter_a + "\", \"" + counter_b + "\"");

  // A failed round's cleanup releases every key of the set.
  const auto held = rounds.round_hold("a", false);
  BOOST_TEST((held.kind == redlock::detail::hold_kind::set));
  BOOST_TEST(held.keys.size() == 2u);
  BOOST_TEST(held.keys[1] == "b");
}

BOOST_AUTO_TEST_CASE(on_a_cluster_the_set_must_share_one_hash_slot) {
  BOOST_TEST(set_rounds({"{acct}:1", "{acct}:2"}).keys_in_one_slot(true));
  BOOST_TEST(set_rounds({"{acct}:1", "{acct}:2"}).cross_slot_problem(true).empty());
  const set_rounds spread({"acct:1", "acct:2"});
  BOOST_TEST(!spread.keys_in_one_slot(false));
  BOOST_TEST(spread.cross_slot_problem(false).find("one hash tag") != std::string::npos);
  // One hash slot for the locks, but a fence counter beside a name with '}' and no tag is not.
  BOOST_TEST(set_rounds({"a}b"}).keys_in_one_slot(false));
  BOOST_TEST(!set_rounds({"a}b"}).keys_in_one_slot(true));
}

BOOST_AUTO_TEST_CASE(the_longest_refusal_bounds_the_wait_and_any_release_may_free_a_node) {
  set_rounds rounds({"a", "b"});
  std::minstd_rand random(1);
  rounds.next_round(inputs(false), random);
  const auto t0 = steady_clock::now();
  for (std::size_t node = 0; node < 3; ++node)
    rounds.record(node, refusal_with_pttl(2000), t0);
  rounds.learn(answers_of({no, no, no, yes, yes}), 3, t0, drift);
  BOOST_TEST(!rounds.may_be_free());
  const auto by = rounds.free_by();
  BOOST_REQUIRE(by);
  BOOST_TEST((*by > t0 + 2000ms && *by < t0 + 2100ms));
  rounds.forget_holder(0, 0);
  BOOST_TEST(rounds.may_be_free());
}

BOOST_AUTO_TEST_CASE(a_try_is_contended_here_behind_a_local_holder_or_waiter_of_any_resource) {
  set_rounds rounds({"a", "b"});
  resource_queue queue;
  BOOST_TEST(rounds.contended_here(&queue, false).empty());
  BOOST_TEST(!rounds.contended_here(&queue, true).empty());
  queue.holder = some_lease();
  BOOST_TEST(rounds.contended_here(&queue, false).find("a resource of the set") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
