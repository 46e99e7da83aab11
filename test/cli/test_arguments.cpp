#include "redlock/arguments.hpp"
#include "redlock/help.hpp"
#include "redlock/version.hpp"
#include "support/text_contains.hpp"

#include <boost/test/unit_test.hpp>
#include <boost/version.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace {

namespace cli = redlock::cli;
using namespace std::chrono_literals;

// The message of the exception `parse` throws, or a note that it did not throw.
template <class Exception, class Parse>
std::string error_of(Parse parse) {
  try {
    parse();
  } catch (const Exception& e) {
    return e.what();
  }
  return "(no error)";
}

std::string duration_error(std::string_view text) {
  return error_of<std::invalid_argument>([&] { (void)cli::parse_duration(text); });
}

cli::invocation parse(std::vector<std::string> args,
                      std::optional<std::string_view> env = std::nullopt) {
  return cli::parse_command_line(args, env);
}

std::string usage_error(std::vector<std::string> args,
                        std::optional<std::string_view> env = std::nullopt) {
  return error_of<cli::usage_error>([&] { (void)parse(std::move(args), env); });
}

cli::run_options parse_run(std::vector<std::string> args,
                           std::optional<std::string_view> env = std::nullopt) {
  args.insert(args.begin(), "run");
  auto parsed = parse(std::move(args), env);
  BOOST_TEST_REQUIRE(std::holds_alternative<cli::run_options>(parsed));
  return std::get<cli::run_options>(parsed);
}

using redlock::test::contains;

// `args` parsed as the command whose options are `Options`.
template <class Options>
Options parse_as(std::vector<std::string> args,
                 std::optional<std::string_view> env = std::nullopt) {
  auto parsed = parse(std::move(args), env);
  BOOST_TEST_REQUIRE(std::holds_alternative<Options>(parsed));
  return std::get<Options>(parsed);
}

