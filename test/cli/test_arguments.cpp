#include "redlock/arguments.hpp"

#include <boost/test/unit_test.hpp>

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

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
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
      {{"run", "job", "true"}, "unexpected argument \"true\" after RESOURCE \"job\""},
      {{"run", "job", "--"}, "missing COMMAND after \"--\""},
      {{"status"}, "missing RESOURCE"},
      {{"status", "a", "b"}, "unexpected argument \"b\""},
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

BOOST_AUTO_TEST_SUITE_END()
