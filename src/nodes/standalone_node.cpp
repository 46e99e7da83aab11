#include "nodes/standalone_node.hpp"

#include "nodes/replica_wait.hpp"

#include <optional>
#include <utility>

namespace redlock::detail {

namespace {

using boost::system::error_code;

// A write and the WAIT behind it on one connection: the operation's sink gets one answer, once
// both replies are in (after_replica_wait).
class replicated_write final : public reply_sink {
 public:
  replicated_write(sink_ref inner, std::size_t tag, unsigned wanted, std::string server,
                   bool (*counts)(const resp::value&))
      : inner_(std::move(inner)),
        tag_(tag),
        wanted_(wanted),
        server_(std::move(server)),
        counts_(counts) {}

  void on_reply(std::size_t which, const error_code& ec, const resp::value& reply) override {
    (which == 0 ? write_ : wait_).emplace(ec, reply);
    if (!write_ || !wait_) return;
    const auto answer = after_replica_wait(write_->first, write_->second, wait_->first,
                                           wait_->second, wanted_, server_, counts_);
    inner_->on_reply(tag_, answer.ec, answer.reply);
  }
  void last_reference_dropped() noexcept override { delete this; }

 private:
  sink_ref inner_;
  std::size_t tag_;
  unsigned wanted_;
  std::string server_;
  bool (*counts_)(const resp::value&);
  std::optional<std::pair<error_code, resp::value>> write_, wait_;
};

}  // namespace

standalone_node::standalone_node(const boost::asio::any_io_executor& executor, node_config config,
                                 connection_options settings)
    : lock_node(config),
      executor_(executor),
      subscriber_settings_(connection_options::for_subscriber(settings)),
      conn_(connection::create(executor, std::move(config), std::move(settings))) {
  // exec adds nothing to the connection's own exec_direct unless writes wait for replicas.
  if (this->config().wait_replicas == 0) set_direct_connection(conn_.get());
}

standalone_node::~standalone_node() {
  unsubscribe_releases();
}

template <typename Payload>
void standalone_node::send(const request& what, const Payload& payload, reply_sink& sink,
                           std::size_t tag, std::chrono::steady_clock::time_point now) {
  if (what.replicas == 0) return conn_->exec_direct(payload, what.rules, sink, tag, now);
  sink_ref paired(new replicated_write(sink_ref(&sink), tag, what.replicas, config().address(),
                                       what.rules.counts_once_replicated));
  conn_->exec_direct(payload, what.rules, *paired.get(), 0, now);
  request_options wait_rules = what.rules;
  wait_rules.eval_fallback = nullptr;
  wait_rules.noscript_is_final = false;
  conn_->exec_direct(wait_command(what.replicas, what.rules.timeout), wait_rules, *paired.get(), 1,
                     now);
}

void standalone_node::exec(const request& what, std::string_view payload, reply_sink& sink,
                           std::size_t tag, std::chrono::steady_clock::time_point now) {
  send(what, payload, sink, tag, now);
}

void standalone_node::exec(const request& what, const shared_payload& payload, reply_sink& sink,
                           std::size_t tag, std::chrono::steady_clock::time_point now) {
  send(what, payload, sink, tag, now);
}

void standalone_node::subscribe_releases(const std::string& channel, announcement_events on) {
  unsubscribe_releases();
  releases_ =
      release_subscription::open(executor_, config(), subscriber_settings_, channel, std::move(on));
}

void standalone_node::unsubscribe_releases() {
  if (releases_) releases_->close();
  releases_.reset();
}

subscription_state standalone_node::releases_subscription(std::string_view) const {
  return releases_ ? releases_->state() : subscription_state::off;
}

}  // namespace redlock::detail