// Every args in `cases` is a usage error whose one-line message contains the expected text.
void check_usage_errors(
    const std::vector<std::pair<std::vector<std::string>, std::string_view>>& cases) {
  for (const auto& [args, expected] : cases) {
    BOOST_TEST_CONTEXT("args: " << args.front() << " ... (" << args.size() << " words), expecting "
                                << expected) {
      const auto message = usage_error(args);
      BOOST_TEST(contains(message, expected), message);
      BOOST_TEST(!contains(message, "\n"));
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(arguments)

BOOST_AUTO_TEST_CASE(durations_in_every_accepted_form) {
  const std::vector<std::pair<std::string_view, std::chrono::milliseconds>> cases = {
      {"500ms", 500ms}, {"30s", 30s},     {"2m", 2min},    {"1h", 1h},
      {"5", 5s},        {"1.5s", 1500ms}, {"0.25", 250ms}, {".5s", 500ms},
      {"1.50m", 90s},   {"007s", 7s},     {"1ms", 1ms},
  };
  for (const auto& [text, expected] : cases) {
    BOOST_TEST_CONTEXT("duration \"" << text << "\"") {
      BOOST_TEST(cli::parse_duration(text).count() == expected.count());
    }
  }
  BOOST_TEST(cli::parse_duration("168h").count() == cli::max_duration.count());
}

BOOST_AUTO_TEST_CASE(bad_durations_say_what_is_wrong) {
  const std::vector<std::pair<std::string_view, std::string_view>> cases = {
      {"", "empty duration"},
      {"0", "is zero"},
      {"0s", "is zero"},
      {"0.0", "is zero"},
      {"-1s", "is negative"},
      {"-0", "is negative"},
      {"abc", "is not a duration"},
      {"s", "is not a duration"},
      {".", "is not a duration"},
      {"5x", "unknown unit \"x\""},
      {"5 s", "unknown unit \" s\""},
      {"1e3", "unknown unit \"e3\""},
      {"5S", "unknown unit \"S\""},
      {"7d", "unknown unit \"d\""},
      {"1.0005s", "more precise than 1 ms"},
      {"0.5ms", "more precise than 1 ms"},
      {"169h", "too long"},
      {"99999999999999999999s", "too long"},
  };
  for (const auto& [text, expected] : cases) {
    BOOST_TEST_CONTEXT("duration \"" << text << "\"") {
      const auto message = duration_error(text);
      BOOST_TEST(contains(message, expected), message);
    }
  }
}

BOOST_AUTO_TEST_CASE(node_lists) {
  const auto nodes = cli::parse_node_list(
      "redis://127.0.0.1:7001, redis://:secret@127.0.0.1:7002/2,redis://localhost", "--nodes");
  BOOST_TEST_REQUIRE(nodes.size() == 3u);
  BOOST_TEST(nodes[0].port == 7001);
  BOOST_TEST(nodes[1].password == "secret");
  BOOST_TEST(nodes[1].database == 2);
  BOOST_TEST(nodes[2].host == "localhost");
  BOOST_TEST(nodes[2].port == 6379);

  auto list_error = [](std::string_view list) {
    return error_of<cli::usage_error>([&] { (void)cli::parse_node_list(list, "REDLOCK_NODES"); });
  };
  BOOST_TEST(list_error("") == "REDLOCK_NODES: the node list is empty");
  BOOST_TEST(list_error("redis://a,,redis://b") ==
             "REDLOCK_NODES: entry 2 of the node list is empty");
  BOOST_TEST(contains(list_error("redis://a:1,redis://b:2,redis://a:1"),
                      "REDLOCK_NODES: node a:1 is listed twice"));
  const auto bad_port = list_error("redis://127.0.0.1:99999");
  BOOST_TEST(bad_port.starts_with("REDLOCK_NODES: bad node URL"), bad_port);
  BOOST_TEST(contains(bad_port, "port"), bad_port);
  BOOST_TEST(contains(list_error("127.0.0.1:6379"), "missing scheme"));
  // The password never appears in a message.
  BOOST_TEST(!contains(list_error("redis://u:hunter2@host:0"), "hunter2"));
}

BOOST_AUTO_TEST_CASE(run_with_defaults) {
  const auto run = parse_run({"job", "--", "make", "-j2"});
  BOOST_TEST(run.resource == "job");
  BOOST_TEST(run.command == (std::vector<std::string>{"make", "-j2"}),
             boost::test_tools::per_element());
  BOOST_TEST(run.ttl.count() == 30000);
  BOOST_TEST(run.wait.count() == 10000);
  BOOST_TEST(run.grace.count() == 5000);
  BOOST_TEST(run.conflict_exit_code == 75);
  BOOST_TEST(!run.quiet);
  BOOST_TEST_REQUIRE(run.nodes.size() == 1u);
  BOOST_TEST(run.nodes[0].address() == "127.0.0.1:6379");
}

BOOST_AUTO_TEST_CASE(run_with_every_option) {
  const auto run = parse_run({"--ttl", "2s", "--wait=300ms", "-q", "--grace", "1", "--nodes",
                              "redis://a:1,redis://b:2,redis://c:3", "job", "--", "sh", "-c",
                              "exit 3", "--ttl", "--"});
  BOOST_TEST(run.ttl.count() == 2000);
  BOOST_TEST(run.wait.count() == 300);
  BOOST_TEST(run.grace.count() == 1000);
  BOOST_TEST(run.quiet);
  BOOST_TEST(run.nodes.size() == 3u);
  // Everything after the first "--" is COMMAND's, flags and "--" included.
  BOOST_TEST(run.command == (std::vector<std::string>{"sh", "-c", "exit 3", "--ttl", "--"}),
             boost::test_tools::per_element());
  // Options may also follow RESOURCE, as long as they come before "--".
  BOOST_TEST(parse_run({"job", "--quiet", "--", "true"}).quiet);
  BOOST_TEST(!run.fencing);
  BOOST_TEST(parse_run({"--fencing", "job", "--", "true"}).fencing);
}

BOOST_AUTO_TEST_CASE(an_option_given_twice_takes_its_last_value) {
  const auto run = parse_run({"--ttl", "2s", "job", "--ttl=3s", "--", "true"});
  BOOST_TEST(run.ttl.count() == 3000);
  BOOST_TEST(parse_run({"-q", "--quiet", "job", "--", "true"}).quiet);
}

BOOST_AUTO_TEST_CASE(values_that_look_like_options_stay_values) {
  // "-1s" after --grace is its (refused) value, not an option "-1s"; an empty value is a value.
  check_usage_errors({
      {{"run", "--grace", "-1s", "job", "--", "true"}, "--grace: \"-1s\" is negative"},
      {{"run", "-q=1", "job", "--", "true"}, "-q takes no value"},
      {{"run", "--ttl", "--", "true"}, "--ttl needs a value"},
  });
  const auto extend = parse_as<cli::extend_options>(
      {"extend", "job", "--ttl", "1s", "--token", "-x", "--ttl", "2s"});
  BOOST_TEST(extend.token == "-x");
  BOOST_TEST(extend.ttl.count() == 2000);
}

BOOST_AUTO_TEST_CASE(zero_durations_where_zero_has_a_meaning) {
  BOOST_TEST(cli::parse_duration("0", true).count() == 0);
  BOOST_TEST(cli::parse_duration("0.0ms", true).count() == 0);
  BOOST_TEST(cli::parse_duration("2s", true).count() == 2000);
  BOOST_TEST(contains(duration_error("0"), "is zero"));
  // Zero is allowed, nothing else changes: a negative or too precise zero is still wrong.
  BOOST_TEST(
      contains(error_of<std::invalid_argument>([] { (void)cli::parse_duration("-0", true); }),
               "is negative"));

  // --wait 0: one round (flock -n); --grace 0: SIGKILL at once.
  const auto run = parse_run({"--wait", "0", "--grace=0s", "job", "--", "true"});
  BOOST_TEST(run.wait.count() == 0);
  BOOST_TEST(run.grace.count() == 0);
  BOOST_TEST(parse_run({"--wait=0ms", "job", "--", "true"}).wait.count() == 0);
  BOOST_TEST(parse_run({"--wait", "1ms", "job", "--", "true"}).wait.count() == 1);
}

BOOST_AUTO_TEST_CASE(conflict_exit_code) {
  BOOST_TEST(parse_run({"--conflict-exit-code", "3", "job", "--", "true"}).conflict_exit_code == 3);
  BOOST_TEST(parse_run({"--conflict-exit-code=0", "job", "--", "true"}).conflict_exit_code == 0);
  BOOST_TEST(parse_run({"--conflict-exit-code", "255", "job", "--", "true"}).conflict_exit_code ==
             255);
  BOOST_TEST(parse_run({"--conflict-exit-code", "007", "job", "--", "true"}).conflict_exit_code ==
             7);
  for (const std::string bad : {"256", "300", "-1", "x", "3x", "+3", " 3", "3.0", "1000"}) {
    BOOST_TEST_CONTEXT("value \"" << bad << "\"") {
      const auto message = usage_error({"run", "--conflict-exit-code", bad, "job", "--", "true"});
      BOOST_TEST(message == "--conflict-exit-code: \"" + bad +
                                "\" is not an exit code (expected a whole number from 0 to 255)",
                 message);
    }
  }
  BOOST_TEST(usage_error({"run", "--conflict-exit-code=", "job", "--", "true"}) ==
             "--conflict-exit-code needs a value");
  BOOST_TEST(usage_error({"run", "job", "--conflict-exit-code"}) ==
             "--conflict-exit-code needs a value");
  // Only `run` has it.
  BOOST_TEST(contains(usage_error({"status", "--conflict-exit-code", "3", "job"}),
                      "unknown option \"--conflict-exit-code\" for \"redlock status\""));
}

// --permits N turns RESOURCE into a semaphore of N permits, for run and status alike; N is a
// plain whole number within the semaphore's range, or a usage error naming it.
BOOST_AUTO_TEST_CASE(permits) {
  BOOST_TEST(!parse_run({"job", "--", "true"}).permits.has_value());
  BOOST_TEST(parse_run({"--permits", "2", "job", "--", "true"}).permits.value_or(0) == 2u);
  BOOST_TEST(parse_run({"--permits=1", "job", "--", "true"}).permits.value_or(0) == 1u);
  BOOST_TEST(parse_run({"job", "--permits", "1024", "--", "true"}).permits.value_or(0) == 1024u);
  BOOST_TEST(parse_run({"--permits", "007", "job", "--", "true"}).permits.value_or(0) == 7u);
  // After "--" it is COMMAND's.
  const auto run = parse_run({"job", "--", "sh", "--permits", "2"});
  BOOST_TEST(!run.permits.has_value());
  BOOST_TEST(run.command.size() == 3u);

  const auto status = parse({"status", "--permits", "3", "job"});
  BOOST_TEST_REQUIRE(std::holds_alternative<cli::status_options>(status));
  BOOST_TEST(std::get<cli::status_options>(status).permits.value_or(0) == 3u);
  BOOST_TEST(!std::get<cli::status_options>(parse({"status", "job"})).permits.has_value());

  for (const std::string bad : {"0", "1025", "x", "2x", "-1", "+2", " 2", "2.0", "99999", "0000"}) {
    BOOST_TEST_CONTEXT("value \"" << bad << "\"") {
      const std::string expected = "--permits: \"" + bad +
                                   "\" is not a number of permits (expected a whole number from 1 "
                                   "to 1024)";
      const auto message = usage_error({"run", "--permits", bad, "job", "--", "true"});
      BOOST_TEST(message == expected, message);
      BOOST_TEST(usage_error({"status", "--permits", bad, "job"}) == expected);
    }
  }
  BOOST_TEST(usage_error({"run", "--permits=", "job", "--", "true"}) == "--permits needs a value");
  BOOST_TEST(usage_error({"status", "job", "--permits"}) == "--permits needs a value");
}

// --read and --write turn RESOURCE into a read-write lock for run; one of them, never with
// --permits.
BOOST_AUTO_TEST_CASE(read_and_write) {
  BOOST_TEST(!parse_run({"doc", "--", "true"}).side.has_value());
  BOOST_TEST((parse_run({"--read", "doc", "--", "true"}).side == cli::rw_side::read));
  BOOST_TEST((parse_run({"doc", "--write", "--", "true"}).side == cli::rw_side::write));
  BOOST_TEST((parse_run({"--read", "--read", "doc", "--", "true"}).side == cli::rw_side::read));
  // After "--" it is COMMAND's.
  BOOST_TEST(!parse_run({"doc", "--", "cat", "--read"}).side.has_value());
  BOOST_TEST(usage_error({"run", "--read", "--write", "doc", "--", "true"}) ==
             "--read and --write exclude each other: give one");
  BOOST_TEST(usage_error({"run", "--write", "--permits", "2", "doc", "--", "true"}) ==
             "--write and --permits exclude each other: RESOURCE is either a read-write lock or a "
             "semaphore");
}

// Several RESOURCEs are one lock over all of them: kept in the order given, each once, at most
// 64; never with --permits or --read/--write, which name one semaphore or read-write lock.
BOOST_AUTO_TEST_CASE(several_resources) {
  const auto one = parse_run({"job", "--", "true"});
  BOOST_TEST(one.resources == (std::vector<std::string>{"job"}), boost::test_tools::per_element());
  BOOST_TEST(one.resource == "job");
  const auto two = parse_run({"from", "--fencing", "to", "from", "--", "true"});
  BOOST_TEST(two.resources == (std::vector<std::string>{"from", "to"}),
             boost::test_tools::per_element());
  BOOST_TEST(two.resource == "from and to");
  BOOST_TEST(two.fencing);
  BOOST_TEST(parse_run({"c", "b", "a", "--", "true"}).resource == "c, b and a");
  // A RESOURCE given twice is one: this run takes one lock.
  BOOST_TEST(parse_run({"job", "job", "--", "true"}).resources.size() == 1u);

  std::vector<std::string> args = {"run"};
  for (std::size_t i = 0; i < cli::max_run_resources; ++i)
    args.push_back(fmt::format("r{}", i));
  args.push_back("r0");
  args.push_back("--");
  args.push_back("true");
  BOOST_TEST(parse_run({args.begin() + 1, args.end()}).resources.size() == cli::max_run_resources);
  args.insert(args.begin() + 1, "one-too-many");
  BOOST_TEST(contains(usage_error(args), "too many RESOURCEs: 65 given, at most 64"),
             usage_error(args));

  BOOST_TEST(usage_error({"run", "--permits", "2", "a", "b", "--", "true"}) ==
             "--permits takes one NAME, not \"a\", \"b\": several RESOURCEs are one lock over all "
             "of them");
  BOOST_TEST(contains(usage_error({"run", "a", "--read", "b", "--", "true"}), "--read takes one"));
  BOOST_TEST(
      contains(usage_error({"run", "a", "b", "--write", "--", "true"}), "--write takes one"));
}

// --json, for run and status alike: a switch, anywhere before "--", off unless given.
BOOST_AUTO_TEST_CASE(json) {
  BOOST_TEST(!parse_run({"job", "--", "true"}).json);
  BOOST_TEST(parse_run({"--json", "job", "--", "true"}).json);
  BOOST_TEST(parse_run({"job", "--json", "-q", "--", "true"}).json);
  // After "--" it is COMMAND's.
  const auto run = parse_run({"job", "--", "jq", "--json"});
  BOOST_TEST(!run.json);
  BOOST_TEST(run.command.size() == 2u);

  const auto status = parse({"status", "job", "--json"});
  BOOST_TEST_REQUIRE(std::holds_alternative<cli::status_options>(status));
  BOOST_TEST(std::get<cli::status_options>(status).json);
  BOOST_TEST(!std::get<cli::status_options>(parse({"status", "job"})).json);
  const auto slots = parse({"status", "--json", "--permits", "2", "job"});
  BOOST_TEST(std::get<cli::status_options>(slots).json);

  BOOST_TEST(usage_error({"run", "--json=yes", "job", "--", "true"}) == "--json takes no value");
  BOOST_TEST(usage_error({"status", "--json=1", "job"}) == "--json takes no value");
}

BOOST_AUTO_TEST_CASE(nodes_come_from_the_flag_then_the_environment_then_the_default) {
  const std::string env = "redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003";
  BOOST_TEST(parse_run({"job", "--", "true"}, env).nodes.size() == 3u);
  BOOST_TEST(parse_run({"--nodes", "redis://x:1", "job", "--", "true"}, env).nodes.size() == 1u);
  BOOST_TEST(parse_run({"job", "--", "true"}, "").nodes[0].address() == "127.0.0.1:6379");
  BOOST_TEST(contains(usage_error({"run", "job", "--", "true"}, "http://x"), "REDLOCK_NODES"));
  // A bad environment does not matter when --nodes replaces it.
  BOOST_TEST(parse_run({"--nodes", "redis://x:1", "job", "--", "true"}, "http://x").nodes.size() ==
             1u);
}

BOOST_AUTO_TEST_CASE(help_and_version) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"--help"},
                                                                {"-h"},
                                                                {"help"},
                                                                {"help", "run"},
                                                                {"run", "--help"},
                                                                {"run", "x", "-h"},
                                                                {"status", "--help"},
                                                                {"help", "status"}}) {
    BOOST_TEST_CONTEXT("args starting with " << args.front()) {
      BOOST_TEST(std::holds_alternative<cli::help_request>(parse(args)));
    }
  }
  BOOST_TEST(std::get<cli::help_request>(parse({"run", "--help"})).topic == "run");
  BOOST_TEST(std::get<cli::help_request>(parse({"help", "status"})).topic == "status");
  BOOST_TEST(std::get<cli::help_request>(parse({"--help"})).topic.empty());
  BOOST_TEST(std::holds_alternative<cli::version_request>(parse({"--version"})));
}

