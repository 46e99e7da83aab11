#include "arguments.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace redlock::cli {
namespace {

constexpr std::string_view duration_forms = "expected e.g. 500ms, 30s, 2m or a number of seconds";
constexpr std::string_view run_usage =
    "redlock run [OPTIONS] [--permits N | --read | --write] RESOURCE [RESOURCE...] -- COMMAND "
    "[ARGS...]";
constexpr std::string_view status_usage =
    "redlock status [OPTIONS] [--permits N | --read | --write] RESOURCE [RESOURCE...]";
constexpr std::string_view acquire_usage = "redlock acquire [OPTIONS] RESOURCE";
constexpr std::string_view extend_usage =
    "redlock extend [OPTIONS] RESOURCE --token TOKEN --ttl DURATION";
constexpr std::string_view release_usage =
    "redlock release [OPTIONS] RESOURCE --token TOKEN | --force [--yes]";
constexpr std::string_view commands = "run, status, acquire, extend and release";

// Why --ttl is at least min_ttl: for `run`, which renews the lock, and for `acquire` and
// `extend`, whose lock nobody renews.
constexpr std::string_view run_ttl_floor = ", so that renewal has time to reach the nodes";
constexpr std::string_view unrenewed_ttl_floor =
    ", since nobody renews the lock: the script's next step would find it gone";

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

std::string_view trim(std::string_view s) noexcept {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// The library's messages start with "redlock: "; ours add their own context in front.
std::string_view without_tool_prefix(std::string_view message) noexcept {
  constexpr std::string_view prefix = "redlock: ";
  if (message.starts_with(prefix)) message.remove_prefix(prefix.size());
  return message;
}

std::int64_t unit_in_ms(std::string_view unit) {
  if (unit.empty() || unit == "s") return 1000;
  if (unit == "ms") return 1;
  if (unit == "m") return 60 * 1000;
  if (unit == "h") return 3600 * 1000;
  return 0;
}

// Walks the arguments of one command, taking "--name value" and "--name=value" alike.
class option_cursor {
 public:
  explicit option_cursor(std::span<const std::string> args) : args_(args) {}

  bool done() const noexcept { return next_ >= args_.size(); }

  // Takes the next argument. For an option, name() is then its name without any "=value".
  const std::string& take() {
    const std::string& arg = args_[next_++];
    name_ = arg;
    inline_value_.reset();
    if (arg.starts_with("--")) {
      if (const auto eq = arg.find('='); eq != std::string::npos) {
        name_ = std::string_view(arg).substr(0, eq);
        inline_value_ = std::string_view(arg).substr(eq + 1);
      }
    }
    return arg;
  }

  std::string_view name() const noexcept { return name_; }

  std::string_view value() {
    if (inline_value_) {
      if (inline_value_->empty()) throw usage_error(fmt::format("{} needs a value", name_));
      return *inline_value_;
    }
    if (done()) throw usage_error(fmt::format("{} needs a value", name_));
    return args_[next_++];
  }

  void no_value() const {
    if (inline_value_) throw usage_error(fmt::format("{} takes no value", name_));
  }

  // Everything after the current position, consumed.
  std::span<const std::string> rest() {
    auto tail = args_.subspan(next_);
    next_ = args_.size();
    return tail;
  }

 private:
  std::span<const std::string> args_;
  std::size_t next_ = 0;
  std::string_view name_;
  std::optional<std::string_view> inline_value_;
};

bool is_option(const std::string& arg) noexcept {
  return arg.size() > 1 && arg.front() == '-';
}

// `minimum` and `why` are for options with a floor of their own above 1 ms; `zero_allowed` for
// those where zero has a meaning of its own (--wait 0: one round; --grace 0: SIGKILL at once).
std::chrono::milliseconds duration_option(option_cursor& cursor,
                                          std::chrono::milliseconds minimum = {},
                                          std::string_view why = {}, bool zero_allowed = false) {
  const std::string name(cursor.name());
  const auto text = cursor.value();
  std::chrono::milliseconds result;
  try {
    result = parse_duration(text, zero_allowed);
  } catch (const std::invalid_argument& e) {
    throw usage_error(fmt::format("{}: {}", name, e.what()));
  }
  if (result < minimum) {
    throw usage_error(
        fmt::format("{}: \"{}\" is too short: at least {} ms{}", name, text, minimum.count(), why));
  }
  return result;
}

// A process exit code as the shell sees it: 0..255, digits only (no sign, no spaces), since a
// value the kernel would truncate (300 -> 44) would silently mean something else.
int exit_code_option(option_cursor& cursor) {
  const std::string name(cursor.name());
  const auto text = cursor.value();
  int value = 0;
  bool valid = !text.empty() && text.size() <= 3;
  for (const char c : text) {
    if (!is_digit(c)) {
      valid = false;
      break;
    }
    value = value * 10 + (c - '0');
  }
  if (!valid || value > 255) {
    throw usage_error(fmt::format(
        "{}: \"{}\" is not an exit code (expected a whole number from 0 to 255)", name, text));
  }
  return value;
}

// --permits N: digits only, like an exit code, so that "2.5", "+2" or "2 " are refused rather than
// read as some other number of concurrent commands than the one meant.
std::size_t permits_option(option_cursor& cursor) {
  const std::string name(cursor.name());
  const auto text = cursor.value();
  std::size_t value = 0;
  // No longer text is a count in range, and the digits below then cannot overflow `value`.
  bool valid = !text.empty() && text.size() <= 4;
  for (const char c : text) {
    if (!is_digit(c)) {
      valid = false;
      break;
    }
    value = value * 10 + static_cast<std::size_t>(c - '0');
  }
  if (!valid || value < 1 || value > max_permits) {
    throw usage_error(
        fmt::format("{}: \"{}\" is not a number of permits (expected a whole number from 1 to {})",
                    name, text, max_permits));
  }
  return value;
}

[[noreturn]] void unknown_option(std::string_view name, std::string_view command) {
  throw usage_error(fmt::format("unknown option \"{}\" for \"redlock {}\" (see redlock {} --help)",
                                name, command, command));
}

std::vector<node_config> choose_nodes(const std::optional<std::string>& flag,
                                      std::optional<std::string_view> env_nodes) {
  if (flag) return parse_node_list(*flag, "--nodes");
  if (env_nodes && !trim(*env_nodes).empty()) return parse_node_list(*env_nodes, nodes_variable);
  return parse_node_list(default_nodes, "the default node");
}

// Takes the option `name` when it is one of the --tls-* flags; false when it is not.
bool take_tls_flag(option_cursor& cursor, std::string_view name, tls_flags& flags) {
  const auto file = [&](std::optional<std::string>& into) {
    const std::string_view value = cursor.value();
    if (value.empty()) throw usage_error(fmt::format("{} needs a value", name));
    into = std::string(value);
  };
  if (name == "--tls-ca") {
    file(flags.ca_file);
  } else if (name == "--tls-cert") {
    file(flags.cert_file);
  } else if (name == "--tls-key") {
    file(flags.key_file);
  } else if (name == "--tls-server-name") {
    file(flags.server_name);
  } else if (name == "--tls-insecure") {
    cursor.no_value();
    flags.insecure = true;
  } else {
    return false;
  }
  return true;
}

void check_resource(const std::optional<std::string>& resource, std::string_view usage) {
  if (!resource) throw usage_error(fmt::format("missing RESOURCE (usage: {})", usage));
  if (resource->empty()) throw usage_error("RESOURCE must not be empty");
}

// Takes -q/--quiet and --json, which every command that changes a lock has; false for others.
bool take_output_flag(option_cursor& cursor, std::string_view name, bool& quiet, bool& json) {
  if (name == "-q" || name == "--quiet") {
    cursor.no_value();
    quiet = true;
  } else if (name == "--json") {
    cursor.no_value();
    json = true;
  } else {
    return false;
  }
  return true;
}

// Takes the option `name` when it is one that `run` and `acquire` share; false when it is not.
// `ttl_floor` says why --ttl has its minimum for this command.
bool take_lock_flag(option_cursor& cursor, std::string_view name, std::string_view ttl_floor,
                    lock_request& options) {
  if (take_output_flag(cursor, name, options.quiet, options.json)) return true;
  if (name == "--fencing") {
    cursor.no_value();
    options.fencing = true;
  } else if (name == "--ttl") {
    options.ttl = duration_option(cursor, min_ttl, ttl_floor);
  } else if (name == "--wait") {
    options.wait = duration_option(cursor, {}, {}, true);
  } else if (name == "--conflict-exit-code") {
    options.conflict_exit_code = exit_code_option(cursor);
  } else {
    return false;
  }
  return true;
}

// --token TOKEN: whatever the holder's client stored (this tool's are 40 hex digits, other
// Redlock clients' may differ), so anything but an empty string.
std::string token_option(option_cursor& cursor) {
  std::string token(cursor.value());
  if (token.empty()) throw usage_error("--token must not be empty");
  return token;
}

// A word that is not an option: the one RESOURCE of `command`.
void take_resource(const std::string& arg, std::optional<std::string>& resource,
                   std::string_view command) {
  if (resource) {
    throw usage_error(
        fmt::format("unexpected argument \"{}\": {} takes one RESOURCE", arg, command));
  }
  resource = arg;
}

// The RESOURCEs of one run, in the order given, each once; at most max_run_resources, none
// empty.
std::vector<std::string> distinct_resources(const std::vector<std::string>& given) {
  std::vector<std::string> distinct;
  for (const auto& resource : given) {
    if (resource.empty()) throw usage_error("RESOURCE must not be empty");
    if (std::find(distinct.begin(), distinct.end(), resource) == distinct.end())
      distinct.push_back(resource);
  }
  if (distinct.size() > max_run_resources) {
    throw usage_error(fmt::format(
        "too many RESOURCEs: {} given, at most {} in one run (each node checks them all in one "
        "script, during which it serves no one else)",
        distinct.size(), max_run_resources));
  }
  return distinct;
}

// What the lines of a run call what it holds: "a", or "a, b and c" for several RESOURCEs.
std::string run_subject(const std::vector<std::string>& resources) {
  std::string text = resources.front();
  for (std::size_t i = 1; i < resources.size(); ++i)
    text += (i + 1 == resources.size() ? " and " : ", ") + resources[i];
  return text;
}

// "a", "b", "c" for usage errors.
std::string quoted_words(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& word : words) {
    if (!text.empty()) text += ", ";
    text += fmt::format("\"{}\"", word);
  }
  return text;
}

// --read or --write, given as `name`; the other one given before is a usage error.
void take_side(std::string_view name, std::optional<rw_side>& side) {
  const rw_side given = name == "--read" ? rw_side::read : rw_side::write;
  if (side && *side != given) throw usage_error("--read and --write exclude each other: give one");
  side = given;
}

std::string_view side_flag(const std::optional<rw_side>& side) {
  return side && *side == rw_side::read ? "read" : "write";
}

// --permits and --read/--write say what kind of lock RESOURCE names: one kind, one NAME.
// `several` says what several RESOURCEs are instead.
void check_lock_kind(const std::optional<rw_side>& side, const std::optional<std::size_t>& permits,
                     const std::vector<std::string>& resources, std::string_view several) {
  if (side && permits) {
    throw usage_error(
        fmt::format("--{} and --permits exclude each other: RESOURCE is either a "
                    "read-write lock or a semaphore",
                    side_flag(side)));
  }
  if (resources.size() > 1 && (permits || side)) {
    throw usage_error(fmt::format("--{} takes one NAME, not {}: {}",
                                  permits ? "permits" : side_flag(side), quoted_words(resources),
                                  several));
  }
}

invocation parse_run(std::span<const std::string> args, std::optional<std::string_view> env) {
  run_options options;
  tls_flags tls;
  std::optional<std::string> nodes;
  std::vector<std::string> resources;
  bool separator = false;
  option_cursor cursor(args);
  while (!cursor.done()) {
    const std::string& arg = cursor.take();
    if (arg == "--") {
      separator = true;
      const auto command = cursor.rest();
      options.command.assign(command.begin(), command.end());
      break;
    }
    if (!is_option(arg)) {
      resources.push_back(arg);
      continue;
    }
    const auto name = cursor.name();
    if (name == "-h" || name == "--help") return help_request{"run"};
    if (take_lock_flag(cursor, name, run_ttl_floor, options)) continue;
    if (name == "--nodes") {
      nodes = std::string(cursor.value());
    } else if (name == "--grace") {
      options.grace = duration_option(cursor, {}, {}, true);
    } else if (name == "--permits") {
      options.permits = permits_option(cursor);
    } else if (name == "--read" || name == "--write") {
      cursor.no_value();
      take_side(name, options.side);
    } else if (!take_tls_flag(cursor, name, tls)) {
      unknown_option(name, "run");
    }
  }
  check_lock_kind(options.side, options.permits, {}, {});
  if (resources.empty()) throw usage_error(fmt::format("missing RESOURCE (usage: {})", run_usage));
  if (!separator && resources.size() > 1) {
    // The likeliest mistake: `redlock run job make all`, the "--" forgotten.
    throw usage_error(
        fmt::format("missing \"--\" before COMMAND: {} were all taken as RESOURCEs (usage: {})",
                    quoted_words(resources), run_usage));
  }
  options.resources = distinct_resources(resources);
  check_lock_kind(options.side, options.permits, options.resources,
                  "several RESOURCEs are one lock over all of them");
  if (!separator) {
    throw usage_error(
        fmt::format("missing \"--\" and COMMAND after RESOURCE (usage: {})", run_usage));
  }
  if (options.command.empty()) throw usage_error("missing COMMAND after \"--\"");
  options.resource = run_subject(options.resources);
  options.nodes = choose_nodes(nodes, env);
  apply_tls_flags(tls, options.nodes);
  return options;
}

invocation parse_acquire(std::span<const std::string> args, std::optional<std::string_view> env) {
  acquire_options options;
  tls_flags tls;
  std::optional<std::string> nodes;
  std::optional<std::string> resource;
  option_cursor cursor(args);
  while (!cursor.done()) {
    const std::string& arg = cursor.take();
    if (arg == "--") {
      throw usage_error(
          "acquire runs no COMMAND: it takes the lock and exits (to run COMMAND under the lock: "
          "redlock run RESOURCE -- COMMAND)");
    }
    if (!is_option(arg)) {
      take_resource(arg, resource, "acquire");
      continue;
    }
    const auto name = cursor.name();
    if (name == "-h" || name == "--help") return help_request{"acquire"};
    if (take_lock_flag(cursor, name, unrenewed_ttl_floor, options)) continue;
    if (name == "--nodes") {
      nodes = std::string(cursor.value());
    } else if (!take_tls_flag(cursor, name, tls)) {
      unknown_option(name, "acquire");
    }
  }
  check_resource(resource, acquire_usage);
  options.resource = std::move(*resource);
  options.nodes = choose_nodes(nodes, env);
  apply_tls_flags(tls, options.nodes);
  return options;
}

invocation parse_extend(std::span<const std::string> args, std::optional<std::string_view> env) {
  extend_options options;
  tls_flags tls;
  std::optional<std::string> nodes;
  std::optional<std::string> resource;
  std::optional<std::chrono::milliseconds> ttl;
  option_cursor cursor(args);
  while (!cursor.done()) {
    const std::string& arg = cursor.take();
    if (!is_option(arg)) {
      take_resource(arg, resource, "extend");
      continue;
    }
    const auto name = cursor.name();
    if (name == "-h" || name == "--help") return help_request{"extend"};
    if (take_output_flag(cursor, name, options.quiet, options.json)) continue;
    if (name == "--token") {
      options.token = token_option(cursor);
    } else if (name == "--ttl") {
      ttl = duration_option(cursor, min_ttl, unrenewed_ttl_floor);
    } else if (name == "--nodes") {
      nodes = std::string(cursor.value());
    } else if (!take_tls_flag(cursor, name, tls)) {
      unknown_option(name, "extend");
    }
  }
  check_resource(resource, extend_usage);
  if (options.token.empty()) {
    throw usage_error(fmt::format(
        "missing --token TOKEN: the token `redlock acquire` printed (usage: {})", extend_usage));
  }
  if (!ttl) {
    throw usage_error(fmt::format(
        "missing --ttl DURATION: the lock's new lifetime from now (usage: {})", extend_usage));
  }
  options.ttl = *ttl;
  options.resource = std::move(*resource);
  options.nodes = choose_nodes(nodes, env);
  apply_tls_flags(tls, options.nodes);
  return options;
}

invocation parse_release(std::span<const std::string> args, std::optional<std::string_view> env) {
  release_options options;
  tls_flags tls;
  std::optional<std::string> nodes;
  std::optional<std::string> resource;
  option_cursor cursor(args);
  while (!cursor.done()) {
    const std::string& arg = cursor.take();
    if (!is_option(arg)) {
      take_resource(arg, resource, "release");
      continue;
    }
    const auto name = cursor.name();
    if (name == "-h" || name == "--help") return help_request{"release"};
    if (take_output_flag(cursor, name, options.quiet, options.json)) continue;
    if (name == "--token") {
      options.token = token_option(cursor);
    } else if (name == "--force") {
      cursor.no_value();
      options.force = true;
    } else if (name == "--yes") {
      cursor.no_value();
      options.yes = true;
    } else if (name == "--nodes") {
      nodes = std::string(cursor.value());
    } else if (!take_tls_flag(cursor, name, tls)) {
      unknown_option(name, "release");
    }
  }
  check_resource(resource, release_usage);
  if (options.force && !options.token.empty()) {
    throw usage_error(
        "--token and --force exclude each other: --token releases the lock of that holder, "
        "--force of every holder found on the nodes");
  }
  if (!options.force && options.token.empty()) {
    throw usage_error(fmt::format(
        "missing --token TOKEN (the token `redlock acquire` printed) or --force (usage: {})",
        release_usage));
  }
  if (options.yes && !options.force) {
    throw usage_error("--yes goes with --force: releasing by --token asks nothing");
  }
  options.resource = std::move(*resource);
  options.nodes = choose_nodes(nodes, env);
  apply_tls_flags(tls, options.nodes);
  return options;
}

invocation parse_status(std::span<const std::string> args, std::optional<std::string_view> env) {
  status_options options;
  tls_flags tls;
  std::optional<std::string> nodes;
  std::vector<std::string> resources;
  option_cursor cursor(args);
  while (!cursor.done()) {
    const std::string& arg = cursor.take();
    if (!is_option(arg)) {
      resources.push_back(arg);
      continue;
    }
    const auto name = cursor.name();
    if (name == "-h" || name == "--help") return help_request{"status"};
    if (name == "--nodes") {
      nodes = std::string(cursor.value());
    } else if (name == "--timeout") {
      options.timeout = duration_option(cursor);
    } else if (name == "--permits") {
      options.permits = permits_option(cursor);
    } else if (name == "--read" || name == "--write") {
      cursor.no_value();
      take_side(name, options.side);
    } else if (name == "--json") {
      cursor.no_value();
      options.json = true;
    } else if (!take_tls_flag(cursor, name, tls)) {
      unknown_option(name, "status");
    }
  }
  check_lock_kind(options.side, options.permits, {}, {});
  if (resources.empty()) {
    throw usage_error(fmt::format("missing RESOURCE (usage: {})", status_usage));
  }
  options.resources = distinct_resources(resources);
  check_lock_kind(options.side, options.permits, options.resources,
                  "several RESOURCEs are shown as locks and as the set of them");
  options.resource = run_subject(options.resources);
  options.nodes = choose_nodes(nodes, env);
  apply_tls_flags(tls, options.nodes);
  return options;
}

}  // namespace

