// RESP codec throughput.
//
// resp_parse: a realistic reply mix (mostly +OK, :1, :0, $-1 and short bulks, some arrays of
// bulks, a few errors, some 1-4 KiB bulks) fed to the parser in 16 KiB pieces through
// prepare()/commit(), the way a socket read fills it. resp_encode: SET key value NX PX 10000
// commands appended to a pipeline buffer.
//
// Prints one JSON line per run and a median line per workload. --quick runs a tiny amount, for
// smoke tests.
#include "resp/encoder.hpp"
#include "resp/parser.hpp"
#include "resp/value.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace resp = redlock::resp;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t k_read_size = 16 * 1024;
constexpr int k_runs = 5;

// A fixed-seed generator so every run and every build parses the same bytes.
class rng {
 public:
  std::uint64_t next() noexcept {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_;
  }
  std::size_t below(std::size_t n) noexcept { return static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t state_ = 0x9e3779b97f4a7c15ull;
};

void append_bulk(std::string& out, std::size_t n, char fill) {
  out += '$';
  out += std::to_string(n);
  out += "\r\n";
  out.append(n, fill);
  out += "\r\n";
}

// Builds about `target` bytes of whole replies; returns the number of replies.
std::size_t make_reply_mix(std::string& out, std::size_t target) {
  rng r;
  std::size_t replies = 0;
  while (out.size() < target) {
    const std::size_t pick = r.below(1000);
    if (pick < 350) {
      out += "+OK\r\n";
    } else if (pick < 500) {
      out += ":1\r\n";
    } else if (pick < 650) {
      out += ":0\r\n";
    } else if (pick < 750) {
      out += "$-1\r\n";
    } else if (pick < 880) {
      append_bulk(out, 8 + r.below(33), 't');  // tokens, short values
    } else if (pick < 950) {
      const std::size_t n = 2 + r.below(5);
      out += '*';
      out += std::to_string(n);
      out += "\r\n";
      for (std::size_t i = 0; i < n; ++i)
        append_bulk(out, 4 + r.below(20), 'a');
    } else if (pick < 970) {
      out += "-NOSCRIPT No matching script. Please use EVAL.\r\n";
    } else {
      append_bulk(out, 1024 + r.below(3 * 1024 + 1), 'v');
    }
    ++replies;
  }
  return replies;
}

struct figures {
  double mb_per_s = 0;
  double per_s = 0;
};

volatile std::size_t g_sink = 0;

figures run_parse(const std::string& mix, std::size_t mix_replies, std::size_t total_bytes) {
  resp::parser p;
  boost::system::error_code ec;
  // Whole passes over the mix, so the stream always ends on a reply boundary.
  const std::size_t passes = std::max<std::size_t>(1, total_bytes / mix.size());
  std::size_t replies = 0;
  std::size_t checksum = 0;
  const auto start = clock_type::now();
  for (std::size_t pass = 0; pass < passes; ++pass) {
    for (std::size_t pos = 0; pos < mix.size(); pos += k_read_size) {
      const std::size_t n = std::min(k_read_size, mix.size() - pos);
      const std::span<char> space = p.prepare(n);
      std::memcpy(space.data(), mix.data() + pos, n);
      p.commit(n);
      while (std::optional<resp::value> v = p.next(ec)) {
        checksum += v->text.size() + v->elements.size();
        ++replies;
      }
      if (ec) {
        std::fprintf(stderr, "resp_bench: parse failed: %s\n", p.error_message().c_str());
        std::exit(1);
      }
    }
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (replies != passes * mix_replies) {
    std::fprintf(stderr, "resp_bench: parsed %zu replies, expected %zu\n", replies,
                 passes * mix_replies);
    std::exit(1);
  }
  g_sink = g_sink + checksum;
  const double bytes = static_cast<double>(passes) * static_cast<double>(mix.size());
  return {bytes / (1024.0 * 1024.0) / seconds, static_cast<double>(replies) / seconds};
}

figures run_encode(std::size_t commands) {
  static constexpr std::string_view args[] = {"SET", "key", "value", "NX", "PX", "10000"};
  std::string pipeline;
  std::size_t bytes = 0;
  const auto start = clock_type::now();
  for (std::size_t i = 0; i < commands; ++i) {
    resp::encode_command(pipeline, args);
    // One pipelined write every 64 commands; the buffer keeps its capacity, as a connection's does.
    if (i % 64 == 63) {
      bytes += pipeline.size();
      g_sink = g_sink + static_cast<unsigned char>(pipeline[pipeline.size() / 2]);
      pipeline.clear();
    }
  }
  bytes += pipeline.size();
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return {static_cast<double>(bytes) / (1024.0 * 1024.0) / seconds,
          static_cast<double>(commands) / seconds};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void print_run(const char* workload, const char* rate_name, const figures& f, int run) {
  std::printf(
      "{\"schema\":\"redlock-bench/1\",\"lib\":\"redlock-asio\",\"workload\":\"%s\","
      "\"mb_per_s\":%.1f,\"%s\":%.0f,\"run\":%d}\n",
      workload, f.mb_per_s, rate_name, f.per_s, run);
  std::fflush(stdout);
}

void print_median(const char* workload, const char* rate_name, const std::vector<figures>& runs) {
  std::vector<double> mb;
  std::vector<double> rate;
  for (const figures& f : runs) {
    mb.push_back(f.mb_per_s);
    rate.push_back(f.per_s);
  }
  std::printf(
      "{\"schema\":\"redlock-bench/1\",\"lib\":\"redlock-asio\",\"workload\":\"%s\","
      "\"stat\":\"median\",\"mb_per_s\":%.1f,\"%s\":%.0f}\n",
      workload, median(mb), rate_name, median(rate));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
      return 2;
    }
  }
  const std::size_t mix_size = quick ? 256 * 1024 : 4 * 1024 * 1024;
  const std::size_t parse_total = quick ? 1024 * 1024 : 256 * 1024 * 1024;
  const std::size_t encode_commands = quick ? 20000 : 10000000;

  std::string mix;
  mix.reserve(mix_size + 8 * 1024);
  const std::size_t mix_replies = make_reply_mix(mix, mix_size);

  std::vector<figures> runs;
  for (int run = 1; run <= k_runs; ++run) {
    runs.push_back(run_parse(mix, mix_replies, parse_total));
    print_run("resp_parse", "replies_per_s", runs.back(), run);
  }
  print_median("resp_parse", "replies_per_s", runs);

  runs.clear();
  for (int run = 1; run <= k_runs; ++run) {
    runs.push_back(run_encode(encode_commands));
    print_run("resp_encode", "commands_per_s", runs.back(), run);
  }
  print_median("resp_encode", "commands_per_s", runs);
  return 0;
}