// What a bug report needs: the tool's and the library's versions, the Boost it was compiled
// with, and the OpenSSL it runs, without OpenSSL's release date.
BOOST_AUTO_TEST_CASE(version_names_the_library_boost_and_openssl) {
  std::string boost = BOOST_LIB_VERSION;  // "1_81"
  std::replace(boost.begin(), boost.end(), '_', '.');
  const auto text = cli::version_text("OpenSSL 3.0.17 1 Jul 2025");
  BOOST_TEST(text.starts_with(fmt::format("redlock {0} (redlock-asio {0}, Boost {1}.",
                                          REDLOCK_VERSION_STRING, boost)),
             text);
  BOOST_TEST(text.ends_with(", OpenSSL 3.0.17)\n"), text);
  BOOST_TEST(cli::version_text("OpenSSL").ends_with(", OpenSSL)\n"));
}

BOOST_AUTO_TEST_CASE(usage_errors_name_the_culprit) {
  const std::vector<std::pair<std::vector<std::string>, std::string_view>> cases = {
      {{}, "no command given"},
      {{"lock"}, "unknown command \"lock\""},
      {{"--nodes", "redis://x", "run"}, "unknown option \"--nodes\""},
      {{"help", "lock"}, "no help for \"lock\""},
      {{"run", "--bogus", "job", "--", "true"}, "unknown option \"--bogus\""},
      {{"run", "--ttl=", "job", "--", "true"}, "--ttl needs a value"},
      {{"run", "job", "--ttl"}, "--ttl needs a value"},
      {{"run", "--ttl", "0", "job", "--", "true"}, "--ttl: \"0\" is zero"},
      {{"run", "--ttl", "100ms", "job", "--", "true"}, "--ttl: \"100ms\" is too short"},
      {{"run", "--wait", "abc", "job", "--", "true"}, "--wait: \"abc\" is not a duration"},
      {{"run", "--grace", "-1s", "job", "--", "true"}, "--grace: \"-1s\" is negative"},
      {{"run", "--wait", "-0", "job", "--", "true"}, "--wait: \"-0\" is negative"},
      {{"run", "--quiet=yes", "job", "--", "true"}, "--quiet takes no value"},
      {{"run", "--nodes", "redis://h:0", "job", "--", "true"}, "--nodes: bad node URL"},
      {{"run"}, "missing RESOURCE"},
      {{"run", "--", "true"}, "missing RESOURCE"},
      {{"run", "", "--", "true"}, "RESOURCE must not be empty"},
      {{"run", "job"}, "missing \"--\" and COMMAND"},
      {{"run", "job", "true"},
       "missing \"--\" before COMMAND: \"job\", \"true\" were all taken as RESOURCEs"},
      {{"run", "a", "", "--", "true"}, "RESOURCE must not be empty"},
      {{"run", "job", "--"}, "missing COMMAND after \"--\""},
      {{"status"}, "missing RESOURCE"},
      {{"status", "a", ""}, "RESOURCE must not be empty"},
      {{"status", "--ttl", "1s", "a"}, "unknown option \"--ttl\" for \"redlock status\""},
      {{"status", "--timeout", "0", "a"}, "--timeout: \"0\" is zero"},
  };
  for (const auto& [args, expected] : cases) {
    BOOST_TEST_CONTEXT("args: " << (args.empty() ? std::string("(none)") : args.front()) << " ... ("
                                << args.size() << " words)") {
      const auto message = usage_error(args);
      BOOST_TEST(contains(message, expected), message);
      BOOST_TEST(!contains(message, "\n"));
    }
  }
}