void apply_tls_flags(const tls_flags& flags, std::vector<node_config>& nodes) {
  if (!flags.any()) return;
  if (flags.cert_file.has_value() != flags.key_file.has_value()) {
    throw usage_error("--tls-cert and --tls-key go together: a client certificate needs its key");
  }
  bool any_tls = false;
  for (auto& node : nodes) {
    if (!node.tls.enabled) continue;
    any_tls = true;
    auto& tls = node.tls;
    if (flags.ca_file && tls.ca_file.empty() && tls.ca_dir.empty()) tls.ca_file = *flags.ca_file;
    if (flags.cert_file && tls.cert_file.empty()) {
      tls.cert_file = *flags.cert_file;
      tls.key_file = *flags.key_file;
    }
    if (flags.server_name && tls.server_name.empty()) tls.server_name = *flags.server_name;
    if (flags.insecure) tls.verify_peer = false;
  }
  if (!any_tls) {
    throw usage_error(
        "--tls-* options apply to rediss:// nodes, and none is given (write the nodes as "
        "rediss://host:port)");
  }
}

std::chrono::milliseconds parse_duration(std::string_view text, bool zero_allowed) {
  auto fail = [text](std::string_view why) {
    throw std::invalid_argument(fmt::format("\"{}\" {}", text, why));
  };
  if (text.empty()) throw std::invalid_argument(fmt::format("empty duration ({})", duration_forms));
  if (text.front() == '-') fail(fmt::format("is negative ({})", duration_forms));

  std::size_t i = 0;
  const std::size_t whole_begin = i;
  while (i < text.size() && is_digit(text[i]))
    ++i;
  const std::string_view whole = text.substr(whole_begin, i - whole_begin);
  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    const std::size_t fraction_begin = ++i;
    while (i < text.size() && is_digit(text[i]))
      ++i;
    fraction = text.substr(fraction_begin, i - fraction_begin);
  }
  if (whole.empty() && fraction.empty())
    fail(fmt::format("is not a duration ({})", duration_forms));

  const std::string_view unit = text.substr(i);
  const std::int64_t unit_ms = unit_in_ms(unit);
  if (unit_ms == 0) fail(fmt::format("has an unknown unit \"{}\" (expected ms, s, m or h)", unit));

  // Whole numbers beyond 12 digits exceed max_duration in any unit; checking the length first
  // keeps the arithmetic below from overflowing.
  std::string_view whole_digits = whole;
  while (whole_digits.size() > 1 && whole_digits.front() == '0')
    whole_digits.remove_prefix(1);
  if (whole_digits.size() > 12) fail("is too long (at most 7 days)");
  while (!fraction.empty() && fraction.back() == '0')
    fraction.remove_suffix(1);
  if (fraction.size() > 9) fail("is more precise than 1 ms");

  std::int64_t total = 0;
  for (char c : whole_digits)
    total = total * 10 + (c - '0');
  total *= unit_ms;
  std::int64_t fraction_value = 0;
  std::int64_t scale = 1;
  for (char c : fraction) {
    fraction_value = fraction_value * 10 + (c - '0');
    scale *= 10;
  }
  if ((fraction_value * unit_ms) % scale != 0) fail("is more precise than 1 ms");
  total += fraction_value * unit_ms / scale;

  if (total == 0 && !zero_allowed) fail("is zero; a duration must be at least 1 ms");
  if (total > max_duration.count()) fail("is too long (at most 7 days)");
  return std::chrono::milliseconds(total);
}

