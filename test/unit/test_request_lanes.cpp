// The order of requests per destination on a node of several connections (a cluster's hash slot, a
// sentinel-managed master), without a socket: a request waits behind earlier ones of its lane that
// are parked, redirected or in flight on another route, and goes in its turn. Each interleaving
// the lock relies on is named by a test case.

#include "nodes/request_lanes.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace rd = redlock::detail;
using namespace std::chrono_literals;
using time_point = std::chrono::steady_clock::time_point;

struct request {
  std::string name;
  std::optional<time_point> deadline;
};

using lanes_type = rd::request_lanes<request>;
using resend = lanes_type::resend;

// A node's view: each lane's route now, and what went where, in order ("R1@1").
class node_model {
 public:
  std::optional<time_point> deadline;

  // Issues `name` in `lane`; sent at once or kept.
  void issue(const std::string& name, std::uint32_t lane = 7) {
    const auto route = routes.count(lane) != 0 ? std::optional(routes[lane]) : std::nullopt;
    const auto admitted = lanes.admit(lane, route, [&] { return request{name, deadline}; });
    tickets[name] = {lane, admitted.id};
    if (admitted.go) sent.push_back(name + "@" + std::to_string(*route));
  }
  // Its reply came.
  void answer(const std::string& name) {
    lanes.settle(tickets[name].first, tickets[name].second);
    pump();
  }
  // MOVED: the lane's route is `to` from now on, and the request follows it.
  void moved(const std::string& name, std::uint64_t to) {
    routes[tickets[name].first] = to;
    lanes.send_again(tickets[name].first, tickets[name].second, request{name, deadline},
                     resend::to_lane_route);
    pump();
  }
  // ASK: this request alone goes to `to`.
  void ask(const std::string& name, std::uint64_t to) {
    lanes.send_again_to(tickets[name].first, tickets[name].second, to, request{name, deadline});
    pump();
  }
  // Failed unsent (its route was down): parked until new routes are known.
  void unsent(const std::string& name) {
    lanes.send_again(tickets[name].first, tickets[name].second, request{name, deadline},
                     resend::after_new_routes);
    pump();
  }
  // A new topology or master: `lane` goes to `to`.
  void renew(std::uint32_t lane, std::uint64_t to) {
    routes[lane] = to;
    lanes.routes_renewed();
    pump();
  }
  void pump() {
    while (auto go = lanes.next([&](std::uint32_t lane) { return routes[lane]; })) {
      sent.push_back(go->request.name + "@" + std::to_string(go->route));
      tickets[go->request.name] = {go->lane, go->id};
    }
  }

  lanes_type lanes;
  std::map<std::uint32_t, std::uint64_t> routes{{7, 1}, {8, 1}};
  std::map<std::string, std::pair<std::uint32_t, lanes_type::ticket>> tickets;
  std::vector<std::string> sent;
};

using names = std::vector<std::string>;

}  // namespace

BOOST_AUTO_TEST_SUITE(request_lanes)

BOOST_AUTO_TEST_CASE(requests_of_a_lane_on_one_route_go_at_once) {
  node_model node;
  node.issue("SET");
  node.issue("EXTEND");
  node.issue("RELEASE");
  BOOST_TEST(node.sent == (names{"SET@1", "EXTEND@1", "RELEASE@1"}),
             boost::test_tools::per_element());
  BOOST_TEST(node.lanes.waiting() == 0u);
}

// Interleaving (a): a SET failed unsent while its master's link was down and waits for the next
// topology; the link comes back and the release that undoes the SET is issued. The release must
// not run first (the SET would then leave its key a TTL): it waits behind the SET.
BOOST_AUTO_TEST_CASE(a_request_behind_a_parked_one_waits_for_it_though_its_route_is_back) {
  node_model node;
  node.issue("SET");
  node.unsent("SET");
  node.issue("RELEASE");
  BOOST_TEST(node.sent == (names{"SET@1"}), boost::test_tools::per_element());
  BOOST_TEST(node.lanes.waiting() == 2u);
  node.renew(7, 2);
  BOOST_TEST(node.sent == (names{"SET@1", "SET@2", "RELEASE@2"}), boost::test_tools::per_element());
}

// The same with extensions: a shorter one parked must not run after a longer one issued later.
BOOST_AUTO_TEST_CASE(a_parked_extension_runs_before_the_later_one_also_on_the_same_route) {
  node_model node;
  node.issue("EXTEND-short");
  node.unsent("EXTEND-short");
  node.issue("EXTEND-long");
  node.renew(7, 1);  // the master did not move: its link is merely back
  BOOST_TEST(node.sent == (names{"EXTEND-short@1", "EXTEND-short@1", "EXTEND-long@1"}),
             boost::test_tools::per_element());
}