BOOST_AUTO_TEST_CASE(status_options) {
  const auto parsed = parse({"status", "--timeout", "250ms", "job"}, "redis://a:1,redis://b:2");
  BOOST_TEST_REQUIRE(std::holds_alternative<cli::status_options>(parsed));
  const auto& status = std::get<cli::status_options>(parsed);
  BOOST_TEST(status.resource == "job");
  BOOST_TEST(status.timeout.count() == 250);
  BOOST_TEST(status.nodes.size() == 2u);
  BOOST_TEST(std::get<cli::status_options>(parse({"status", "job"})).timeout.count() == 1000);
}

// status --read NAME / --write NAME: a read-write lock (either flag shows all of it); several
// RESOURCEs: each lock and the set of them. The same rules as run's for what RESOURCE names.
BOOST_AUTO_TEST_CASE(status_of_a_read_write_lock_and_of_a_set) {
  const auto status = [](std::vector<std::string> args) {
    args.insert(args.begin(), "status");
    const auto parsed = parse(args);
    BOOST_TEST_REQUIRE(std::holds_alternative<cli::status_options>(parsed));
    return std::get<cli::status_options>(parsed);
  };
  BOOST_TEST(!status({"doc"}).side.has_value());
  BOOST_TEST((status({"--read", "doc"}).side == cli::rw_side::read));
  BOOST_TEST((status({"doc", "--write", "--json"}).side == cli::rw_side::write));
  BOOST_TEST(status({"--read", "doc"}).resource == "doc");
  const auto set = status({"b", "a", "b", "--json"});
  BOOST_TEST(set.resources == (std::vector<std::string>{"b", "a"}),
             boost::test_tools::per_element());
  BOOST_TEST(set.resource == "b and a");
  BOOST_TEST(set.json);
  BOOST_TEST(usage_error({"status", "--read", "--write", "doc"}) ==
             "--read and --write exclude each other: give one");
  BOOST_TEST(usage_error({"status", "--read=yes", "doc"}) == "--read takes no value");
  BOOST_TEST(usage_error({"status", "--read", "--permits", "2", "doc"}) ==
             "--read and --permits exclude each other: RESOURCE is either a read-write lock or a "
             "semaphore");
  BOOST_TEST(usage_error({"status", "--write", "a", "b"}) ==
             "--write takes one NAME, not \"a\", \"b\": several RESOURCEs are shown as locks and "
             "as the set of them");
  BOOST_TEST(contains(usage_error({"status", "--permits", "2", "a", "b"}), "--permits takes one"));
  BOOST_TEST(contains(usage_error({"status", "--read"}), "missing RESOURCE"));
}

