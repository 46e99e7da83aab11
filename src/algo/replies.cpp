#include "algo/replies.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string_view>

namespace redlock::detail {

namespace {

// A fencing counter as the scripts answer it: decimal text, as GET reads it back (a Lua number
// would have rounded it), from `lowest` up to Redis's ceiling for a counter, 2^63 - 1. Anything
// else (an integer, a sign, leading zeros, a value out of range) is no counter.
std::optional<std::uint64_t> counter_text(const resp::value& reply, std::uint64_t lowest) {
  if (reply.kind != resp::type::bulk_string) return std::nullopt;
  const std::string_view text = reply.text;
  if (text.empty() || (text.size() > 1 && text.front() == '0')) return std::nullopt;
  std::uint64_t counter = 0;
  const auto [stop, problem] = std::from_chars(text.data(), text.data() + text.size(), counter);
  if (problem != std::errc{} || stop != text.data() + text.size()) return std::nullopt;
  constexpr auto ceiling = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (counter < lowest || counter > ceiling) return std::nullopt;
  return counter;
}

// The fencing counter a grant carries, if any: {counter} from fenced_acquire_script, the
// read-write scripts and semaphore_acquire_script with fencing. Only a reader's may be 0: it
// takes no token, and no writer may have taken one yet.
std::optional<std::uint64_t> granted_counter(const resp::value& reply, set_form form) {
  if (reply.kind != resp::type::array || reply.elements.size() != 1) return std::nullopt;
  return counter_text(reply.elements.front(), form == set_form::fenced_read ? 0 : 1);
}

// The counters a set's fenced grant carries: {c1, ..., cn}, each >= 1; empty for any other reply.
std::vector<std::uint64_t> granted_counters(const resp::value& reply) {
  std::vector<std::uint64_t> counters;
  if (reply.kind != resp::type::array || reply.elements.empty()) return counters;
  counters.reserve(reply.elements.size());
  for (const auto& element : reply.elements) {
    const auto counter = counter_text(element, 1);
    if (!counter) return {};
    counters.push_back(*counter);
  }
  return counters;
}

// A writer's refusal by live readers: {"readers", ms until the last one's deadline}; empty for
// any other reply.
std::optional<long long> readers_left(const resp::value& reply) {
  if (reply.kind != resp::type::array || reply.elements.size() != 2 ||
      reply.elements[0].text != "readers" || reply.elements[1].kind != resp::type::integer) {
    return std::nullopt;
  }
  return reply.elements[1].integer;
}

// A semaphore round's refusal: the PTTL reply of every slot on that node, or empty when `reply`
// is not one (a grant, an error). The script sends them as one string, "ttl,ttl,...".
std::vector<long long> slot_ttls_of(const resp::value& reply) {
  std::vector<long long> ttls;
  if (!reply.is_string() || reply.kind == resp::type::simple_string) return ttls;
  const std::string_view text = reply.text;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    long long ttl = 0;
    const auto [stop, problem] = std::from_chars(text.data() + start, text.data() + end, ttl);
    if (problem != std::errc{} || stop != text.data() + end) return {};
    ttls.push_back(ttl);
    start = end + 1;
  }
  return ttls;
}

// The number of permits a node records for a semaphore whose record disagrees with the round's:
// the script's ["permits", N] answer; empty for any other reply.
std::optional<std::size_t> recorded_permits(const resp::value& reply) {
  if (reply.kind != resp::type::array || reply.elements.size() != 2 ||
      reply.elements[0].text != "permits") {
    return std::nullopt;
  }
  std::size_t permits = 0;
  const std::string_view text = reply.elements[1].text;
  const auto [stop, problem] = std::from_chars(text.data(), text.data() + text.size(), permits);
  if (problem != std::errc{} || stop != text.data() + text.size()) return std::nullopt;
  return permits;
}

}  // namespace