// Interleaving (b): a SET and an extension are in flight on the slot's old master when a MOVED
// (of another request) re-points the slot. A release issued now must not reach the new master
// before the SET that follows its own MOVED.
BOOST_AUTO_TEST_CASE(a_request_of_a_moved_slot_waits_until_the_earlier_ones_followed_their_moved) {
  node_model node;
  node.issue("SET");
  node.issue("EXTEND");
  node.routes[7] = 2;  // a MOVED answered to someone else, or a new topology
  node.issue("RELEASE");
  BOOST_TEST(node.sent == (names{"SET@1", "EXTEND@1"}), boost::test_tools::per_element());
  node.moved("SET", 2);
  BOOST_TEST(node.sent == (names{"SET@1", "EXTEND@1", "SET@2"}), boost::test_tools::per_element());
  node.moved("EXTEND", 2);
  BOOST_TEST(node.sent == (names{"SET@1", "EXTEND@1", "SET@2", "EXTEND@2", "RELEASE@2"}),
             boost::test_tools::per_element());
}

// A request still answered on the old route (it ran there) lets the ones behind it go.
BOOST_AUTO_TEST_CASE(a_request_answered_on_its_old_route_releases_the_ones_behind_it) {
  node_model node;
  node.issue("SET");
  node.routes[7] = 2;
  node.issue("RELEASE");
  node.answer("SET");
  BOOST_TEST(node.sent == (names{"SET@1", "RELEASE@2"}), boost::test_tools::per_element());
  node.answer("RELEASE");
  BOOST_TEST(node.lanes.lanes() == 0u);
}

// A settled lane is forgotten, and its place in the map may serve the next lane that opens:
// nothing of it (waiting requests, their route) may carry over, whichever lane opens next.
BOOST_AUTO_TEST_CASE(a_lane_opened_on_a_forgotten_lanes_storage_starts_empty) {
  node_model node;
  node.issue("SET-a", 7);
  node.unsent("SET-a");  // lane 7 waits for new routes
  node.issue("RELEASE-a", 7);
  node.renew(7, 2);
  node.answer("SET-a");
  node.answer("RELEASE-a");
  BOOST_TEST(node.lanes.lanes() == 0u);
  // Lane 8 opens on lane 7's storage: its request goes at once on its own route.
  node.issue("SET-b", 8);
  BOOST_TEST(node.sent == (names{"SET-a@1", "SET-a@2", "RELEASE-a@2", "SET-b@1"}),
             boost::test_tools::per_element());
  // Lane 7 opens again, fresh: it does not wait for anything of before.
  node.issue("SET-c", 7);
  BOOST_TEST(node.sent.back() == "SET-c@2");
  BOOST_TEST(node.lanes.waiting() == 0u);
  node.answer("SET-b");
  node.answer("SET-c");
  BOOST_TEST(node.lanes.lanes() == 0u);
}

// Lanes are kept by id in places that closed lanes leave to the next ones: with lanes of ids
// from 0 to the cluster's keyless lane opened and closed in a scrambled order, each keeps only its
// own requests, and a place taken again starts empty.
BOOST_AUTO_TEST_CASE(many_lanes_opened_and_closed_in_any_order_keep_their_own_requests) {
  node_model node;
  std::vector<std::uint32_t> ids;
  for (std::uint32_t i = 0; i < 300; ++i)
    ids.push_back((i * 7919u) % 16385u);  // distinct ids, scattered up to 16 384
  for (const auto id : ids)
    node.routes[id] = 1;
  // Every third lane's first request fails unsent, so the one behind it waits.
  for (std::size_t i = 0; i < ids.size(); ++i) {
    node.issue("SET-" + std::to_string(i), ids[i]);
    if (i % 3 == 0) node.unsent("SET-" + std::to_string(i));
    node.issue("RELEASE-" + std::to_string(i), ids[i]);
  }
  BOOST_TEST(node.lanes.lanes() == ids.size());
  BOOST_TEST(node.lanes.waiting() == 200u);  // 100 parked SETs and the 100 RELEASEs behind them
  // Lanes with nothing waiting close, from the last one opened.
  for (std::size_t i = ids.size(); i-- > 0;) {
    if (i % 3 == 0) continue;
    node.answer("SET-" + std::to_string(i));
    node.answer("RELEASE-" + std::to_string(i));
  }
  BOOST_TEST(node.lanes.lanes() == 100u);
  // New lanes take the closed lanes' places: they go at once, waiting for nothing of before.
  const auto sent_before = node.sent.size();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i % 3 != 0) node.issue("PING-" + std::to_string(i), ids[i]);
  }
  BOOST_TEST(node.sent.size() == sent_before + 200u);
  BOOST_TEST(node.lanes.waiting() == 200u);
  // New routes: in each waiting lane, its SET, then its RELEASE, and nothing of another lane.
  for (std::size_t i = 0; i < ids.size(); i += 3)
    node.routes[ids[i]] = 2;
  node.lanes.routes_renewed();
  node.pump();
  BOOST_TEST(node.lanes.waiting() == 0u);
  std::map<std::string, std::size_t> position;
  for (std::size_t at = 0; at < node.sent.size(); ++at)
    position[node.sent[at]] = at;
  for (std::size_t i = 0; i < ids.size(); i += 3) {
    const auto set = position.find("SET-" + std::to_string(i) + "@2");
    const auto release = position.find("RELEASE-" + std::to_string(i) + "@2");
    BOOST_REQUIRE(set != position.end());
    BOOST_REQUIRE(release != position.end());
    BOOST_TEST(set->second < release->second);
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i % 3 == 0) {
      node.answer("SET-" + std::to_string(i));
      node.answer("RELEASE-" + std::to_string(i));
    } else {
      node.answer("PING-" + std::to_string(i));
    }
  }
  BOOST_TEST(node.lanes.lanes() == 0u);
}

