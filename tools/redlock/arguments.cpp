#include "arguments.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
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

bool is_option(const std::string& arg) noexcept {
  return arg.size() > 1 && arg.front() == '-';
}

// `minimum` and `why` are for options with a floor of their own above 1 ms; `zero_allowed` for
// those where zero has a meaning of its own (--wait 0: one round; --grace 0: SIGKILL at once).
std::chrono::milliseconds duration_value(std::string_view name, std::string_view text,
                                         std::chrono::milliseconds minimum = {},
                                         std::string_view why = {}, bool zero_allowed = false) {
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

// Digits only, at most `longest` of them, from `lowest` to `highest`; nullopt otherwise. No sign,
// spaces or fraction: "2.5" or "+2" must not be read as some other number than the one meant.
std::optional<std::size_t> whole_number(std::string_view text, std::size_t longest,
                                        std::size_t lowest, std::size_t highest) {
  if (text.empty() || text.size() > longest) return std::nullopt;
  std::size_t value = 0;
  for (const char c : text) {
    if (!is_digit(c)) return std::nullopt;
    value = value * 10 + static_cast<std::size_t>(c - '0');
  }
  if (value < lowest || value > highest) return std::nullopt;
  return value;
}

// A process exit code as the shell sees it, 0..255, since a value the kernel would truncate
// (300 -> 44) would silently mean something else.
int exit_code_value(std::string_view name, std::string_view text) {
  const auto value = whole_number(text, 3, 0, 255);
  if (!value) {
    throw usage_error(fmt::format(
        "{}: \"{}\" is not an exit code (expected a whole number from 0 to 255)", name, text));
  }
  return static_cast<int>(*value);
}

std::size_t permits_value(std::string_view name, std::string_view text) {
  const auto value = whole_number(text, 4, 1, max_permits);
  if (!value) {
    throw usage_error(
        fmt::format("{}: \"{}\" is not a number of permits (expected a whole number from 1 to {})",
                    name, text, max_permits));
  }
  return *value;
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

// The options of one command, declared with CLI11, which binds them and finds the unknown ones.
// Three rules of this tool's grammar are kept by a look at the words before CLI11 reads them,
// because CLI11 reads them otherwise: "--name=" is a missing value (CLI11 would take the next
// word), "--flag=value" is refused for every flag (CLI11 would read "yes" as true), and a value
// may start with '-' ("--grace -1s" is a negative duration, not an option "-1s"). An option given
// twice takes its last value.
class command_options {
 public:
  explicit command_options(std::string_view command) : command_(command) {
    app_.set_help_flag();  // -h and --help are a help_request, not CLI11's printout
    app_.allow_extras();   // unknown options are reported by name, below
    flag("-h,--help", help);
    value("--nodes", [this](std::string_view text) { nodes = std::string(text); });
    value("--tls-ca",
          [this](std::string_view text) { tls.ca_file = file_value("--tls-ca", text); });
    value("--tls-cert",
          [this](std::string_view text) { tls.cert_file = file_value("--tls-cert", text); });
    value("--tls-key",
          [this](std::string_view text) { tls.key_file = file_value("--tls-key", text); });
    value("--tls-server-name", [this](std::string_view text) {
      tls.server_name = file_value("--tls-server-name", text);
    });
    flag("--tls-insecure", tls.insecure);
    app_.add_option("RESOURCE", words);
  }

  // "-q,--quiet": CLI11's list of a flag's names.
  void flag(const std::string& names, bool& into) {
    app_.add_flag(names, into)
        ->disable_flag_override()
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    flag_names_.push_back(names);
  }

  template <class Take>
  void value(const std::string& name, Take take) {
    app_.add_option_function<std::string>(name, [take](const std::string& text) { take(text); })
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->allow_extra_args(false);
    value_names_.push_back(name);
  }

  // -q/--quiet and --json, which every command that changes a lock has.
  void output_flags(bool& quiet, bool& json) {
    flag("-q,--quiet", quiet);
    flag("--json", json);
  }

  // What `run` and `acquire` share; `ttl_floor` says why --ttl has its minimum there.
  void lock_flags(lock_request& options, std::string_view ttl_floor) {
    output_flags(options.quiet, options.json);
    flag("--fencing", options.fencing);
    value("--ttl", [&options, ttl_floor](std::string_view text) {
      options.ttl = duration_value("--ttl", text, min_ttl, ttl_floor);
    });
    value("--wait", [&options](std::string_view text) {
      options.wait = duration_value("--wait", text, {}, {}, true);
    });
    value("--conflict-exit-code", [&options](std::string_view text) {
      options.conflict_exit_code = exit_code_value("--conflict-exit-code", text);
    });
  }

  // --read and --write, which exclude each other.
  void side_flags() {
    flag("--read", read_);
    flag("--write", write_);
  }
  std::optional<rw_side> side() const {
    if (read_ && write_) throw usage_error("--read and --write exclude each other: give one");
    if (read_) return rw_side::read;
    if (write_) return rw_side::write;
    return std::nullopt;
  }

  // Reads `args` (the words after the command and before any "--").
  void parse(std::span<const std::string> args) {
    std::vector<std::string> words;  // for CLI11: every value joined to its option by '='
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& arg = args[i];
      const auto equals = is_option(arg) ? arg.find('=') : std::string::npos;
      const std::string_view name = std::string_view(arg).substr(0, equals);
      if (takes_value(name)) {
        if (equals != std::string::npos) {
          if (equals + 1 == arg.size()) throw usage_error(fmt::format("{} needs a value", name));
          words.push_back(arg);
        } else {
          if (i + 1 == args.size()) throw usage_error(fmt::format("{} needs a value", name));
          // Joined, so that a value starting with '-' stays a value; an empty one goes as its
          // own word, which CLI11 takes as given ("--name=" would make it take the next word).
          const std::string& given = args[++i];
          if (given.empty()) {
            words.push_back(arg);
            words.push_back(given);
          } else {
            words.push_back(fmt::format("{}={}", name, given));
          }
        }
      } else if (equals != std::string::npos && is_flag(name)) {
        throw usage_error(fmt::format("{} takes no value", name));
      } else {
        words.push_back(arg);
      }
    }
    // CLI11 reads a vector from its end.
    std::reverse(words.begin(), words.end());
    try {
      app_.parse(words);
    } catch (const CLI::ParseError& e) {
      throw usage_error(fmt::format("redlock {}: {}", command_, e.what()));
    }
    if (help) return;
    for (const std::string& extra : app_.remaining()) {
      if (is_option(extra)) unknown_option(extra.substr(0, extra.find('=')), command_);
    }
  }

  bool help = false;
  std::optional<std::string> nodes;
  tls_flags tls;
  std::vector<std::string> words;  // the words that are no option, in order

  // Nodes from --nodes, else REDLOCK_NODES, else the default, with the --tls-* flags applied.
  std::vector<node_config> node_list(std::optional<std::string_view> env) const {
    auto list = choose_nodes(nodes, env);
    apply_tls_flags(tls, list);
    return list;
  }

  // The one RESOURCE of a command that takes one.
  std::string one_resource(std::string_view usage) const {
    if (words.empty()) throw usage_error(fmt::format("missing RESOURCE (usage: {})", usage));
    if (words.size() > 1) {
      throw usage_error(
          fmt::format("unexpected argument \"{}\": {} takes one RESOURCE", words[1], command_));
    }
    if (words.front().empty()) throw usage_error("RESOURCE must not be empty");
    return words.front();
  }

 private:
  static std::string file_value(std::string_view name, std::string_view text) {
    if (text.empty()) throw usage_error(fmt::format("{} needs a value", name));
    return std::string(text);
  }

  bool takes_value(std::string_view name) const {
    return std::find(value_names_.begin(), value_names_.end(), name) != value_names_.end();
  }
  bool is_flag(std::string_view name) const {
    return std::any_of(flag_names_.begin(), flag_names_.end(), [name](std::string_view names) {
      for (std::size_t from = 0; from <= names.size();) {
        const auto comma = std::min(names.find(',', from), names.size());
        if (names.substr(from, comma - from) == name) return true;
        from = comma + 1;
      }
      return false;
    });
  }

  std::string_view command_;
  CLI::App app_;
  std::vector<std::string> value_names_;
  std::vector<std::string> flag_names_;
  bool read_ = false;
  bool write_ = false;
};

// --token TOKEN: whatever the holder's client stored (this tool's are 40 hex digits, other
// Redlock clients' may differ), so anything but an empty string.
std::string token_value(std::string_view text) {
  if (text.empty()) throw usage_error("--token must not be empty");
  return std::string(text);
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
  command_options line("run");
  line.lock_flags(options, run_ttl_floor);
  line.value("--grace", [&options](std::string_view text) {
    options.grace = duration_value("--grace", text, {}, {}, true);
  });
  line.value("--permits", [&options](std::string_view text) {
    options.permits = permits_value("--permits", text);
  });
  line.side_flags();
  // Everything after the first "--" is COMMAND, options of its own included.
  const auto separator = std::find(args.begin(), args.end(), "--");
  line.parse(args.first(static_cast<std::size_t>(separator - args.begin())));
  if (line.help) return help_request{"run"};
  options.side = line.side();
  check_lock_kind(options.side, options.permits, {}, {});
  const auto& resources = line.words;
  if (resources.empty()) throw usage_error(fmt::format("missing RESOURCE (usage: {})", run_usage));
  if (separator == args.end() && resources.size() > 1) {
    // The likeliest mistake: `redlock run job make all`, the "--" forgotten.
    throw usage_error(
        fmt::format("missing \"--\" before COMMAND: {} were all taken as RESOURCEs (usage: {})",
                    quoted_words(resources), run_usage));
  }
  options.resources = distinct_resources(resources);
  check_lock_kind(options.side, options.permits, options.resources,
                  "several RESOURCEs are one lock over all of them");
  if (separator == args.end()) {
    throw usage_error(
        fmt::format("missing \"--\" and COMMAND after RESOURCE (usage: {})", run_usage));
  }
  options.command.assign(separator + 1, args.end());
  if (options.command.empty()) throw usage_error("missing COMMAND after \"--\"");
  options.resource = run_subject(options.resources);
  options.nodes = line.node_list(env);
  return options;
}

invocation parse_acquire(std::span<const std::string> args, std::optional<std::string_view> env) {
  acquire_options options;
  command_options line("acquire");
  line.lock_flags(options, unrenewed_ttl_floor);
  const auto separator = std::find(args.begin(), args.end(), "--");
  line.parse(args.first(static_cast<std::size_t>(separator - args.begin())));
  if (line.help) return help_request{"acquire"};
  if (separator != args.end()) {
    throw usage_error(
        "acquire runs no COMMAND: it takes the lock and exits (to run COMMAND under the lock: "
        "redlock run RESOURCE -- COMMAND)");
  }
  options.resource = line.one_resource(acquire_usage);
  options.nodes = line.node_list(env);
  return options;
}

invocation parse_extend(std::span<const std::string> args, std::optional<std::string_view> env) {
  extend_options options;
  std::optional<std::chrono::milliseconds> ttl;
  command_options line("extend");
  line.output_flags(options.quiet, options.json);
  line.value("--token", [&options](std::string_view text) { options.token = token_value(text); });
  line.value("--ttl", [&ttl](std::string_view text) {
    ttl = duration_value("--ttl", text, min_ttl, unrenewed_ttl_floor);
  });
  line.parse(args);
  if (line.help) return help_request{"extend"};
  options.resource = line.one_resource(extend_usage);
  if (options.token.empty()) {
    throw usage_error(fmt::format(
        "missing --token TOKEN: the token `redlock acquire` printed (usage: {})", extend_usage));
  }
  if (!ttl) {
    throw usage_error(fmt::format(
        "missing --ttl DURATION: the lock's new lifetime from now (usage: {})", extend_usage));
  }
  options.ttl = *ttl;
  options.nodes = line.node_list(env);
  return options;
}

invocation parse_release(std::span<const std::string> args, std::optional<std::string_view> env) {
  release_options options;
  command_options line("release");
  line.output_flags(options.quiet, options.json);
  line.value("--token", [&options](std::string_view text) { options.token = token_value(text); });
  line.flag("--force", options.force);
  line.flag("--yes", options.yes);
  line.parse(args);
  if (line.help) return help_request{"release"};
  options.resource = line.one_resource(release_usage);
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
  options.nodes = line.node_list(env);
  return options;
}

invocation parse_status(std::span<const std::string> args, std::optional<std::string_view> env) {
  status_options options;
  command_options line("status");
  line.value("--timeout", [&options](std::string_view text) {
    options.timeout = duration_value("--timeout", text);
  });
  line.value("--permits", [&options](std::string_view text) {
    options.permits = permits_value("--permits", text);
  });
  line.side_flags();
  line.flag("--json", options.json);
  line.parse(args);
  if (line.help) return help_request{"status"};
  options.side = line.side();
  check_lock_kind(options.side, options.permits, {}, {});
  if (line.words.empty()) {
    throw usage_error(fmt::format("missing RESOURCE (usage: {})", status_usage));
  }
  options.resources = distinct_resources(line.words);
  check_lock_kind(options.side, options.permits, options.resources,
                  "several RESOURCEs are shown as locks and as the set of them");
  options.resource = run_subject(options.resources);
  options.nodes = line.node_list(env);
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
