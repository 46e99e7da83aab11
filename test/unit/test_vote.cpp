// The vote behind every fan-out: decided once per ballot at the earliest certain moment, late
// answers of an earlier ballot ignored, and kept alive exactly while requests may still answer.

#include <boost/test/unit_test.hpp>

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "support/printing.hpp"
#include "vote.hpp"

namespace redlock::detail {
// For Boost.Test's messages.
std::ostream& boost_test_print_type(std::ostream& out, node_answer::kind kind) {
  constexpr const char* names[] = {"pending", "yes", "no", "failed"};
  return out << names[static_cast<int>(kind)];
}
}  // namespace redlock::detail

namespace {
namespace rd = redlock::detail;
using boost::system::error_code;

// Yes for "+OK", no for a null reply, failed otherwise; decides at a yes quorum or once a yes
// quorum is out of reach, and records every decision.
class grant_vote final : public rd::vote, public std::enable_shared_from_this<grant_vote> {
 public:
  explicit grant_vote(std::size_t nodes) : vote(nodes) {}

  std::size_t next_ballot() { return open_ballot(); }

  std::vector<error_code> outcomes;

 private:
  std::shared_ptr<void> owner() override { return shared_from_this(); }

  rd::node_answer::kind classify(error_code ec, const redlock::resp::value& reply,
                                 std::string& detail) override {
    if (ec) {
      detail = "transport";
      return rd::node_answer::kind::failed;
    }
    if (reply.kind == redlock::resp::type::simple_string) return rd::node_answer::kind::yes;
    if (reply.is_null()) return rd::node_answer::kind::no;
    return rd::node_answer::kind::failed;
  }

  std::optional<error_code> decide(const rd::tally& t) override {
    if (t.yes_quorum()) return error_code{};
    if (t.yes_quorum_impossible()) return make_error_code(redlock::error::contended);
    return std::nullopt;
  }

  void decided(error_code outcome) override { outcomes.push_back(outcome); }
};

redlock::resp::value ok() {
  redlock::resp::value v;
  v.kind = redlock::resp::type::simple_string;
  v.text = "OK";
  return v;
}

redlock::resp::value null() {
  return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(vote)

BOOST_AUTO_TEST_CASE(decides_once_at_the_earliest_certain_moment) {
  auto v = std::make_shared<grant_vote>(5);
  const std::size_t first = v->next_ballot();
  v->on_reply(first + 0, {}, ok());
  v->on_reply(first + 3, {}, null());
  v->on_reply(first + 1, {}, ok());
  BOOST_TEST(v->outcomes.empty());
  v->on_reply(first + 4, {}, ok());
  BOOST_REQUIRE(v->outcomes.size() == 1u);
  BOOST_TEST(!v->outcomes.front());
  // The last node still answers; the outcome stands.
  v->on_reply(first + 2, {}, null());
  BOOST_TEST(v->outcomes.size() == 1u);
  BOOST_TEST(v->votes().no_count() == 2u);
  BOOST_TEST(v->answers()[2].what == rd::node_answer::kind::no);
}

BOOST_AUTO_TEST_CASE(late_answers_of_an_earlier_ballot_are_ignored) {
  auto v = std::make_shared<grant_vote>(3);
  const std::size_t first = v->next_ballot();
  v->on_reply(first + 0, {}, null());
  v->on_reply(first + 1, {}, null());
  BOOST_REQUIRE(v->outcomes.size() == 1u);
  BOOST_TEST(v->outcomes.back() == redlock::error::contended);

  const std::size_t second = v->next_ballot();
  BOOST_TEST(second != first);
  BOOST_TEST(v->votes().pending() == 3u);
  // Node 2's answer to the first ballot arrives during the second: it must not count.
  v->on_reply(first + 2, {}, ok());
  BOOST_TEST(v->votes().pending() == 3u);
  v->on_reply(second + 0, {}, ok());
  v->on_reply(second + 2, boost::asio::error::operation_aborted, null());
  BOOST_TEST(v->answers()[2].what == rd::node_answer::kind::failed);
  BOOST_TEST(v->answers()[2].detail == "transport");
  v->on_reply(second + 1, {}, ok());
  BOOST_REQUIRE(v->outcomes.size() == 2u);
  BOOST_TEST(!v->outcomes.back());
}

BOOST_AUTO_TEST_CASE(stays_alive_while_requests_may_answer) {
  auto v = std::make_shared<grant_vote>(2);
  std::weak_ptr<grant_vote> watch = v;
  {
    rd::sink_ref first_request(v.get());
    rd::sink_ref second_request(first_request);
    v.reset();  // the operation lets go; the requests still hold it
    BOOST_TEST(!watch.expired());
    first_request.reset();
    BOOST_TEST(!watch.expired());
  }
  BOOST_TEST(watch.expired());
}

BOOST_AUTO_TEST_SUITE_END()
