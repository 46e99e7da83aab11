// 08_metrics: what the lock does, as Prometheus metrics on /metrics.
//
// What it shows
//   - client_options::observer with redlock::prometheus_observer (component redlock::prometheus):
//     every acquire, extension, loss and release and every node link change lands in the user's
//     prometheus::Registry, here exposed on /metrics by prometheus-cpp's Exposer.
//   - A small server: 4 workers take 25 requests each, and every request updates a shared record
//     under the lock "example:metrics-record" (redlock::with_lock).
//   - Then it scrapes its own /metrics over HTTP, as Prometheus would, and checks the figures
//     against the workload: 100 acquires and 100 releases, no loss, every node up.
//
// How to run it
//   REDLOCK_NODES=redis://127.0.0.1:6379 ./08_metrics            checks itself and exits
//   REDLOCK_NODES=... ./08_metrics --serve 127.0.0.1:9464         then serves /metrics until
//                                                                  interrupted
//   or, from a build directory configured with tests, against five throwaway nodes:
//     test/support/redis_nodes -- examples/08_metrics
//
// Exits 0 and prints the scraped figures when they match the workload; 1 with a message when not.

#include "common/nodes.hpp"
#include "common/run.hpp"
#include <redlock/prometheus.hpp>
#include <redlock/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/system_error.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr int workers = 4;
constexpr int requests_per_worker = 25;

// The value of the first sample line that starts with `series` (name and labels as exposed), or
// none.
std::optional<double> sample(const std::string& exposition, std::string_view series) {
  std::istringstream lines(exposition);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

// How many sample lines of `name` have the value `value`.
int samples_with_value(const std::string& exposition, std::string_view name, double value) {
  std::istringstream lines(exposition);
  int count = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size()) continue;
    if (line[name.size()] != '{' && line[name.size()] != ' ') continue;
    const auto space = line.rfind(' ');
    if (std::stod(line.substr(space + 1)) == value) ++count;
  }
  return count;
}

// GET /metrics from 127.0.0.1:port, as Prometheus scrapes it; returns the body.
asio::awaitable<std::string> scrape(unsigned short port) {
  asio::ip::tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::use_awaitable);
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  std::string response;
  auto [ec, n] = co_await asio::async_read(socket, asio::dynamic_buffer(response),
                                           asio::as_tuple(asio::use_awaitable));
  (void)n;
  if (ec && ec != asio::error::eof) throw boost::system::system_error(ec, "reading /metrics");
  const auto body = response.find("\r\n\r\n");
  if (response.compare(0, 12, "HTTP/1.0 200") != 0 && response.compare(0, 12, "HTTP/1.1 200") != 0)
    throw std::runtime_error("/metrics answered: " + response.substr(0, response.find('\r')));
  co_return body == std::string::npos ? std::string() : response.substr(body + 4);
}

struct record {
  long updates = 0;
  int inside = 0;  // requests updating it right now: never more than one
  bool overlapped = false;
};

asio::awaitable<void> worker(redlock::client& locks, record& shared) {
  for (int i = 0; i < requests_per_worker; ++i) {
    co_await redlock::with_lock(locks, "example:metrics-record",
                                redlock::lock_options{.ttl = 10s, .wait = 30s},
                                [&](redlock::lease&) -> asio::awaitable<void> {
                                  shared.overlapped = shared.overlapped || ++shared.inside > 1;
                                  co_await examples::sleep_for(1ms);  // the request's work
                                  ++shared.updates;
                                  --shared.inside;
                                });
  }
}

asio::awaitable<int> demo(std::vector<redlock::node_config> nodes, std::string serve_at) {
  const auto executor = co_await asio::this_coro::executor;
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::Exposer exposer(serve_at.empty() ? "127.0.0.1:0" : serve_at);
  exposer.RegisterCollectable(registry);
  const auto port = static_cast<unsigned short>(exposer.GetListeningPorts().front());

  redlock::client_options options;
  options.observer = std::make_shared<redlock::prometheus_observer>(*registry);
  const std::size_t node_count = nodes.size();
  redlock::client locks(executor, std::move(nodes), options);

  record shared;
  std::vector<asio::awaitable<void>> all;
  for (int i = 0; i < workers; ++i)
    all.push_back(worker(locks, shared));
  co_await examples::run_all(std::move(all));

  const std::string metrics = co_await scrape(port);
  const int total = workers * requests_per_worker;
  const auto acquired = sample(metrics, R"(redlock_acquire_seconds_count{outcome="acquired"})");
  const auto released = sample(metrics, R"(redlock_releases_total{outcome="released"})");
  const auto lost = sample(metrics, "redlock_leases_lost_total");
  const auto held = sample(metrics, "redlock_hold_seconds_count");
  const int nodes_up = samples_with_value(metrics, "redlock_node_up", 1.0);
  std::printf(
      "scraped /metrics on port %u: %.0f acquires, %.0f releases, %.0f leases lost, "
      "%d of %zu nodes up\n",
      static_cast<unsigned>(port), acquired.value_or(-1), released.value_or(-1), lost.value_or(-1),
      nodes_up, node_count);
  if (shared.overlapped || shared.updates != total) {
    std::fprintf(stderr, "08_metrics: the record was updated %ld times, overlapping: %s\n",
                 shared.updates, shared.overlapped ? "yes" : "no");
    co_return 1;
  }
  if (acquired != total || released != total || held != total || lost != 0.0 ||
      nodes_up != static_cast<int>(node_count)) {
    std::fprintf(stderr, "08_metrics: the figures do not match the workload; /metrics said:\n%s",
                 metrics.c_str());
    co_return 1;
  }
  if (!serve_at.empty()) {
    std::printf("serving http://%s/metrics until interrupted\n", serve_at.c_str());
    asio::signal_set stop(executor, SIGINT, SIGTERM);
    co_await stop.async_wait(asio::use_awaitable);
  }
  co_await locks.async_shutdown(asio::use_awaitable);
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string serve_at;
  if (argc == 3 && std::string_view(argv[1]) == "--serve") {
    serve_at = argv[2];
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: 08_metrics [--serve HOST:PORT]\n");
    return 2;
  }
  auto nodes = examples::nodes_from_environment();
  asio::io_context io;
  int exit_code = 1;
  asio::co_spawn(io, demo(std::move(nodes), std::move(serve_at)),
                 examples::exit_status("08_metrics", exit_code));
  io.run();
  return exit_code;
}
