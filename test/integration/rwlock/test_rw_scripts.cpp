// The read-write lock's scripts on a real server: readers share, a writer is alone, a writer that
// finds readers marks the lock so that new readers queue behind it, each reader's hold expires on
// its own, and releases are token-checked and announce when a writer may win.
#include "integration/prelude.hpp"
#include "lock/key_names.hpp"
#include "lock/scripts.hpp"
#include "support/eval_script.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

namespace d = redlock::detail;
using redlock::resp::type;
using redlock::resp::value;
using namespace std::chrono_literals;

const std::string writer_key = d::rw_writer_key("doc");
const std::string readers_key = d::rw_readers_key("doc");
const std::string mark_key = d::rw_mark_key("doc");
const std::string counter_key = d::fencing_counter_key("doc");

value eval(sync_client& c, const d::script& lua, const std::vector<std::string>& keys,
           const std::vector<std::string>& args) {
  return redlock::test::eval_script(c, lua, keys, args);
}

value acquire(sync_client& c, const d::script& lua, const std::string& token,
              const std::string& ttl, bool fenced, const std::string& mark_id = "") {
  std::vector<std::string> keys = {writer_key, readers_key, mark_key};
  std::vector<std::string> args = {token, ttl, fenced ? "1" : "0"};
  if (fenced) keys.push_back(counter_key);
  if (!mark_id.empty()) args.push_back(mark_id);
  return eval(c, lua, keys, args);
}

value read(sync_client& c, const std::string& token, const std::string& ttl = "10000",
           bool fenced = false) {
  return acquire(c, d::rw_read_acquire_script(), token, ttl, fenced);
}

// The writer's mark id is its token unless given: each round of one acquire has a token of its
// own and the acquire's one mark id.
value write(sync_client& c, const std::string& token, const std::string& ttl = "10000",
            bool fenced = false, const std::string& mark_id = "") {
  return acquire(c, d::rw_write_acquire_script(), token, ttl, fenced,
                 mark_id.empty() ? token : mark_id);
}

value release_reader(sync_client& c, const std::string& token, const std::string& channel = "") {
  return eval(c, d::rw_read_release_script(), {readers_key}, {token, channel, "", "doc-free"});
}

value release_writer(sync_client& c, const std::string& token, const std::string& channel = "",
                     const std::string& mark_id = "") {
  return eval(c, d::rw_write_release_script(), {writer_key, mark_key},
              {token, channel, "", "doc-free", mark_id.empty() ? token : mark_id});
}

using redlock::test::granted;

// A refusal that carries a PTTL: the time left of the key that refused.
long long refused_for(const value& reply) {
  BOOST_TEST_REQUIRE((reply.kind == type::integer), redlock::resp::to_debug_string(reply));
  return reply.integer;
}

// A writer's refusal by live readers: {"readers", ms until the last reader's deadline}.
long long refused_by_readers(const value& reply) {
  BOOST_TEST_REQUIRE((reply.kind == type::array && reply.elements.size() == 2u),
                     redlock::resp::to_debug_string(reply));
  BOOST_TEST(reply.elements[0].text == "readers");
  BOOST_TEST_REQUIRE((reply.elements[1].kind == type::integer));
  return reply.elements[1].integer;
}

using redlock::test::pttl;

}  // namespace

BOOST_AUTO_TEST_SUITE(rw_scripts)

BOOST_AUTO_TEST_CASE(the_keys_of_one_lock_share_its_hash_slot) {
  BOOST_TEST(writer_key == "{doc}:write");
  BOOST_TEST(readers_key == "{doc}:read");
  BOOST_TEST(mark_key == "{doc}:write-waiting");
  BOOST_TEST(d::rw_writer_key("a{t}b") == "a{t}b:write");
}

