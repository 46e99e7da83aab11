#include "nodes/forwarded_request.hpp"

#include "redlock/error.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

namespace redlock::detail {

resp::value error_reply(std::string text) {
  resp::value reply;
  reply.kind = resp::type::simple_error;
  reply.text = std::move(text);
  return reply;
}

void answer_later(const boost::asio::any_io_executor& executor, sink_ref sink, std::size_t tag,
                  boost::system::error_code ec, std::string text) {
  boost::asio::post(executor, [sink = std::move(sink), tag, ec, text = std::move(text)]() mutable {
    sink->on_reply(tag, ec, error_reply(std::move(text)));
  });
}

bool sent_nowhere(boost::system::error_code ec) noexcept {
  // A closed connection answers operation_aborted also for requests it had written: not unsent.
  if (ec == boost::asio::error::operation_aborted) return false;
  // Connects that failed report the system's (or the resolver's) code.
  return ec == error::not_connected || ec == error::connect_timeout ||
         ec.category() == boost::system::system_category() ||
         ec.category() == boost::asio::error::get_netdb_category();
}

bool may_send_again(boost::system::error_code ec, const request_options& rules) noexcept {
  return sent_nowhere(ec) || (ec == error::connection_lost && rules.deliver_for.count() > 0);
}

}  // namespace redlock::detail