// The --tls-* flags fill in what the rediss:// URLs leave unset, on every TLS node and only there.
BOOST_AUTO_TEST_CASE(tls_flags_apply_to_every_tls_node) {
  const auto run = parse_run(
      {"--nodes", "rediss://a:1,rediss://b:2?ca=/own.pem&sni=own.name,redis://c:3,unix:///s.sock",
       "--tls-ca", "/ca.pem", "--tls-cert", "/c.pem", "--tls-key=/k.pem", "--tls-server-name",
       "redis.internal", "--tls-insecure", "job", "--", "true"});
  BOOST_TEST_REQUIRE(run.nodes.size() == 4u);
  const auto& a = run.nodes[0].tls;
  BOOST_TEST(a.enabled);
  BOOST_TEST(a.ca_file == "/ca.pem");
  BOOST_TEST(a.cert_file == "/c.pem");
  BOOST_TEST(a.key_file == "/k.pem");
  BOOST_TEST(a.server_name == "redis.internal");
  BOOST_TEST(!a.verify_peer);
  const auto& b = run.nodes[1].tls;
  BOOST_TEST(b.ca_file == "/own.pem");
  BOOST_TEST(b.server_name == "own.name");
  BOOST_TEST(!run.nodes[2].tls.enabled);
  BOOST_TEST(run.nodes[2].tls.ca_file.empty());
  BOOST_TEST(run.nodes[3].unix_path == "/s.sock");

  const auto parsed = parse({"status", "--tls-ca", "/ca.pem", "job"}, "rediss://a:1");
  BOOST_TEST_REQUIRE(std::holds_alternative<cli::status_options>(parsed));
  BOOST_TEST(std::get<cli::status_options>(parsed).nodes[0].tls.ca_file == "/ca.pem");
}

