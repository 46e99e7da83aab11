#include "nodes/sentinel/replies.hpp"

#include <fmt/format.h>

#include <charconv>
#include <vector>

namespace redlock::detail {

namespace {

std::optional<long long> non_negative_number(std::string_view text) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

}  // namespace

master_answer read_master_answer(const resp::value& reply, std::string_view from,
                                 std::string_view master_name) {
  master_answer answer;
  if (reply.is_null()) {
    answer.unknown_name = true;
    answer.problem = fmt::format("{} knows no master named \"{}\"", from, master_name);
    return answer;
  }
  if (reply.kind != resp::type::array || reply.elements.size() != 2 ||
      !reply.elements[0].is_string()) {
    answer.problem = fmt::format("{} answered SENTINEL GET-MASTER-ADDR-BY-NAME with {}", from,
                                 resp::to_debug_string(reply));
    return answer;
  }
  // The port is a bulk string; an integer is read too, should a server ever send one.
  const auto& port = reply.elements[1];
  answer.master =
      parse_endpoint(fmt::format("{}:{}", reply.elements[0].text,
                                 port.is_string() ? port.text : std::to_string(port.integer)));
  if (!answer.master) {
    answer.problem =
        fmt::format("{} named an unreadable master address {}", from, resp::to_debug_string(reply));
  }
  return answer;
}

std::optional<cluster_endpoint> switched_to(std::string_view text, std::string_view master_name) {
  std::vector<std::string_view> words;
  while (!text.empty()) {
    const auto space = text.find(' ');
    words.push_back(text.substr(0, space));
    if (space == std::string_view::npos) break;
    text.remove_prefix(space + 1);
  }
  if (words.size() != 5 || words[0] != master_name) return std::nullopt;
  return parse_endpoint(fmt::format("{}:{}", words[3], words[4]));
}

std::optional<master_record> read_master_record(const resp::value& reply,
                                                const cluster_endpoint& master,
                                                std::chrono::system_clock::time_point now) {
  if (reply.is_error() || reply.elements.size() % 2 != 0) return std::nullopt;
  std::optional<long long> since_ms;
  std::optional<long long> epoch;
  std::string_view ip;
  std::string_view port;
  for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2) {
    const std::string_view name = reply.elements[i].text;
    const std::string_view value = reply.elements[i + 1].text;
    if (name == "ip") ip = value;
    if (name == "port") port = value;
    if (name == "role-reported-time") since_ms = non_negative_number(value);
    if (name == "config-epoch") epoch = non_negative_number(value);
  }
  const auto described = parse_endpoint(fmt::format("{}:{}", ip, port));
  if (!described || *described != master || !since_ms) return std::nullopt;
  return master_record{.since = now - std::chrono::milliseconds(*since_ms), .config_epoch = epoch};
}

}  // namespace redlock::detail
