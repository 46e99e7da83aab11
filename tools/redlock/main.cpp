// redlock: run a command under a Redlock distributed lock, look at a lock, or take, extend and
// release one across the steps of a script (see help.cpp).

#include "acquire_command.hpp"
#include "arguments.hpp"
#include "child_process.hpp"
#include "exit_codes.hpp"
#include "help.hpp"
#include "run_command.hpp"
#include "status_command.hpp"
#include "token_commands.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <openssl/crypto.h>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

int main(int argc, char* argv[]) {
  namespace cli = redlock::cli;
  // Before anything else touches signals or opens descriptors: this is what COMMAND inherits.
  const auto inherited = cli::inheritance::capture();

  const std::vector<std::string> args(argv + 1, argv + argc);
  std::optional<std::string_view> env_nodes;
  if (const char* value = std::getenv(std::string(cli::nodes_variable).c_str())) env_nodes = value;

  try {
    const auto invocation = cli::parse_command_line(args, env_nodes);
    return std::visit(
        [&](const auto& request) -> int {
          using request_type = std::decay_t<decltype(request)>;
          if constexpr (std::is_same_v<request_type, cli::help_request>) {
            fmt::print("{}", cli::help_text(request.topic));
            return 0;
          } else if constexpr (std::is_same_v<request_type, cli::version_request>) {
            fmt::print("{}", cli::version_text(OpenSSL_version(OPENSSL_VERSION)));
            return 0;
          } else if constexpr (std::is_same_v<request_type, cli::run_options>) {
            return cli::run_command(request, inherited);
          } else if constexpr (std::is_same_v<request_type, cli::acquire_options>) {
            return cli::acquire_command(request, inherited);
          } else if constexpr (std::is_same_v<request_type, cli::extend_options>) {
            return cli::extend_command(request);
          } else if constexpr (std::is_same_v<request_type, cli::release_options>) {
            return cli::release_command(request);
          } else {
            return cli::status_command(request);
          }
        },
        invocation);
  } catch (const cli::usage_error& e) {
    fmt::print(stderr, "redlock: {}\n", e.what());
    return cli::exit_code::usage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "redlock: {}\n", e.what());
    return cli::exit_code::failure;
  }
}