BOOST_AUTO_TEST_CASE(tls_flag_mistakes) {
  BOOST_TEST(contains(
      usage_error({"run", "--nodes", "redis://a:1", "--tls-ca", "/ca.pem", "job", "--", "true"}),
      "--tls-* options apply to rediss:// nodes, and none is given"));
  BOOST_TEST(
      contains(usage_error({"status", "--nodes", "rediss://a:1", "--tls-cert", "/c.pem", "job"}),
               "--tls-cert and --tls-key go together"));
  BOOST_TEST(contains(usage_error({"status", "--nodes", "rediss://a:1", "--tls-ca=", "job"}),
                      "--tls-ca needs a value"));
  BOOST_TEST(
      contains(usage_error({"status", "--nodes", "rediss://a:1", "--tls-insecure=yes", "job"}),
               "--tls-insecure"));
  BOOST_TEST(contains(usage_error({"status", "--nodes", "unix:///s.sock?verify=no", "job"}),
                      "TLS over a Unix socket is not supported"));
}

// `acquire` takes the lock as `run` does, with run's options for that and none of COMMAND's.
BOOST_AUTO_TEST_CASE(acquire_takes_the_options_run_takes_the_lock_with) {
  const auto defaults = parse_as<cli::acquire_options>({"acquire", "job"});
  BOOST_TEST(defaults.resource == "job");
  BOOST_TEST(defaults.ttl.count() == 30000);
  BOOST_TEST(defaults.wait.count() == 10000);
  BOOST_TEST(defaults.conflict_exit_code == 75);
  BOOST_TEST(!defaults.quiet);
  BOOST_TEST(!defaults.json);
  BOOST_TEST(!defaults.fencing);
  BOOST_TEST_REQUIRE(defaults.nodes.size() == 1u);
  BOOST_TEST(defaults.nodes[0].address() == "127.0.0.1:6379");

  const auto every = parse_as<cli::acquire_options>(
      {"acquire", "--ttl", "60s", "--wait=0", "--conflict-exit-code", "3", "--fencing", "-q", "job",
       "--json", "--nodes", "redis://a:1,redis://b:2,redis://c:3"});
  BOOST_TEST(every.resource == "job");
  BOOST_TEST(every.ttl.count() == 60000);
  BOOST_TEST(every.wait.count() == 0);
  BOOST_TEST(every.conflict_exit_code == 3);
  BOOST_TEST(every.fencing);
  BOOST_TEST(every.quiet);
  BOOST_TEST(every.json);
  BOOST_TEST(every.nodes.size() == 3u);

  const std::string env = "rediss://127.0.0.1:7001,rediss://127.0.0.1:7002";
  const auto tls = parse_as<cli::acquire_options>({"acquire", "--tls-ca", "/ca.pem", "job"}, env);
  BOOST_TEST_REQUIRE(tls.nodes.size() == 2u);
  BOOST_TEST(tls.nodes[1].tls.ca_file == "/ca.pem");

  check_usage_errors({
      {{"acquire"}, "missing RESOURCE (usage: redlock acquire [OPTIONS] RESOURCE)"},
      {{"acquire", ""}, "RESOURCE must not be empty"},
      {{"acquire", "a", "b"}, "unexpected argument \"b\": acquire takes one RESOURCE"},
      {{"acquire", "job", "--", "true"}, "acquire runs no COMMAND"},
      {{"acquire", "--grace", "1s", "job"}, "unknown option \"--grace\" for \"redlock acquire\""},
      {{"acquire", "--permits", "2", "job"}, "unknown option \"--permits\""},
      {{"acquire", "--token", "t", "job"}, "unknown option \"--token\""},
      {{"acquire", "--ttl", "100ms", "job"}, "--ttl: \"100ms\" is too short: at least 500 ms"},
      {{"acquire", "--ttl", "100ms", "job"}, "nobody renews the lock"},
      {{"acquire", "--wait", "soon", "job"}, "--wait: \"soon\" is not a duration"},
      {{"acquire", "--conflict-exit-code", "256", "job"}, "is not an exit code"},
      {{"acquire", "--json=1", "job"}, "--json takes no value"},
      {{"acquire", "--nodes", "redis://a:1", "--tls-ca", "/ca.pem", "job"},
       "--tls-* options apply to rediss:// nodes"},
  });
  // run keeps its own reason for the floor.
  BOOST_TEST(contains(usage_error({"run", "--ttl", "100ms", "job", "--", "true"}),
                      "so that renewal has time to reach the nodes"));
}

