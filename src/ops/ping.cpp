#include "ops/ping.hpp"

#include "lock_space.hpp"
#include "ops/lock_requests.hpp"
#include "ops/vote.hpp"
#include "resp/encoder.hpp"

#include <string>

namespace redlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

class ping_op final : public operation_vote {
 public:
  using operation_vote::operation_vote;

  void run() {
    static const std::string ping = [] {
      std::string command;
      resp::encode_command(command, {"PING"});
      return command;
    }();
    // Each node has node_timeout to answer, like every request, whatever its connection is
    // doing: opening it counts (a slow first connect fails the ping, and the connect goes on for
    // the next one), and a node in reconnect backoff fails at once.
    space()->nodes().send({}, ping, *this, open_ballot(), rules_of(lock_request::ping));
  }

 private:
  node_answer::kind classify(const error_code& ec, const resp::value& reply,
                             std::string& detail) override {
    if (!ec && reply.text == "PONG") return node_answer::kind::yes;
    detail = reply.text;
    return node_answer::kind::failed;
  }

  std::optional<error_code> decide(const tally& t) override {
    if (t.yes_quorum()) return error_code{};
    if (t.yes_quorum_impossible()) return make_error_code(error::no_quorum);
    return std::nullopt;
  }

  void decided(error_code ec) override { finish(ec); }
};

}  // namespace

void start_ping(const std::shared_ptr<lock_space>& space, void_caller caller) {
  auto op = std::make_shared<ping_op>(space, std::move(caller), vote_replies::own);
  if (space->closed()) return op->finish(asio::error::operation_aborted);
  op->start();
  op->run();
}

}  // namespace redlock::detail
