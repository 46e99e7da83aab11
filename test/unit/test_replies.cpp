// Reading a node's reply once into a typed answer: what each form of acquire request accepts as a
// grant or a refusal, what a refusal carries (the holder's PTTL, every slot's PTTL), what a grant
// carries (the fencing counter), and which replies are failures.

#include "algo/replies.hpp"
#include "redlock/error.hpp"
#include "unit/answer_kinds.hpp"
#include "unit/resp_values.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace rd = redlock::detail;
namespace resp = redlock::resp;
using boost::system::error_code;
using rd::node_answer;
using rd::set_form;

namespace {

using redlock::test::reply::array;
using redlock::test::reply::bulk;
using redlock::test::reply::error_reply;
using redlock::test::reply::integer;
using redlock::test::reply::simple;
using redlock::test::reply::text_of;
const resp::value null_reply{};

using redlock::test::answers::failed;
using redlock::test::answers::no;
using redlock::test::answers::yes;

const set_form all_forms[] = {set_form::plain,       set_form::asking_ttl,  set_form::fenced,
                              set_form::slot,        set_form::fenced_slot, set_form::read,
                              set_form::fenced_read, set_form::write,       set_form::fenced_write,
                              set_form::fenced_set};

}  // namespace

BOOST_AUTO_TEST_SUITE(replies)