std::vector<node_config> parse_node_list(std::string_view list, std::string_view source) {
  try {
    return node_config::from_url_list(list);
  } catch (const std::invalid_argument& e) {
    throw usage_error(fmt::format("{}: {}", source, without_tool_prefix(e.what())));
  }
}

invocation parse_command_line(std::span<const std::string> args,
                              std::optional<std::string_view> env_nodes) {
  if (args.empty()) throw usage_error("no command given (see redlock --help)");
  const std::string& command = args.front();
  const auto rest = args.subspan(1);
  if (command == "-h" || command == "--help") return help_request{};
  if (command == "--version") return version_request{};
  if (command == "help") {
    if (rest.empty()) return help_request{};
    if (rest.size() > 1) throw usage_error("\"help\" takes at most one command name");
    const std::string& topic = rest.front();
    if (topic != "run" && topic != "status" && topic != "acquire" && topic != "extend" &&
        topic != "release") {
      throw usage_error(fmt::format("no help for \"{}\": the commands are {}", topic, commands));
    }
    return help_request{topic};
  }
  if (command == "run") return parse_run(rest, env_nodes);
  if (command == "status") return parse_status(rest, env_nodes);
  if (command == "acquire") return parse_acquire(rest, env_nodes);
  if (command == "extend") return parse_extend(rest, env_nodes);
  if (command == "release") return parse_release(rest, env_nodes);
  if (is_option(command)) {
    throw usage_error(fmt::format(
        "unknown option \"{}\" (options go after the command: redlock COMMAND [OPTIONS] ...)",
        command));
  }
  throw usage_error(
      fmt::format("unknown command \"{}\" (expected {}, or help)", command, commands));
}

}  // namespace redlock::cli