BOOST_AUTO_TEST_CASE(lanes_do_not_wait_for_each_other) {
  node_model node;
  node.issue("SET-a", 7);
  node.unsent("SET-a");
  node.issue("SET-b", 8);
  node.issue("RELEASE-a", 7);
  BOOST_TEST(node.sent == (names{"SET-a@1", "SET-b@1"}), boost::test_tools::per_element());
}

// ASK sends one request to the slot's importing node; later ones wait for its answer, since they
// may be asked there too.
BOOST_AUTO_TEST_CASE(an_ask_goes_to_its_target_and_later_requests_wait_for_its_answer) {
  node_model node;
  node.issue("SET");
  node.ask("SET", 3);
  node.issue("RELEASE");
  BOOST_TEST(node.sent == (names{"SET@1", "SET@3"}), boost::test_tools::per_element());
  node.answer("SET");
  BOOST_TEST(node.sent == (names{"SET@1", "SET@3", "RELEASE@1"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_request_issued_before_any_route_waits_for_one) {
  node_model node;
  node.routes.clear();
  node.issue("SET");
  node.issue("RELEASE");
  BOOST_TEST(node.sent.empty());
  node.renew(7, 4);
  BOOST_TEST(node.sent == (names{"SET@4", "RELEASE@4"}), boost::test_tools::per_element());
}

// A waiting request leaves at its deadline, so a request parked for a route that never comes
// cannot hold its lane for ever; what waited behind it goes then.
BOOST_AUTO_TEST_CASE(a_waiting_request_leaves_at_its_deadline_and_the_next_one_goes) {
  node_model node;
  const auto start = time_point{} + 1h;
  node.deadline = start + 100ms;
  node.issue("SET");
  node.unsent("SET");
  node.deadline = start + 300ms;
  node.issue("RELEASE");
  std::vector<std::string> expired;
  const auto collect = [&](std::uint32_t, request& r) { expired.push_back(r.name); };
  BOOST_TEST((node.lanes.expire(start, collect) == start + 100ms));
  BOOST_TEST(expired.empty());
  BOOST_TEST((node.lanes.expire(start + 100ms, collect) == start + 300ms));
  BOOST_TEST(expired == (names{"SET"}), boost::test_tools::per_element());
  node.pump();
  BOOST_TEST(node.sent == (names{"SET@1", "RELEASE@1"}), boost::test_tools::per_element());
  BOOST_TEST(!node.lanes.expire(start + 1s, collect).has_value());
}

BOOST_AUTO_TEST_CASE(a_closing_node_takes_every_waiting_request_in_order) {
  node_model node;
  node.issue("SET");
  node.unsent("SET");
  node.issue("EXTEND");
  node.issue("RELEASE", 8);
  node.routes[8] = 5;
  node.issue("PING", 8);
  const auto taken = node.lanes.take_waiting();
  names taken_names;
  for (const auto& r : taken)
    taken_names.push_back(r.name);
  // Lane by lane; within one, in the order issued. RELEASE is in flight and stays.
  BOOST_TEST(taken_names.size() == 3u);
  BOOST_TEST(node.lanes.waiting() == 0u);
  node.answer("RELEASE");
  BOOST_TEST(node.lanes.lanes() == 0u);
  BOOST_TEST(node.sent == (names{"SET@1", "RELEASE@1"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
