#ifndef REDLOCK_TEST_CLI_TOOL_FIXTURE_HPP
#define REDLOCK_TEST_CLI_TOOL_FIXTURE_HPP

// What the tests of the redlock tool share: the module's five servers, a fixture that runs the
// tool against them and checks that nothing is left, and readers of its text and --json output.

#include "cli/tool_process.hpp"
#include "support/inspector.hpp"
#include "support/redis_fleet.hpp"
#include "support/sync_client.hpp"
#include "support/text_contains.hpp"

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <arpa/inet.h>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <netinet/in.h>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace redlock::test::cli_checks {

using namespace std::chrono_literals;

// One fleet for the module: five servers started per case would cost more than the cases.
inline redis_fleet& fleet() {
  static redis_fleet servers(5);
  return servers;
}

inline std::string node_urls(const std::vector<std::uint16_t>& ports) {
  std::string urls;
  for (const auto port : ports) {
    if (!urls.empty()) urls += ',';
    urls += fmt::format("redis://127.0.0.1:{}", port);
  }
  return urls;
}

using redlock::test::contains;

inline std::size_t count_lines(const std::string& text) {
  std::size_t lines = 0;
  for (char c : text)
    lines += c == '\n' ? 1 : 0;
  return lines;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// A line of --json output, checked as far as these tests need: one object, alone on its line.
inline bool is_json_object(const std::string& line) {
  return line.size() >= 2 && line.front() == '{' && line.back() == '}';
}

// `"name":"value"` as a JSON object has it, for values without characters to escape.
inline std::string json_field(std::string_view name, std::string_view value) {
  return fmt::format("\"{}\":\"{}\"", name, value);
}

// `"text"` as JSON writes it, for text without characters to escape.
inline std::string json_string_of(std::string_view text) {
  return fmt::format("\"{}\"", text);
}

// The number after `"name":` in `line`; -1 when the field is not there or not a number.
inline long long json_number(const std::string& line, std::string_view name) {
  const auto key = fmt::format("\"{}\":", name);
  const auto at = line.find(key);
  if (at == std::string::npos) return -1;
  const auto value = line.substr(at + key.size());
  if (value.empty() || value.front() < '0' || value.front() > '9') return -1;
  return std::stoll(value);
}

// A reader of JSON text that only checks it: enough to say that a --json line is one whole JSON
// object and nothing else, whatever its values.
class json_checker {
 public:
  explicit json_checker(std::string_view text) : text_(text) {}

  bool one_object() {
    blanks();
    if (at_ >= text_.size() || text_[at_] != '{' || !value()) return false;
    blanks();
    return at_ == text_.size();
  }

 private:
  void blanks() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t'))
      ++at_;
  }

  bool word(std::string_view expected) {
    if (text_.substr(at_, expected.size()) != expected) return false;
    at_ += expected.size();
    return true;
  }

  bool digits() {
    const auto begin = at_;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9')
      ++at_;
    return at_ > begin;
  }

  bool number() {
    word("-");
    if (!digits()) return false;
    if (word(".") && !digits()) return false;
    if (word("e") || word("E")) {
      if (!word("+")) word("-");
      return digits();
    }
    return true;
  }

  bool string() {
    if (!word("\"")) return false;
    while (at_ < text_.size()) {
      const char c = text_[at_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') continue;
      if (at_ >= text_.size()) return false;
      const char escaped = text_[at_++];
      if (escaped == 'u') {
        for (int i = 0; i < 4; ++i, ++at_) {
          if (at_ >= text_.size() || !std::isxdigit(static_cast<unsigned char>(text_[at_])))
            return false;
        }
      } else if (std::string_view("\"\\/bfnrt").find(escaped) == std::string_view::npos) {
        return false;
      }
    }
    return false;
  }

  // The elements of an object (`members`) or an array, after its opening bracket.
  bool elements(char close, bool members) {
    blanks();
    if (word(std::string_view(&close, 1))) return true;
    for (;;) {
      blanks();
      if (members) {
        if (!string()) return false;
        blanks();
        if (!word(":")) return false;
      }
      if (!value()) return false;
      blanks();
      if (word(std::string_view(&close, 1))) return true;
      if (!word(",")) return false;
    }
  }

  bool value() {
    blanks();
    if (at_ >= text_.size()) return false;
    switch (text_[at_]) {
      case '{':
        ++at_;
        return elements('}', true);
      case '[':
        ++at_;
        return elements(']', false);
      case '"':
        return string();
      case 't':
        return word("true");
      case 'f':
        return word("false");
      case 'n':
        return word("null");
      default:
        return number();
    }
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

// Each line of `text` is one whole JSON object (JSON Lines), and there is at least one.
inline bool json_lines(const std::string& text) {
  const auto lines = lines_of(text);
  return !lines.empty() && text.ends_with('\n') &&
         std::all_of(lines.begin(), lines.end(),
                     [](const std::string& line) { return json_checker(line).one_object(); });
}

// The string value of `"name":"..."` in `line` (without escapes); empty when it is not there.
inline std::string json_text(const std::string& line, std::string_view name) {
  const auto key = fmt::format("\"{}\":\"", name);
  const auto at = line.find(key);
  if (at == std::string::npos) return {};
  const auto begin = at + key.size();
  return line.substr(begin, line.find('"', begin) - begin);
}

inline bool is_token(const std::string& text) {
  return text.size() == 40 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The key of permit `slot` of the semaphore `name`, as `redlock run --help` documents it for a name
// without a hash tag; spelled out here rather than computed, so that a change of it shows.
inline std::string slot_key(const std::string& name, std::size_t slot) {
  return fmt::format("{{{}}}:slot:{}", name, slot);
}

// The keys of the read-write lock `name` (a name without a hash tag), spelled out as slot_key.
inline std::string rw_readers_key(const std::string& name) {
  return fmt::format("{{{}}}:read", name);
}
inline std::string rw_writer_key(const std::string& name) {
  return fmt::format("{{{}}}:write", name);
}
inline std::string rw_mark_key(const std::string& name) {
  return fmt::format("{{{}}}:write-waiting", name);
}

// Loopback ports with a socket bound but not listening: a connection there is refused at once,
// and no other process can take the port meanwhile.
class refusing_ports {
 public:
  explicit refusing_ports(std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      BOOST_TEST_REQUIRE(fd >= 0);
      fds_.push_back(fd);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t size = sizeof address;
      BOOST_TEST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), size) == 0);
      BOOST_TEST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0);
      ports_.push_back(ntohs(address.sin_port));
    }
  }
  ~refusing_ports() {
    for (const int fd : fds_)
      ::close(fd);
  }
  refusing_ports(const refusing_ports&) = delete;
  refusing_ports& operator=(const refusing_ports&) = delete;

  const std::vector<std::uint16_t>& ports() const noexcept { return ports_; }

 private:
  std::vector<int> fds_;
  std::vector<std::uint16_t> ports_;
};