BOOST_AUTO_TEST_CASE(readers_share_and_a_writer_waits_for_them_with_its_mark) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  BOOST_TEST(granted(read(c, "r1", "5000")));
  BOOST_TEST(granted(read(c, "r2", "8000")));
  BOOST_TEST(c.command({"ZCARD", readers_key}).integer == 2);
  // The set lives until its last reader's deadline.
  BOOST_TEST(pttl(c, readers_key) > 5000);  // r2's 8 s, not r1's 5 s
  BOOST_TEST(pttl(c, readers_key) <= 8000);

  // The writer is refused until the last reader's deadline, and marks the lock.
  const long long wait = refused_by_readers(write(c, "w1", "4000"));
  BOOST_TEST(wait > 5000);
  BOOST_TEST(wait <= 8000);
  BOOST_TEST(c.command({"GET", mark_key}).text == "w1");
  BOOST_TEST(pttl(c, mark_key) > 2000);
  BOOST_TEST(c.command({"EXISTS", writer_key}).integer == 0);

  // A new reader queues behind the mark; a second writer too.
  const long long behind_mark = refused_for(read(c, "r3"));
  BOOST_TEST(behind_mark > 2000);
  BOOST_TEST(behind_mark <= 4000);
  BOOST_TEST(refused_for(write(c, "w2")) > 2000);
  BOOST_TEST(c.command({"GET", mark_key}).text == "w1");

  // The readers leave; the marked writer wins and its mark is gone.
  BOOST_TEST(release_reader(c, "r1").integer == 1);
  refused_by_readers(write(c, "w1", "4000"));
  BOOST_TEST(release_reader(c, "r2").integer == 1);
  BOOST_TEST(granted(write(c, "w1", "4000")));
  BOOST_TEST(c.command({"GET", writer_key}).text == "w1");
  BOOST_TEST(c.command({"EXISTS", mark_key}).integer == 0);
  BOOST_TEST(c.command({"EXISTS", readers_key}).integer == 0);

  // While it writes, readers and writers are refused with its PTTL.
  BOOST_TEST(refused_for(read(c, "r4")) > 2000);
  BOOST_TEST(refused_for(write(c, "w2")) > 2000);
  BOOST_TEST(release_writer(c, "w1").integer == 1);
  BOOST_TEST(granted(read(c, "r4")));
}

BOOST_AUTO_TEST_CASE(a_reader_past_its_deadline_stops_counting_without_anyone_releasing_it) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  BOOST_TEST(granted(read(c, "short", "150")));
  BOOST_TEST(granted(read(c, "long", "10000")));
  refused_by_readers(write(c, "w"));
  BOOST_TEST(release_reader(c, "long").integer == 1);
  std::this_thread::sleep_for(300ms);
  // Only the expired reader is left: it no longer counts, and the marked writer wins.
  BOOST_TEST(granted(write(c, "w")));
  // Extending or releasing the expired reader finds nothing.
  BOOST_TEST(eval(c, d::rw_read_extend_script(), {readers_key}, {"short", "10000"}).integer == 0);
  BOOST_TEST(release_reader(c, "short").integer == 0);
}

BOOST_AUTO_TEST_CASE(renewing_one_reader_never_keeps_another_alive) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  BOOST_TEST(granted(read(c, "a", "200")));
  BOOST_TEST(granted(read(c, "b", "200")));
  BOOST_TEST(eval(c, d::rw_read_extend_script(), {readers_key}, {"b", "10000"}).integer == 1);
  BOOST_TEST(pttl(c, readers_key) > 5000);
  std::this_thread::sleep_for(350ms);
  BOOST_TEST(eval(c, d::rw_read_extend_script(), {readers_key}, {"a", "10000"}).integer == 0);
  // b alone still reads: a writer waits for it, not for a.
  const long long wait = refused_by_readers(write(c, "w"));
  BOOST_TEST(wait > 5000);
  // Another token's extension never creates an entry.
  BOOST_TEST(eval(c, d::rw_read_extend_script(), {readers_key}, {"z", "10000"}).integer == 0);
  BOOST_TEST(c.command({"ZSCORE", readers_key, "z"}).is_null());
}

BOOST_AUTO_TEST_CASE(releases_are_token_checked) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  BOOST_TEST(granted(write(c, "w1")));
  BOOST_TEST(release_writer(c, "other").integer == 0);
  BOOST_TEST(c.command({"GET", writer_key}).text == "w1");
  BOOST_TEST(release_reader(c, "w1").integer == 0);
  BOOST_TEST(release_writer(c, "w1").integer == 1);

  // A writer that gives up deletes its own mark, never another's.
  BOOST_TEST(granted(read(c, "r")));
  refused_by_readers(write(c, "w2"));
  BOOST_TEST(release_writer(c, "w3").integer == 0);
  BOOST_TEST(c.command({"GET", mark_key}).text == "w2");
  BOOST_TEST(release_writer(c, "w2").integer == 0);  // it held no write lock
  BOOST_TEST(c.command({"EXISTS", mark_key}).integer == 0);
  BOOST_TEST(granted(read(c, "r2")));  // readers come in again
}

