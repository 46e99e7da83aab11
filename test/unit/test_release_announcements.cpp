// release_announcements over nodes that the test plays: the interest that subscribes and
// unsubscribes every node, covers and settled read from the nodes' states, announcements gathered
// and delivered once each by one posted handler, and the events of an earlier subscription void.
#include "nodes/release_announcements.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace redlock::detail {

namespace {

// A node whose subscription is whatever the test says; it records what it was asked.
class played_node final : public lock_node {
 public:
  played_node() : lock_node(node_config::from_url("redis://127.0.0.1:6379")) {}

  void exec(const request&, std::string_view, reply_sink&, std::size_t,
            std::chrono::steady_clock::time_point) override {}
  void exec(const request&, const shared_payload&, reply_sink&, std::size_t,
            std::chrono::steady_clock::time_point) override {}
  boost::system::error_code permanent_failure() const noexcept override { return {}; }
  const std::string& last_error() const noexcept override { return no_error_; }
  void close_when_idle(std::chrono::milliseconds) override {}

  void subscribe_releases(const std::string& channel, announcement_events on) override {
    ++subscribed;
    channel_ = channel;
    on_ = std::move(on);
    state = subscription_state::connecting;
  }
  void unsubscribe_releases() override {
    ++unsubscribed;
    state = subscription_state::off;
  }
  void want_releases(std::string_view resource) override { ++wanted[std::string(resource)]; }
  void unwant_releases(std::string_view resource) override { --wanted[std::string(resource)]; }
  subscription_state releases_subscription(std::string_view) const override { return state; }

  // What the node was told to report to, at its last subscribe (kept after unsubscribe, so that
  // a test can play a late event of that subscription).
  const announcement_events& events() const { return on_; }
  const std::string& channel() const { return channel_; }

  int subscribed = 0;
  int unsubscribed = 0;
  std::map<std::string, int> wanted;
  subscription_state state = subscription_state::off;

 private:
  std::string no_error_;
  std::string channel_;
  announcement_events on_;
};

struct three_node_set {
  boost::asio::io_context io;
  std::vector<std::unique_ptr<played_node>> nodes;
  std::vector<std::pair<std::size_t, std::string>> released;
  std::vector<std::pair<std::size_t, bool>> links;
  std::string unwanted = "nobody-waits";
  std::shared_ptr<release_announcements> announcements;

  three_node_set() {
    std::vector<lock_node*> seam;
    for (int i = 0; i < 3; ++i) {
      nodes.push_back(std::make_unique<played_node>());
      seam.push_back(nodes.back().get());
    }
    release_announcements::events on;
    on.released = [this](std::size_t node, std::string_view resource) {
      released.emplace_back(node, std::string(resource));
    };
    on.wanted = [this](std::string_view resource) { return resource != unwanted; };
    on.link_changed = [this](std::size_t node, bool up, std::optional<std::uint16_t>) {
      links.emplace_back(node, up);
    };
    announcements =
        release_announcements::create(io.get_executor(), seam, "released", std::move(on));
  }

  void set_all(subscription_state state) {
    for (auto& node : nodes)
      node->state = state;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(release_announcements_tests)

BOOST_AUTO_TEST_CASE(the_first_interest_subscribes_every_node_and_the_last_unsubscribes) {
  three_node_set t;
  BOOST_TEST(t.nodes[0]->subscribed == 0, "nothing is subscribed before anyone waits");
  t.announcements->retain("a");
  t.announcements->retain("b");
  t.announcements->retain("a");
  for (auto& node : t.nodes) {
    BOOST_TEST(node->subscribed == 1);
    BOOST_TEST(node->channel() == "released");
    BOOST_TEST(node->wanted["a"] == 2, "each interest is told to the node (a cluster's slots)");
    BOOST_TEST(node->wanted["b"] == 1);
  }
  t.announcements->release("a");
  t.announcements->release("b");
  BOOST_TEST(t.nodes[1]->unsubscribed == 0);
  BOOST_TEST(t.announcements->interest() == 1u);
  t.announcements->release("a");
  for (auto& node : t.nodes) {
    BOOST_TEST(node->unsubscribed == 1);
    BOOST_TEST(node->wanted["a"] == 0);
  }
  t.announcements->release("a");  // more releases than retains: nothing
  BOOST_TEST(t.nodes[0]->unsubscribed == 1);
}

BOOST_AUTO_TEST_CASE(covers_and_settled_read_every_nodes_state_for_the_resource) {
  three_node_set t;
  t.set_all(subscription_state::subscribed);
  BOOST_TEST(!t.announcements->covers("a"), "nobody listens: nothing is covered");
  t.announcements->retain("a");
  BOOST_TEST(!t.announcements->covers("a"));
  BOOST_TEST(!t.announcements->settled("a"), "every node is in its first attempt");
  t.set_all(subscription_state::subscribed);
  t.nodes[2]->state = subscription_state::connecting;
  BOOST_TEST(!t.announcements->covers("a"));
  BOOST_TEST(!t.announcements->settled("a"));
  t.nodes[2]->state = subscription_state::down;
  BOOST_TEST(!t.announcements->covers("a"), "a release on the node that is down goes unheard");
  BOOST_TEST(t.announcements->settled("a"), "nothing more to wait for");
  t.nodes[2]->state = subscription_state::subscribed;
  BOOST_TEST(t.announcements->covers("a"));
  BOOST_TEST(t.announcements->settled("a"));
}

BOOST_AUTO_TEST_CASE(announcements_are_gathered_and_delivered_once_each_by_one_handler) {
  three_node_set t;
  t.announcements->retain("a");
  t.nodes[0]->events().heard("a");
  t.nodes[0]->events().heard("a");
  t.nodes[1]->events().heard("a");
  t.nodes[1]->events().heard(t.unwanted);
  BOOST_TEST(t.released.empty(), "never delivered inside the read loop");
  BOOST_TEST(t.io.poll() == 1u, "one posted handler");
  const std::vector<std::pair<std::size_t, std::string>> expected{{0, "a"}, {1, "a"}};
  BOOST_TEST((t.released == expected));
  t.nodes[2]->events().heard("a");
  t.io.restart();
  t.io.poll();
  BOOST_TEST(t.released.size() == 3u, "heard again after a delivery: delivered again");
}

BOOST_AUTO_TEST_CASE(events_of_an_earlier_subscription_are_void) {
  three_node_set t;
  t.announcements->retain("a");
  const announcement_events earlier = t.nodes[0]->events();
  earlier.heard("a");  // read, not yet delivered, when the interest ends
  t.announcements->release("a");
  t.announcements->retain("a");
  earlier.link_changed(true, std::nullopt);
  earlier.heard("a");
  t.io.restart();
  t.io.poll();
  BOOST_TEST(t.released.empty());
  BOOST_TEST(t.links.empty());
  t.nodes[0]->events().link_changed(false, std::uint16_t{7});
  t.nodes[0]->events().heard("a");
  t.io.restart();
  t.io.poll();
  BOOST_TEST(t.links.size() == 1u, "the current subscription's events go through");
  BOOST_TEST(t.released.size() == 1u);
}

BOOST_AUTO_TEST_CASE(after_close_nothing_is_subscribed_again) {
  three_node_set t;
  t.announcements->retain("a");
  t.announcements->close();
  for (auto& node : t.nodes)
    BOOST_TEST(node->unsubscribed == 1);
  t.announcements->retain("b");
  BOOST_TEST(t.nodes[0]->subscribed == 1);
  BOOST_TEST(t.announcements->settled("b"), "no announcements to wait for");
  BOOST_TEST(!t.announcements->covers("b"));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace redlock::detail