BOOST_AUTO_TEST_CASE(extend_needs_a_token_and_a_ttl) {
  const auto extend =
      parse_as<cli::extend_options>({"extend", "job", "--token", "1a2b", "--ttl", "2m", "--json",
                                     "-q", "--nodes", "redis://x:1"});
  BOOST_TEST(extend.resource == "job");
  BOOST_TEST(extend.token == "1a2b");
  BOOST_TEST(extend.ttl.count() == 120000);
  BOOST_TEST(extend.json);
  BOOST_TEST(extend.quiet);
  BOOST_TEST_REQUIRE(extend.nodes.size() == 1u);
  BOOST_TEST(extend.nodes[0].address() == "x:1");
  const auto plain = parse_as<cli::extend_options>({"extend", "--token=1a2b", "--ttl=500ms", "job"},
                                                   "redis://y:2");
  BOOST_TEST(plain.token == "1a2b");
  BOOST_TEST(plain.ttl.count() == 500);
  BOOST_TEST(!plain.json);
  BOOST_TEST(!plain.quiet);
  BOOST_TEST(plain.nodes[0].address() == "y:2");

  check_usage_errors({
      {{"extend"},
       "missing RESOURCE (usage: redlock extend [OPTIONS] RESOURCE --token TOKEN "
       "--ttl DURATION)"},
      {{"extend", "job", "--ttl", "1s"}, "missing --token TOKEN"},
      {{"extend", "job", "--token", "t"}, "missing --ttl DURATION"},
      {{"extend", "job", "--token", "", "--ttl", "1s"}, "--token must not be empty"},
      {{"extend", "job", "--token=", "--ttl", "1s"}, "--token needs a value"},
      {{"extend", "job", "--ttl", "1s", "--token"}, "--token needs a value"},
      {{"extend", "job", "--token", "t", "--ttl", "0"}, "--ttl: \"0\" is zero"},
      {{"extend", "job", "--token", "t", "--ttl", "100ms"}, "--ttl: \"100ms\" is too short"},
      {{"extend", "job", "other", "--token", "t", "--ttl", "1s"},
       "unexpected argument \"other\": extend takes one RESOURCE"},
      {{"extend", "job", "--token", "t", "--ttl", "1s", "--force"},
       "unknown option \"--force\" for \"redlock extend\""},
      {{"extend", "job", "--token", "t", "--ttl", "1s", "--wait", "1s"},
       "unknown option \"--wait\" for \"redlock extend\""},
  });
}