set_answer read_set_reply(const boost::system::error_code& ec, const resp::value& reply,
                          set_form form) {
  set_answer answer;
  if (ec) {
    answer.detail = reply.text;
    return answer;
  }
  // Compared by hand: std::string's == with a literal measures it and calls memcmp, a good part
  // of the cost of reading the commonest reply there is.
  const bool ok = reply.kind == resp::type::simple_string && reply.text.size() == 2 &&
                  reply.text[0] == 'O' && reply.text[1] == 'K';
  const auto granted = [&](bool yes) {
    if (yes) answer.what = node_answer::kind::yes;
    return yes;
  };
  switch (form) {
    case set_form::plain:
      if (granted(ok)) return answer;
      if (reply.is_null()) {
        answer.what = node_answer::kind::no;
        return answer;
      }
      break;
    case set_form::asking_ttl:
    case set_form::fenced:
    case set_form::read:
    case set_form::fenced_read:
    case set_form::write:
    case set_form::fenced_write: {
      const bool counted = form == set_form::fenced || form == set_form::fenced_read ||
                           form == set_form::fenced_write;
      if (counted) answer.counter = granted_counter(reply, form);
      if (granted(counted ? answer.counter.has_value() : ok)) return answer;
      if (form == set_form::write || form == set_form::fenced_write) {
        if (const auto left = readers_left(reply)) {
          answer.what = node_answer::kind::no;
          answer.holder_pttl = *left;
          answer.marked = true;
          return answer;
        }
      }
      // The holder's PTTL, or nil when it could not be read.
      if (reply.is_null() || reply.kind == resp::type::integer) {
        answer.what = node_answer::kind::no;
        if (reply.kind == resp::type::integer) answer.holder_pttl = reply.integer;
        return answer;
      }
      break;
    }
    case set_form::fenced_set:
      answer.counters = granted_counters(reply);
      if (granted(!answer.counters.empty())) return answer;
      if (reply.is_null() || reply.kind == resp::type::integer) {
        answer.what = node_answer::kind::no;
        if (reply.kind == resp::type::integer) answer.holder_pttl = reply.integer;
        return answer;
      }
      break;
    case set_form::slot:
    case set_form::fenced_slot:
      if (form == set_form::fenced_slot) answer.counter = granted_counter(reply, form);
      if (granted(form == set_form::slot ? ok : answer.counter.has_value())) return answer;
      answer.slot_ttls = slot_ttls_of(reply);
      if (!answer.slot_ttls.empty()) {
        answer.what = node_answer::kind::no;
        return answer;
      }
      if ((answer.recorded_permits = recorded_permits(reply))) {
        answer.detail =
            fmt::format("it records {} permits for this semaphore", *answer.recorded_permits);
        return answer;
      }
      break;
  }
  answer.detail = unexpected_reply(reply);
  return answer;
}

void fill_answer_in_full(node_answer& answer, node_answer::kind what,
                         const boost::system::error_code& ec, const resp::value& reply,
                         std::string&& detail) {
  answer.what = what;
  if (!detail.empty() || !answer.detail.empty()) answer.detail = std::move(detail);
  // A connect that failed for good fails its requests unsent. Tested only for a failure:
  // comparing with a condition costs virtual calls on every reply.
  answer.unsent = ec && (ec == error::not_connected || ec == error::node_unresponsive ||
                         ec == condition::node_failure || ec == error::invalid_argument);
  if (what == node_answer::kind::failed) {
    // A NOPERM reply (the ACL user may not write this key) lasts like a refused login. A reply that
    // is no error, yet of a shape the request cannot have (a grant with a counter of 0, an integer
    // for SET), lasts too: the server runs other code than the scripts this client loaded, or
    // something between them pairs replies with the wrong requests. Retrying cannot fix either,
    // and an acquire that waited on such nodes would wait forever.
    answer.failure = ec                  ? ec
                     : !reply.is_error() ? make_error_code(error::protocol_error)
                     : reply.error_code_word() == "NOPERM"
                         ? make_error_code(error::permission_denied)
                         : make_error_code(error::server_error);
  } else {
    answer.failure = {};
  }
}

node_answer::kind classify_script_reply(const boost::system::error_code& ec,
                                        const resp::value& reply, std::string& detail) {
  if (ec) {
    detail = reply.text;
    return node_answer::kind::failed;
  }
  if (reply.kind == resp::type::integer) {
    return reply.integer == 1 ? node_answer::kind::yes : node_answer::kind::no;
  }
  detail = unexpected_reply(reply);
  return node_answer::kind::failed;
}

std::string unexpected_reply(const resp::value& reply) {
  // The server's own words for a permission error: the caller's message names user and keys.
  if (reply.is_error() && reply.error_code_word() == "NOPERM") return reply.text;
  return fmt::format("unexpected reply {}", resp::to_debug_string(reply));
}

}  // namespace redlock::detail
