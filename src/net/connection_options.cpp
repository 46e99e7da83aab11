#include "net/connection_options.hpp"

#include <algorithm>

namespace redlock::detail {

resp::parser_limits limits_for(const reply_limits& replies) {
  resp::parser_limits limits;
  limits.max_depth = replies.max_depth;
  limits.max_reply_memory = replies.max_reply_memory;
  // What the memory bound implies for the other limits: no piece of a reply can be larger than
  // the reply may take in memory, nor hold more elements than fit in it.
  limits.max_reply_size = replies.max_reply_memory;
  limits.max_bulk_length = replies.max_reply_memory;
  limits.max_line_length = std::min(limits.max_line_length, replies.max_reply_memory);
  limits.max_aggregate_size = replies.max_reply_memory / sizeof(resp::value);
  // The reader parses every complete reply before it reads again, so what is buffered then is at
  // most one unfinished reply; a read adds one chunk.
  limits.max_buffer = replies.max_reply_memory + 2 * connection_read_chunk;
  return limits;
}

connection_options connection_options::from(const client_options& options) {
  connection_options result;
  result.connect_timeout = options.connect_timeout;
  result.reconnect = options.reconnect;
  result.health_check_timeout = options.health_check_timeout;
  result.client_name = options.client_name;
  result.logger = options.logger;
  result.limits = limits_for(options.replies);
  return result;
}

connection_options connection_options::for_subscriber(const connection_options& settings) {
  connection_options result;
  result.connect_timeout = settings.connect_timeout;
  result.reconnect = settings.reconnect;
  result.health_check_timeout = settings.health_check_timeout;
  result.client_name = settings.client_name;
  result.logger = settings.logger;
  result.limits = settings.limits;
  return result;
}

}  // namespace redlock::detail
