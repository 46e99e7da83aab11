// consumer: a program outside the redlock tree, built against an installed package, a build tree
// or an add_subdirectory copy. It must compile, link and run with nothing but redlock::redlock (or
// the pkg-config flags): the public headers, Boost, threads and, for the static library, fmt.
//
//   consumer [--nodes URL,URL,...] [--expect held|refused|any]
//
// Nodes come from --nodes, else REDLOCK_NODES, else redis://127.0.0.1:6379. It prints the quorum,
// makes one acquire round on a resource of its own and releases whatever it got. --expect held
// exits 1 unless the lock was acquired and released; --expect refused exits 1 if it was acquired.
// Exit 2: bad arguments or node list.
//
// The build passes REDLOCK_PACKAGE_VERSION, the version its package lookup reported; the headers
// compiled here must say the same, or this does not compile.

#include <redlock/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#ifdef REDLOCK_PACKAGE_VERSION
static_assert(std::string_view(REDLOCK_VERSION_STRING) == REDLOCK_PACKAGE_VERSION,
              "<redlock/version.hpp> is not the version of the package that was found");
#endif
static_assert(REDLOCK_VERSION ==
              REDLOCK_VERSION_MAJOR * 10000 + REDLOCK_VERSION_MINOR * 100 + REDLOCK_VERSION_PATCH);

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

enum class expectation { any, held, refused };

struct outcome {
  bool finished = false;
  bool held = false;
  bool released = false;
  std::string detail;
  std::exception_ptr failure;
};

int usage(std::string_view why) {
  std::cerr << "consumer: " << why << "\n"
            << "usage: consumer [--nodes URL,URL,...] [--expect held|refused|any]\n";
  return 2;
}

asio::awaitable<void> lock_once(redlock::client& locks, std::string resource, outcome& out) {
  redlock::lock_options options;
  // No renewal and a short TTL: should the release below fail, the key is gone within seconds.
  options.ttl = 5s;
  options.auto_renew = false;
  auto [acquire_error, lease] =
      co_await locks.async_try_acquire(resource, options, asio::as_tuple(asio::use_awaitable));
  if (acquire_error) {
    // The diagnostics name each node's answer; the bare message is all a failure may have.
    out.detail = lease.diagnostics().empty() ? acquire_error.message() : lease.diagnostics();
    co_return;
  }
  out.held = true;
  auto [release_error] = co_await lease.async_release(asio::as_tuple(asio::use_awaitable));
  out.released = !release_error;
  if (release_error) out.detail = "release failed: " + release_error.message();
}

}  // namespace

int main(int argc, char* argv[]) {
  std::string node_list = "redis://127.0.0.1:6379";
  if (const char* env = std::getenv("REDLOCK_NODES"); env != nullptr && *env != '\0') {
    node_list = env;
  }
  expectation expect = expectation::any;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--nodes" || arg == "--expect") {
      if (i + 1 >= argc) return usage(std::string(arg) + " needs a value");
      const std::string_view value = argv[++i];
      if (arg == "--nodes") {
        node_list = value;
      } else if (value == "held") {
        expect = expectation::held;
      } else if (value == "refused") {
        expect = expectation::refused;
      } else if (value == "any") {
        expect = expectation::any;
      } else {
        return usage("--expect wants held, refused or any, not \"" + std::string(value) + "\"");
      }
    } else {
      return usage("unknown argument \"" + std::string(arg) + "\"");
    }
  }

  std::vector<redlock::node_config> nodes;
  try {
    nodes = redlock::node_config::from_url_list(node_list);
  } catch (const std::invalid_argument& e) {
    return usage(std::string("bad node list: ") + e.what());
  }

  outcome out;
  asio::io_context io;
  try {
    redlock::client_options client_options;
    // Generous: this checks that the package links and runs, not how fast a loaded host answers.
    client_options.node_timeout = 1s;
    redlock::client locks(io.get_executor(), std::move(nodes), client_options);
    std::cout << "consumer: redlock " << REDLOCK_VERSION_STRING << ", " << locks.size()
              << " node(s), quorum " << locks.quorum() << "\n";

    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    asio::co_spawn(io, lock_once(locks, "redlock-consumer:" + std::to_string(stamp), out),
                   [&](std::exception_ptr failure) {
                     out.finished = true;
                     out.failure = failure;
                     // The client's reconnect timers would keep run_for busy until its limit.
                     io.stop();
                   });
    io.run_for(15s);
  } catch (const boost::system::system_error& e) {
    return usage(std::string("bad client configuration: ") + e.what());
  }

  if (!out.finished) {
    std::cerr << "consumer: the acquire round did not finish within 15 s\n";
    return 1;
  }
  if (out.failure) {
    try {
      std::rethrow_exception(out.failure);
    } catch (const std::exception& e) {
      std::cerr << "consumer: " << e.what() << "\n";
      return 1;
    }
  }
  if (out.held) {
    std::cout << "consumer: acquired" << (out.released ? " and released" : "") << "\n";
  } else {
    std::cout << "consumer: not acquired: " << out.detail << "\n";
  }
  if (out.held && !out.released) {
    std::cerr << "consumer: " << out.detail << "\n";
    return 1;
  }
  if (expect == expectation::held && !out.held) return 1;
  if (expect == expectation::refused && out.held) return 1;
  return 0;
}