BOOST_AUTO_TEST_CASE(each_form_grants_only_on_the_reply_its_request_gives) {
  struct row {
    set_form form;
    resp::value reply;
    node_answer::kind expected;
  };
  const row rows[] = {
      {set_form::plain, simple("OK"), yes},
      {set_form::plain, null_reply, no},
      {set_form::plain, integer(1), failed},
      {set_form::asking_ttl, simple("OK"), yes},
      {set_form::asking_ttl, integer(250), no},
      {set_form::asking_ttl, null_reply, no},
      {set_form::asking_ttl, array({bulk("4")}), failed},  // a fenced grant: another request's
      {set_form::fenced, array({bulk("4")}), yes},
      {set_form::fenced, array({integer(4)}), failed},  // counters come as text, never rounded
      {set_form::fenced, simple("OK"), failed},         // a plain grant carries no counter
      {set_form::fenced, integer(250), no},
      {set_form::fenced, array({bulk("0")}), failed},  // counters start at 1
      {set_form::slot, simple("OK"), yes},
      {set_form::slot, bulk("120,-2,5"), no},
      {set_form::slot, integer(3), failed},
      {set_form::fenced_slot, array({bulk("3")}), yes},
      {set_form::fenced_slot, integer(3), failed},
      {set_form::fenced_slot, simple("OK"), failed},
      {set_form::fenced_slot, bulk("7"), no},
      {set_form::read, simple("OK"), yes},
      {set_form::read, integer(250), no},
      {set_form::read, null_reply, no},
      {set_form::read, array({bulk("readers"), integer(5)}), failed},  // a writer's refusal
      {set_form::fenced_read, array({bulk("0")}), yes},  // no writer has had a token yet
      {set_form::fenced_read, array({bulk("7")}), yes},
      {set_form::fenced_read, array({integer(7)}), failed},
      {set_form::fenced_read, simple("OK"), failed},
      {set_form::write, simple("OK"), yes},
      {set_form::write, integer(250), no},
      {set_form::write, array({bulk("readers"), integer(900)}), no},
      {set_form::write, array({bulk("readers"), bulk("900")}), failed},
      {set_form::write, array({bulk("writers"), integer(900)}), failed},
      {set_form::fenced_write, array({bulk("3")}), yes},
      {set_form::fenced_write, array({bulk("0")}), failed},  // a writer's token is 1 or more
      {set_form::fenced_write, array({bulk("readers"), integer(900)}), no},
      {set_form::fenced_set, array({bulk("3"), bulk("1"), bulk("9")}), yes},
      {set_form::fenced_set, array({bulk("3")}), yes},  // a set of one
      {set_form::fenced_set, array({}), failed},
      {set_form::fenced_set, array({bulk("3"), bulk("0")}), failed},  // counters start at 1
      {set_form::fenced_set, array({bulk("3"), integer(4)}), failed},
      {set_form::fenced_set, simple("OK"), failed},  // an unfenced grant
      {set_form::fenced_set, integer(250), no},
      {set_form::fenced_set, integer(-1), no},
      {set_form::fenced_set, null_reply, no},
  };
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT("form " << static_cast<int>(r.form) << ", reply "
                               << resp::to_debug_string(r.reply)) {
      const auto answer = rd::read_set_reply({}, r.reply, r.form);
      BOOST_TEST((answer.what == r.expected));
      if (r.expected == failed) BOOST_TEST(answer.detail.starts_with("unexpected reply"));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_refusal_that_asks_carries_the_holders_pttl) {
  for (auto form : {set_form::asking_ttl, set_form::fenced}) {
    BOOST_TEST_CONTEXT("form " << static_cast<int>(form)) {
      BOOST_TEST((rd::read_set_reply({}, integer(250), form).holder_pttl == 250));
      BOOST_TEST((rd::read_set_reply({}, integer(-1), form).holder_pttl == -1));      // no expiry
      BOOST_TEST(!rd::read_set_reply({}, null_reply, form).holder_pttl.has_value());  // unreadable
    }
  }
  // A plain SET is never asked: its refusal carries nothing.
  BOOST_TEST(!rd::read_set_reply({}, null_reply, set_form::plain).holder_pttl.has_value());
}

BOOST_AUTO_TEST_CASE(a_slot_refusal_carries_every_slots_pttl) {
  const auto answer = rd::read_set_reply({}, bulk("120,-2,-1,-3"), set_form::slot);
  BOOST_TEST((answer.what == no));
  BOOST_TEST(answer.slot_ttls == (std::vector<long long>{120, -2, -1, -3}));
  // Text that is not a list of numbers is no refusal: a failure that names the reply.
  for (const char* text : {"", "12,", ",12", "1 2", "12,x"}) {
    BOOST_TEST_CONTEXT("\"" << text << "\"") {
      const auto broken = rd::read_set_reply({}, bulk(text), set_form::slot);
      BOOST_TEST((broken.what == failed));
      BOOST_TEST(broken.slot_ttls.empty());
    }
  }
  // A simple string other than OK is no list of TTLs.
  BOOST_TEST((rd::read_set_reply({}, simple("5"), set_form::slot).what == failed));
}

BOOST_AUTO_TEST_CASE(a_fenced_grant_carries_its_counter) {
  BOOST_TEST((rd::read_set_reply({}, array({bulk("42")}), set_form::fenced).counter == 42u));
  BOOST_TEST((rd::read_set_reply({}, array({bulk("9")}), set_form::fenced_slot).counter == 9u));
  BOOST_TEST(!rd::read_set_reply({}, simple("OK"), set_form::slot).counter.has_value());
  BOOST_TEST(!rd::read_set_reply({}, integer(250), set_form::fenced).counter.has_value());
}

// Counters come as decimal text and are read exactly over Redis's whole range, up to its
// ceiling 2^63 - 1 (beyond 2^53 a Lua number, and so an integer reply, would have rounded them).
// What is not a counter in that range is a failure that shows the reply, for every fenced form.
BOOST_AUTO_TEST_CASE(counters_are_read_exactly_up_to_the_ceiling) {
  const std::uint64_t exact[] = {1, 9007199254740993ULL, 9223372036854775806ULL,
                                 9223372036854775807ULL};
  for (const auto counter : exact) {
    const auto text = std::to_string(counter);
    BOOST_TEST_CONTEXT(text) {
      for (auto form : {set_form::fenced, set_form::fenced_slot, set_form::fenced_read,
                        set_form::fenced_write}) {
        BOOST_TEST((rd::read_set_reply({}, array({bulk(text)}), form).counter == counter));
      }
      const auto set = rd::read_set_reply({}, array({bulk("2"), bulk(text)}), set_form::fenced_set);
      BOOST_TEST((set.counters == std::vector<std::uint64_t>{2, counter}));
    }
  }
  for (const char* text : {"9223372036854775808", "18446744073709551616", "-1",
                           "-9223372036854775808", "07", "+7", "7 ", "", "1e3", "seven"}) {
    BOOST_TEST_CONTEXT("\"" << text << "\"") {
      for (auto form : {set_form::fenced, set_form::fenced_slot, set_form::fenced_read,
                        set_form::fenced_write}) {
        const auto answer = rd::read_set_reply({}, array({bulk(text)}), form);
        BOOST_TEST((answer.what == failed));
        BOOST_TEST(answer.detail.starts_with("unexpected reply"), answer.detail);
        BOOST_TEST(!answer.counter.has_value());
      }
      const auto set = rd::read_set_reply({}, array({bulk("2"), bulk(text)}), set_form::fenced_set);
      BOOST_TEST((set.what == failed));
      BOOST_TEST(set.counters.empty());
    }
  }
}

// A writer refused by readers holds its mark on that node; refused by another writer's key or
// mark it holds nothing there.
BOOST_AUTO_TEST_CASE(a_fenced_set_grant_carries_every_resources_counter) {
  const auto granted =
      rd::read_set_reply({}, array({bulk("3"), bulk("1"), bulk("9")}), set_form::fenced_set);
  BOOST_TEST((granted.counters == std::vector<std::uint64_t>{3, 1, 9}));
  BOOST_TEST(!granted.counter);
  const auto refused = rd::read_set_reply({}, integer(1500), set_form::fenced_set);
  BOOST_TEST(refused.counters.empty());
  BOOST_REQUIRE(refused.holder_pttl);
  BOOST_TEST(*refused.holder_pttl == 1500);
}

BOOST_AUTO_TEST_CASE(a_writers_refusal_by_readers_says_that_it_marked_the_node) {
  for (auto form : {set_form::write, set_form::fenced_write}) {
    BOOST_TEST_CONTEXT("form " << static_cast<int>(form)) {
      const auto by_readers = rd::read_set_reply({}, array({bulk("readers"), integer(900)}), form);
      BOOST_TEST(by_readers.marked);
      BOOST_TEST((by_readers.holder_pttl == 900));
      const auto by_writer = rd::read_set_reply({}, integer(400), form);
      BOOST_TEST(!by_writer.marked);
      BOOST_TEST((by_writer.holder_pttl == 400));
    }
  }
  BOOST_TEST(!rd::read_set_reply({}, integer(400), set_form::read).marked);
  BOOST_TEST((rd::read_set_reply({}, array({bulk("5")}), set_form::fenced_read).counter == 5u));
}

BOOST_AUTO_TEST_CASE(a_slot_round_names_a_disagreeing_permits_record) {
  for (auto form : {set_form::slot, set_form::fenced_slot}) {
    const auto answer = rd::read_set_reply({}, array({bulk("permits"), bulk("3")}), form);
    BOOST_TEST((answer.what == failed));
    BOOST_TEST((answer.recorded_permits == 3u));
    BOOST_TEST(answer.detail == "it records 3 permits for this semaphore");
  }
  // Only a slot round reads it so.
  const auto lock = rd::read_set_reply({}, array({bulk("permits"), bulk("3")}), set_form::plain);
  BOOST_TEST(!lock.recorded_permits.has_value());
  const auto garbled = rd::read_set_reply({}, array({bulk("permits"), bulk("3x")}), set_form::slot);
  BOOST_TEST(!garbled.recorded_permits.has_value());
}

BOOST_AUTO_TEST_CASE(a_request_error_is_a_failure_with_its_text_for_every_form) {
  for (auto form : all_forms) {
    BOOST_TEST_CONTEXT("form " << static_cast<int>(form)) {
      const auto answer = rd::read_set_reply(make_error_code(redlock::error::request_timeout),
                                             bulk("127.0.0.1:7001: timed out"), form);
      BOOST_TEST((answer.what == failed));
      BOOST_TEST(answer.detail == "127.0.0.1:7001: timed out");
      BOOST_TEST(!answer.holder_pttl.has_value());
      BOOST_TEST(!answer.counter.has_value());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_noperm_error_keeps_the_servers_words) {
  const auto answer = rd::read_set_reply(
      {}, error_reply("NOPERM this user has no permissions to access one of the keys"),
      set_form::plain);
  BOOST_TEST((answer.what == failed));
  BOOST_TEST(answer.detail.starts_with("NOPERM"));
  const auto as_answer =
      rd::make_answer(answer.what, {}, error_reply("NOPERM no"), std::string(answer.detail));
  BOOST_TEST((as_answer.failure == redlock::error::permission_denied));
  BOOST_TEST(!as_answer.unsent);
}

BOOST_AUTO_TEST_CASE(a_script_answers_one_for_done_and_zero_for_not_ours) {
  std::string detail;
  BOOST_TEST((rd::classify_script_reply({}, integer(1), detail) == yes));
  BOOST_TEST((rd::classify_script_reply({}, integer(0), detail) == no));
  BOOST_TEST((rd::classify_script_reply({}, simple("OK"), detail) == failed));
  BOOST_TEST(detail.starts_with("unexpected reply"));
}

BOOST_AUTO_TEST_CASE(a_request_that_never_reached_its_node_is_unsent) {
  using redlock::error;
  for (error_code ec :
       {make_error_code(error::not_connected), make_error_code(error::node_unresponsive)}) {
    BOOST_TEST_CONTEXT(ec.message()) {
      const auto answer = rd::make_answer(failed, ec, null_reply, "down");
      BOOST_TEST(answer.unsent);
      BOOST_TEST((answer.failure == ec));
    }
  }
  // A timeout after the write: the SET may have run, so it is not unsent.
  const auto late =
      rd::make_answer(failed, make_error_code(error::request_timeout), null_reply, "late");
  BOOST_TEST(!late.unsent);
  // A reply that is no error but of a shape no form accepts: a lasting protocol error, which ends
  // an acquire that such nodes leave without a quorum. An error reply is the server's own, and
  // may pass (OOM, LOADING): a server error.
  const auto odd = rd::make_answer(failed, {}, integer(7), "unexpected reply 7");
  BOOST_TEST((odd.failure == error::protocol_error));
  BOOST_TEST((odd.failure == redlock::condition::node_failure));
  redlock::resp::value oom;
  oom.kind = redlock::resp::type::simple_error;
  oom.text = "OOM command not allowed when used memory > 'maxmemory'.";
  const auto refused = rd::make_answer(failed, {}, oom, oom.text);
  BOOST_TEST((refused.failure == error::server_error));
  BOOST_TEST((refused.failure != redlock::condition::node_failure));
}

BOOST_AUTO_TEST_SUITE_END()