BOOST_AUTO_TEST_CASE(a_writers_rounds_share_its_mark_and_a_round_cleanup_keeps_it) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  BOOST_TEST(granted(read(c, "r")));
  // Round 1 (token t1) marks the lock with the acquire's mark id.
  refused_by_readers(write(c, "t1", "10000", false, "waiter"));
  BOOST_TEST(c.command({"GET", mark_key}).text == "waiter");
  // Its cleanup deletes only what the round's token holds: the mark stays.
  BOOST_TEST(release_writer(c, "t1", "", "-").integer == 0);
  BOOST_TEST(c.command({"GET", mark_key}).text == "waiter");
  // Round 2 has a token of its own and passes its own mark; another writer does not.
  BOOST_TEST(refused_for(write(c, "u1", "10000", false, "rival")) > 0);
  refused_by_readers(write(c, "t2", "10000", false, "waiter"));
  BOOST_TEST(release_reader(c, "r").integer == 1);
  BOOST_TEST(granted(write(c, "t3", "10000", false, "waiter")));
  BOOST_TEST(c.command({"GET", writer_key}).text == "t3");
  BOOST_TEST(c.command({"EXISTS", mark_key}).integer == 0);
}

BOOST_AUTO_TEST_CASE(with_fencing_writers_take_increasing_tokens_and_readers_see_the_last) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  const auto first_read = read(c, "r0", "10000", true);
  BOOST_TEST_REQUIRE((first_read.kind == type::array && first_read.elements.size() == 1u));
  BOOST_TEST(first_read.elements[0].text == "0");
  BOOST_TEST(release_reader(c, "r0").integer == 1);

  const auto first = write(c, "w1", "10000", true);
  BOOST_TEST_REQUIRE((first.kind == type::array && first.elements.size() == 1u));
  BOOST_TEST(first.elements[0].text == "1");
  BOOST_TEST(refused_for(write(c, "w2", "10000", true)) > 0);  // no increment when refused
  BOOST_TEST(release_writer(c, "w1").integer == 1);
  BOOST_TEST(write(c, "w2", "10000", true).elements[0].text == "2");
  BOOST_TEST(release_writer(c, "w2").integer == 1);

  const auto seen = read(c, "r1", "10000", true);
  BOOST_TEST(seen.elements[0].text == "2");
  BOOST_TEST(c.command({"GET", counter_key}).text == "2");  // a reader takes no token
}

// The last live reader's release, and a writer's, are announced; a reader's release that leaves
// others reading is not (no writer could win by it).
BOOST_AUTO_TEST_CASE(a_release_that_may_let_a_writer_in_is_announced) {
  redlock::test::redis_server server;
  sync_client c(server.port());
  sync_client listener(server.port());
  BOOST_TEST_REQUIRE((listener.command({"SUBSCRIBE", "doc-channel"}).kind == type::array));
  // In subscribed mode PING answers ["pong", ""]: a message published before it comes first, and
  // then the pong is read too. Empty when nothing was published.
  const auto next_message = [&] {
    const auto got = listener.command({"PING"});
    BOOST_TEST_REQUIRE((got.kind == type::array && !got.elements.empty()));
    if (got.elements[0].text != "message") return std::string();
    BOOST_TEST(listener.next_reply().elements.at(0).text == "pong");
    return got.elements.back().text;
  };

  BOOST_TEST(granted(read(c, "r1")));
  BOOST_TEST(granted(read(c, "r2")));
  BOOST_TEST(release_reader(c, "r1", "doc-channel").integer == 1);
  BOOST_TEST(next_message().empty());  // r2 still reads
  BOOST_TEST(release_reader(c, "r2", "doc-channel").integer == 1);
  BOOST_TEST(next_message() == "doc-free");

  BOOST_TEST(granted(write(c, "w")));
  BOOST_TEST(release_writer(c, "w", "doc-channel").integer == 1);
  BOOST_TEST(next_message() == "doc-free");
  BOOST_TEST(release_writer(c, "w", "doc-channel").integer == 0);  // nothing left to delete
  BOOST_TEST(next_message().empty());
}

BOOST_AUTO_TEST_SUITE_END()