struct tool_fixture {
  tool_fixture() : look(fleet()) {
    std::vector<std::uint16_t> ports;
    for (std::size_t i = 0; i < fleet().size(); ++i)
      ports.push_back(fleet()[i].port());
    nodes = node_urls(ports);
    resource =
        fmt::format("cli-test:{}", boost::unit_test::framework::current_test_case().p_name.get());
  }

  // A case that paused or killed servers gets them back even when an assertion stopped it.
  ~tool_fixture() {
    for (std::size_t i = 0; i < fleet().size(); ++i) {
      try {
        if (fleet()[i].running()) {
          fleet()[i].resume();
        } else {
          fleet()[i].start();
        }
      } catch (const std::exception& e) {
        BOOST_TEST_MESSAGE("could not restore node " << i << ": " << e.what());
      }
    }
  }

  tool_result run(std::vector<std::string> args, std::chrono::milliseconds limit = 20s) {
    return run_tool(args, nodes, scratch.path(), limit);
  }

  // Case 5 of the tool's contract: nothing is left holding the lock.
  void check_nothing_left() {
    for (std::size_t i = 0; i < fleet().size(); ++i) {
      BOOST_TEST_CONTEXT("node " << i) {
        BOOST_TEST(!look.get(i, resource).has_value());
      }
    }
  }

  bool nothing_left() { return look.present(resource) == 0; }

  // The same for every slot key of the semaphore `resource` with `permits` permits.
  void check_no_permit_left(std::size_t permits) {
    for (std::size_t slot = 0; slot < permits; ++slot) {
      for (std::size_t i = 0; i < fleet().size(); ++i) {
        BOOST_TEST_CONTEXT("slot " << slot << ", node " << i) {
          BOOST_TEST(!look.get(i, slot_key(resource, slot)).has_value());
        }
      }
    }
  }

  void set_everywhere(std::string_view value) {
    for (std::size_t i = 0; i < fleet().size(); ++i)
      look.set(i, resource, value, 20s);
  }

  void delete_everywhere() {
    for (std::size_t i = 0; i < fleet().size(); ++i) {
      sync_client(fleet()[i].port()).command({"DEL", resource});
    }
  }

  inspector look;
  scratch_dir scratch;
  std::string nodes;
  std::string resource;
};

}  // namespace redlock::test::cli_checks

#endif