BOOST_AUTO_TEST_CASE(release_by_token_or_by_force) {
  const auto by_token = parse_as<cli::release_options>({"release", "job", "--token", "1a2b"});
  BOOST_TEST(by_token.resource == "job");
  BOOST_TEST(by_token.token == "1a2b");
  BOOST_TEST(!by_token.force);
  BOOST_TEST(!by_token.yes);
  BOOST_TEST(!by_token.json);

  const auto forced = parse_as<cli::release_options>({"release", "--force", "job"});
  BOOST_TEST(forced.force);
  BOOST_TEST(forced.token.empty());
  BOOST_TEST(!forced.yes);
  const auto confirmed =
      parse_as<cli::release_options>({"release", "job", "--force", "--yes", "--json", "-q"});
  BOOST_TEST(confirmed.force);
  BOOST_TEST(confirmed.yes);
  BOOST_TEST(confirmed.json);
  BOOST_TEST(confirmed.quiet);

  check_usage_errors({
      {{"release"}, "missing RESOURCE"},
      {{"release", "job"},
       "missing --token TOKEN (the token `redlock acquire` printed) or --force"},
      {{"release", "job", "--token", "t", "--force"}, "--token and --force exclude each other"},
      {{"release", "--force", "job", "--token=t"}, "--token and --force exclude each other"},
      {{"release", "job", "--token", "t", "--yes"}, "--yes goes with --force"},
      {{"release", "job", "--token", ""}, "--token must not be empty"},
      {{"release", "--force=yes", "job"}, "--force takes no value"},
      {{"release", "--force", "--yes=1", "job"}, "--yes takes no value"},
      {{"release", "job", "--token", "t", "--ttl", "1s"},
       "unknown option \"--ttl\" for \"redlock release\""},
      {{"release", "a", "b", "--force"}, "unexpected argument \"b\": release takes one RESOURCE"},
  });
}

BOOST_AUTO_TEST_CASE(help_for_the_commands_of_several_steps) {
  for (const std::string topic : {"acquire", "extend", "release"}) {
    BOOST_TEST_CONTEXT("topic " << topic) {
      BOOST_TEST(std::get<cli::help_request>(parse({"help", topic})).topic == topic);
      BOOST_TEST(std::get<cli::help_request>(parse({topic, "--help"})).topic == topic);
      BOOST_TEST(std::get<cli::help_request>(parse({topic, "job", "-h"})).topic == topic);
    }
  }
  BOOST_TEST(contains(usage_error({"help", "lock"}),
                      "the commands are run, status, acquire, extend and release"));
  BOOST_TEST(contains(usage_error({"lock"}),
                      "expected run, status, acquire, extend and release, or help"));
}

BOOST_AUTO_TEST_SUITE_END()
