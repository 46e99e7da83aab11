#ifndef REDLOCK_EXAMPLES_DOC_SNIPPETS_CONTEXT_HPP
#define REDLOCK_EXAMPLES_DOC_SNIPPETS_CONTEXT_HPP

// What the fragments of the documentation take for granted (cmake/redlock_doc_snippets.cmake):
// the library, the Asio pieces they use, `asio` for boost::asio, the chrono literals, and the
// reader's own work that they call, here as stand-ins that do nothing. Their parameters (locks,
// lease, io, nodes, amount) come from each fragment's marker.

#include <redlock/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

inline asio::awaitable<void> serve_from_cache() {
  co_return;
}
inline asio::awaitable<void> rebuild_cache() {
  co_return;
}
inline asio::awaitable<void> transfer(int, int, long) {
  co_return;
}
inline asio::awaitable<void> run_export(redlock::lease&) {
  co_return;
}

#endif
